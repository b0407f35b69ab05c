package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestClassifyPostgres(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("exec: %w", &pgconn.PgError{Code: code, Message: "m"}) }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"serialization failure", pg("40001"), inkwell.EUNAVAILABLE},
		{"deadlock", pg("40P01"), inkwell.EUNAVAILABLE},
		{"lock not available", pg("55P03"), inkwell.EUNAVAILABLE},
		{"too many connections", pg("53300"), inkwell.EUNAVAILABLE},
		{"disk full", pg("53100"), inkwell.EUNAVAILABLE},
		{"out of memory", pg("53200"), inkwell.EUNAVAILABLE},
		{"connection failure", pg("08006"), inkwell.EUNAVAILABLE},
		{"admin shutdown", pg("57P01"), inkwell.EUNAVAILABLE},
		{"cannot connect now", pg("57P03"), inkwell.EUNAVAILABLE},
		{"connection closed", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), inkwell.EUNAVAILABLE},
		{"unique violation stays itself", pg("23505"), inkwell.EINTERNAL},
		{"check violation stays itself", pg("23514"), inkwell.EINTERNAL},
		{"syntax error stays itself", pg("42601"), inkwell.EINTERNAL},
		{"plain error", errors.New("boom"), inkwell.EINTERNAL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classifyPostgres(tc.err)
			if code := inkwell.ErrorCode(got); code != tc.want {
				t.Errorf("classifyPostgres(%v) code = %q, want %q", tc.err, code, tc.want)
			}
			if !errors.Is(got, tc.err) && !errors.Is(got, errors.Unwrap(tc.err)) {
				t.Errorf("classifyPostgres(%v) = %v, lost the cause", tc.err, got)
			}
		})
	}
	if !isPostgresUniqueViolation(pg("23505")) || isPostgresUniqueViolation(pg("23503")) {
		t.Errorf("isPostgresUniqueViolation: want true for 23505 only")
	}
}

func TestLaneLockKey(t *testing.T) {
	t.Parallel()
	// A fixed value: the key must never change between releases, or a new
	// version would not see an old version's live lock on the same lane.
	if got := laneLockKey("local"); got != -1213811442 {
		t.Errorf(`laneLockKey("local") = %d, want -1213811442 (FNV-1a of "lane:local")`, got)
	}
	if laneLockKey("A") == laneLockKey("B") || laneLockKey("lane-1") == laneLockKey("lane-2") {
		t.Errorf("distinct lanes share a key")
	}
	// TestPostgres_LaneLock/KeyCollisionNamed relies on this pair.
	if laneLockKey("lane-232789") != laneLockKey("lane-429192") {
		t.Errorf("lane-232789 and lane-429192 no longer share a key; find another colliding pair")
	}
}

// TestLockSession_Keepalives reads, inside the lock's own session, the
// server-side keepalive settings that bound how long a dead client's lock
// lingers, and the application_name that names the holder.
func TestLockSession_Keepalives(t *testing.T) {
	t.Parallel()
	url := os.Getenv("INKWELL_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("PostgreSQL tests skipped: set INKWELL_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable to run them")
	}
	s, err := Open(t.Context(), url, Options{NoMigrate: true})
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	defer s.Close()
	l, err := s.LockLane(t.Context(), "keepalive-test-"+strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	want := map[string]string{
		"tcp_keepalives_idle":     strconv.Itoa(int(keepaliveIdle.Seconds())),
		"tcp_keepalives_interval": strconv.Itoa(int(keepaliveInterval.Seconds())),
		"tcp_keepalives_count":    strconv.Itoa(keepaliveCount),
		"application_name":        holderAppName("lane", l.Self),
	}
	for name, w := range want {
		var got string
		if err := l.hold.(*pgLock).conn.QueryRowContext(t.Context(), `SELECT current_setting($1)`, name).Scan(&got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != w {
			t.Errorf("lock session %s = %q, want %q", name, got, w)
		}
	}
}
