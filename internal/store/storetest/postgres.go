package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the admin connection's driver, "pgx"
)

// Each PostgreSQL test gets a database of its own, cloned from a template
// that holds the migrated schema: CREATE DATABASE … TEMPLATE copies files,
// which is much faster than migrating every time, and tests in parallel
// never see each other's rows or lane locks.
//
// The template is named by a digest of the embedded migrations, so a changed
// migration gets a new template. `go test ./...` runs packages in parallel
// processes against one server, so the template is built under a
// cross-process advisory lock, under a temporary name, and renamed into
// place only once complete: a process that finds it finds it finished.

// templateLockKey is the advisory lock that serializes template builds
// ('inkt', 0); Inkwell's own locks use other first keys.
const templateLockKey = "1768846452, 0"

// pgServer is what one process learned about the server at url. It keeps
// no connection open between tests (goleak in other packages would see its
// pool's goroutine): each create and drop opens and closes its own.
type pgServer struct {
	url      string
	template string
	err      error
}

var (
	serversMu sync.Mutex
	servers   = map[string]*pgServer{}
)

// freshPostgres creates a database from the migrated template and drops it
// (WITH (FORCE), so a leaked connection cannot keep it) when t ends.
func freshPostgres(t testing.TB, url string) string {
	t.Helper()
	return createDatabase(t, url, "")
}

// createDatabase creates a database from template (the migrated template
// when empty) and drops it when t ends.
func createDatabase(t testing.TB, url, template string) string {
	t.Helper()
	srv := server(url)
	if srv.err != nil {
		t.Fatalf("%s is set but PostgreSQL is not usable: %v", PostgresEnv, srv.err)
	}
	if template == "" {
		template = srv.template
	}
	name := "inkwell_t_" + randomHex(6)
	if err := adminExec(url, `CREATE DATABASE `+name+` TEMPLATE `+template); err != nil {
		t.Fatalf("create test database %s from %s: %v", name, template, err)
	}
	t.Cleanup(func() {
		if err := adminExec(url, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	dsn, err := withDatabase(url, name)
	if err != nil {
		t.Fatalf("%s: %v", PostgresEnv, err)
	}
	return dsn
}

// EmptyPostgresDSN returns the URL of a new database with no schema at all,
// dropped when t ends, for tests of migration itself. Like PostgresDSN it
// skips when INKWELL_TEST_POSTGRES_URL is unset and fails when it is set
// but the server cannot be reached.
func EmptyPostgresDSN(t testing.TB) string {
	t.Helper()
	url := os.Getenv(PostgresEnv)
	if url == "" {
		postgresSkipped.Add(1)
		t.Skip("PostgreSQL tests skipped: set " + PostgresEnv + "=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable to run them")
	}
	return createDatabase(t, url, "template0")
}

// server connects to url and makes sure the template exists, once per
// process; the outcome, error included, is kept for every later test.
func server(url string) *pgServer {
	serversMu.Lock()
	defer serversMu.Unlock()
	if srv, ok := servers[url]; ok {
		return srv
	}
	srv := &pgServer{url: url}
	servers[url] = srv
	admin, err := sql.Open("pgx", url)
	if err != nil {
		srv.err = err
		return srv
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		srv.err = fmt.Errorf("cannot reach the server: %w", err)
		return srv
	}
	srv.template, srv.err = ensureTemplate(ctx, admin, url)
	return srv
}

// adminExec runs one statement on a connection of its own to url.
func adminExec(url, q string) error {
	admin, err := sql.Open("pgx", url)
	if err != nil {
		return err
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = admin.ExecContext(ctx, q)
	return err
}

func ensureTemplate(ctx context.Context, admin *sql.DB, url string) (string, error) {
	digest, err := store.MigrationsDigest("postgres")
	if err != nil {
		return "", err
	}
	tpl := templatePrefix + digest
	conn, err := admin.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(`+templateLockKey+`)`); err != nil {
		return "", fmt.Errorf("lock template build: %w", err)
	}
	// The connection goes back to the pool: the session lock must not.
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+templateLockKey+`)`)
	var exists bool
	if err := conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, tpl).Scan(&exists); err != nil {
		return "", fmt.Errorf("look for template %s: %w", tpl, err)
	}
	if !exists {
		if err := buildTemplate(ctx, conn, url, tpl); err != nil {
			return tpl, err
		}
		dropStaleTemplates(ctx, conn, templatePrefix, tpl)
	}
	// Stamp the template's last use, which tells dropStaleTemplates that a
	// test process may still be cloning it. Best effort, as the drop is.
	_, _ = conn.ExecContext(ctx, `COMMENT ON DATABASE `+tpl+` IS '`+templateUsed+time.Now().UTC().Format(time.RFC3339)+`'`)
	return tpl, nil
}

// templatePrefix starts every template's name; the migrations' digest ends it.
const templatePrefix = "inkwell_tpl_"

// templateUsed starts a template's comment, followed by when a test
// process last began to clone it.
const templateUsed = "inkwell test template, last used "

// staleAfter is how long a template of other migrations must have gone
// unused before it is dropped: far longer than any test run, so a process
// still running the tests of an older tree keeps its template.
const staleAfter = time.Hour

// dropStaleTemplates drops the databases named prefix… other than keep:
// the templates (and unfinished builds) of other migration digests, left
// behind each time a migration changes, once nobody has used them for
// staleAfter. It runs only when a new template was just built, under the
// build lock. A template in use is left: DROP refuses a database with
// sessions, and waits at most lock_timeout on one being cloned. Every
// error is ignored: the next new template tries again.
func dropStaleTemplates(ctx context.Context, conn *sql.Conn, prefix, keep string) {
	rows, err := conn.QueryContext(ctx, `SELECT datname, COALESCE(shobj_description(oid, 'pg_database'), '')
		FROM pg_database WHERE starts_with(datname, $1) AND datname <> $2`, prefix, keep)
	if err != nil {
		return
	}
	var stale []string
	for rows.Next() {
		var name, comment string
		if rows.Scan(&name, &comment) != nil {
			continue
		}
		used, err := time.Parse(time.RFC3339, strings.TrimPrefix(comment, templateUsed))
		if err != nil || time.Since(used) > staleAfter {
			stale = append(stale, name)
		}
	}
	rows.Close()
	if len(stale) == 0 {
		return
	}
	if _, err := conn.ExecContext(ctx, `SET lock_timeout = '2s'`); err != nil {
		return
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `RESET lock_timeout`)
	for _, name := range stale {
		_, _ = conn.ExecContext(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize())
	}
}

// buildTemplate migrates a scratch database, closes every connection to
// it, and renames it to tpl, which then accepts no connections at all.
func buildTemplate(ctx context.Context, conn *sql.Conn, url, tpl string) error {
	build := tpl + "_build"
	for _, q := range []string{`DROP DATABASE IF EXISTS ` + build + ` WITH (FORCE)`, `CREATE DATABASE ` + build} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("build template: %w", err)
		}
	}
	dsn, err := withDatabase(url, build)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		return fmt.Errorf("build template: migrate: %w", err)
	}
	if err := st.Close(); err != nil {
		return fmt.Errorf("build template: close: %w", err)
	}
	// A closed connection's backend may still be exiting; FORCE-terminate
	// any that lingers before the rename, which needs the database idle.
	if _, err := conn.ExecContext(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = $1`, build); err != nil {
		return fmt.Errorf("build template: close sessions: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `ALTER DATABASE `+build+` RENAME TO `+tpl); err != nil {
		return fmt.Errorf("build template: rename: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `ALTER DATABASE `+tpl+` WITH ALLOW_CONNECTIONS false`); err != nil {
		return fmt.Errorf("build template: seal: %w", err)
	}
	return nil
}

// withDatabase returns url with its database replaced by name.
func withDatabase(raw, name string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse %q: %w", raw, err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
