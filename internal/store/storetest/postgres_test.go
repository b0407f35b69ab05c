package storetest

import (
	"database/sql"
	"os"
	"slices"
	"testing"
	"time"
)

// TestDropStaleTemplates builds databases under a prefix of its own, so
// it never touches another run's templates, and drops the stale ones.
func TestDropStaleTemplates(t *testing.T) {
	t.Parallel()
	url := os.Getenv(PostgresEnv)
	if url == "" {
		t.Skip("PostgreSQL tests skipped: set " + PostgresEnv + "=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable to run them")
	}
	admin, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	prefix := "inkwell_tplz_" + randomHex(4) + "_"
	t.Cleanup(func() {
		for _, n := range []string{"unstamped", "stamped_long_ago", "recent", "keep", "busy"} {
			adminExec(url, `DROP DATABASE IF EXISTS `+prefix+n+` WITH (FORCE)`)
		}
	})
	stamp := func(name string, at time.Time) {
		if _, err := admin.ExecContext(t.Context(), `COMMENT ON DATABASE `+prefix+name+` IS '`+templateUsed+at.UTC().Format(time.RFC3339)+`'`); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"unstamped", "stamped_long_ago", "recent", "keep", "busy"} {
		if _, err := admin.ExecContext(t.Context(), `CREATE DATABASE `+prefix+n+` TEMPLATE template0`); err != nil {
			t.Fatal(err)
		}
	}
	stamp("stamped_long_ago", time.Now().Add(-2*staleAfter))
	stamp("recent", time.Now())
	// A session in "busy" is a use that no stamp shows: DROP refuses it.
	dsn, err := withDatabase(url, prefix+"busy")
	if err != nil {
		t.Fatal(err)
	}
	busy, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if err := busy.PingContext(t.Context()); err != nil {
		t.Fatal(err)
	}

	conn, err := admin.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dropStaleTemplates(t.Context(), conn, prefix, prefix+"keep")

	rows, err := admin.QueryContext(t.Context(), `SELECT substr(datname, length($1) + 1) FROM pg_database WHERE starts_with(datname, $1) ORDER BY 1`, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var left []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		left = append(left, n)
	}
	if want := []string{"busy", "keep", "recent"}; !slices.Equal(left, want) {
		t.Errorf("databases left = %v, want %v (the unstamped and long-unused ones dropped)", left, want)
	}
}
