// Package storetest runs one test body against every database backend:
// a real SQLite file in a temporary directory, and a real PostgreSQL
// database when INKWELL_TEST_POSTGRES_URL is set.
//
// It is for tests only. It imports internal/store.
package storetest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/inkwell/inkwell/internal/store"
)

// PostgresEnv names the variable that points the tests at a PostgreSQL server.
const PostgresEnv = "INKWELL_TEST_POSTGRES_URL"

// Backend is one database a test body runs against.
type Backend struct {
	Name string // "sqlite" or "postgres"
	DSN  string // what store.Open takes; a fresh, empty database
}

// Run runs fn as subtests "sqlite" and "postgres", each on a fresh, migrated
// store. The postgres subtest is skipped, with a line saying how to enable
// it, when INKWELL_TEST_POSTGRES_URL is unset, and fails when it is set but
// the server cannot be reached.
func Run(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	RunBackends(t, func(t *testing.T, b Backend) {
		fn(t, MustOpen(t, b.DSN, store.Options{}))
	})
}

// RunBackends runs fn once per backend with a fresh, empty database DSN, for
// tests that open (and reopen) the store themselves.
func RunBackends(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, Backend{Name: "sqlite", DSN: SQLitePath(t)})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, Backend{Name: "postgres", DSN: PostgresDSN(t)})
	})
}

// SQLitePath returns the path of a fresh database file in t.TempDir().
func SQLitePath(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "inkwell.db")
}

// PostgresDSN returns the URL of a fresh PostgreSQL database holding the
// migrated schema and no rows, dropped when the test (or benchmark) ends; it
// skips when INKWELL_TEST_POSTGRES_URL is unset.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	url := os.Getenv(PostgresEnv)
	if url == "" {
		postgresSkipped.Add(1)
		t.Skip("PostgreSQL tests skipped: set " + PostgresEnv + "=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable to run them")
	}
	return freshPostgres(t, url)
}

// postgresSkipped counts the tests PostgresDSN skipped for want of
// INKWELL_TEST_POSTGRES_URL, for Exit's summary.
var postgresSkipped atomic.Int64

// Main is a TestMain for a package whose tests use PostgreSQL: it runs
// the tests and exits through Exit.
func Main(m *testing.M) { Exit(m.Run()) }

// Exit prints, when tests were skipped for want of PostgreSQL, one line
// saying how many and how to run them, then exits with code. (The go
// command shows it with -v, for one package, or when the package fails;
// 'go test ./...' shows only the ok line of a package that passes.)
func Exit(code int) {
	if n := postgresSkipped.Load(); n > 0 {
		fmt.Printf("storetest: %d PostgreSQL tests skipped: %s is not set; set it, e.g. %s='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable', to run them\n",
			n, PostgresEnv, PostgresEnv)
	}
	os.Exit(code)
}

// MustOpen opens (and migrates) the store at dsn and closes it at cleanup.
func MustOpen(t *testing.T, dsn string, opts store.Options) *store.Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = TestLogger(t)
	}
	s, err := store.Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestLogger writes log lines to t.Log.
func TestLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// ProviderKey is the provider idempotency key st's lanes send for a job,
// for looking the job up in a provider simulator's ledger.
func ProviderKey(t testing.TB, st *store.Store, jobID int64, key string) string {
	t.Helper()
	in, err := st.Installation(context.Background())
	if err != nil {
		t.Fatalf("installation: %v", err)
	}
	return in.ProviderKey(jobID, key)
}

// ClaimAs claims at most one job for lane (nil when nothing is queued) as a
// lane that then goes away: it takes the lane's lock for the claim and lets
// go after, leaving the attempt running as a dead lane leaves it.
func ClaimAs(t testing.TB, st *store.Store, lane string) *store.Claimed {
	t.Helper()
	l, err := st.LockLane(context.Background(), lane)
	if err != nil {
		t.Fatalf("LockLane %s for a claim: %v", lane, err)
	}
	defer l.Release()
	cs, err := st.ClaimUpTo(context.Background(), l, 1)
	if err != nil {
		t.Fatalf("claim for lane %s: %v", lane, err)
	}
	if len(cs) == 0 {
		return nil
	}
	return cs[0]
}
