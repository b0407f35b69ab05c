package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestMigrate_ClassifiesStoredFailures: a database at schema version 4,
// holding failures in the words Inkwell wrote before classes existed, gets
// each one's class from migration 0005 ('legacy' where the words do not
// tell), on attempts (finished attempts, which never change otherwise) and
// jobs alike; and an installation id whose keys start after its last job,
// so the jobs already stored keep the provider key they may have been
// sent under.
func TestMigrate_ClassifiesStoredFailures(t *testing.T) {
	t.Parallel()
	errorsAndClasses := []struct {
		text  string
		class inkwell.ErrorClass
	}{
		{"worker restarted", inkwell.ClassWorkerRestarted},
		{"provider: provider call: timeout: context deadline exceeded", inkwell.ClassTimeout},
		{"provider: provider call: network error: outcome unknown, the request may have reached the provider and been billed: EOF", inkwell.ClassTimeout},
		{"provider: provider call: connection refused: dial tcp 127.0.0.1:9: connect: connection refused", inkwell.ClassNotSent},
		{"provider: provider call: rate limited: HTTP 429: slow down", inkwell.ClassRateLimited},
		{"provider: provider call: server error: HTTP 500: internal error", inkwell.ClassProviderError},
		{"provider: provider call: server error: HTTP 503: unavailable", inkwell.ClassProviderError},
		// A gateway's answer: the provider may have billed behind it
		// (callerror.go, gatewayGaveUp), so classed as a timeout is.
		{"provider: provider call: server error: HTTP 502: bad gateway", inkwell.ClassTimeout},
		{"provider: provider call: server error: HTTP 504: gateway timeout", inkwell.ClassTimeout},
		{"provider: provider call: client error: HTTP 401: bad key", inkwell.ClassRejected},
		{"payload unreadable: unexpected end of JSON input", inkwell.ClassRejected},
		{"provider: provider call: malformed answer: answer has no choices", inkwell.ClassMalformed},
		{"provider: provider call: canceled: context canceled", inkwell.ClassShutdown},
		{inkwell.ErrShutdownGrace, inkwell.ClassShutdown},
		{"could not store the provider's answer: CHECK constraint failed", inkwell.ClassUnstorable},
		{"the old inkwell said something else", inkwell.ClassLegacy},
	}
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		dsn, old := openAtVersion(t, b, 4)
		db := old.DB()
		const at = `'2026-11-30T00:00:00.000000Z'`
		for i, e := range errorsAndClasses {
			id := i + 1
			mustExecAll(t, db,
				fmt.Sprintf(`INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, error, lane, created_at, started_at, finished_at)
					VALUES (%d, 'k%d', 'h', '{"prompt":"p"}', 'failed', %s, 'local', %s, %s, %s)`, id, id, quote(e.text), at, at, at),
				fmt.Sprintf(`INSERT INTO job_attempts (job_id, attempt_number, status, error, lane, started_at, finished_at)
					VALUES (%d, 1, 'failed', %s, 'local', %s, %s)`, id, quote(e.text), at, at))
		}
		mustExecAll(t, db, fmt.Sprintf(`INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, created_at)
			VALUES (%d, 'queued', 'h', '{"prompt":"p"}', 'queued', %s)`, len(errorsAndClasses)+1, at))
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}

		st := storetest.MustOpen(t, dsn, store.Options{}) // applies 0005 and later
		for i, e := range errorsAndClasses {
			d := mustShow(t, st, int64(i+1))
			if d.Job.ErrorClass != e.class || d.Attempts[0].ErrorClass != e.class {
				t.Errorf("%q: job class %q, attempt class %q; want %q", e.text, d.Job.ErrorClass, d.Attempts[0].ErrorClass, e.class)
			}
			if d.Job.Error != e.text || d.Attempts[0].Error != e.text {
				t.Errorf("%q: the migration changed the words: job %q attempt %q", e.text, d.Job.Error, d.Attempts[0].Error)
			}
		}
		if d := mustShow(t, st, int64(len(errorsAndClasses)+1)); d.Job.ErrorClass != "" {
			t.Errorf("queued job got class %q, want none", d.Job.ErrorClass)
		}
		in, err := st.Installation(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		last := int64(len(errorsAndClasses) + 1)
		if in.KeysFromJob != last+1 {
			t.Errorf("installation keys from job %d, want %d (after the last stored job)", in.KeysFromJob, last+1)
		}
		if got, want := in.ProviderKey(last, "queued"), inkwell.ProviderKey(last, "queued"); got != want {
			t.Errorf("a job stored before the migration gets key %q, want the key it had: %q", got, want)
		}
		if got := in.ProviderKey(last+1, "new"); got == inkwell.ProviderKey(last+1, "new") {
			t.Errorf("a job stored after the migration gets key %q without the installation id", got)
		}
		wantCountsKept(t, st, "after migration 0005")
	})
}

// quote is s as an SQL string literal.
func quote(s string) string {
	out := "'"
	for _, r := range s {
		if r == '\'' {
			out += "''"
			continue
		}
		out += string(r)
	}
	return out + "'"
}

// TestMigrate_RefusedWhileALaneRuns: on PostgreSQL a pending migration is
// not applied while another process's lane holds its lock on the database
// (an older Inkwell would run on under a schema, and provider keys, changed
// beneath it); the refusal names the lock sessions and changes nothing.
func TestMigrate_RefusedWhileALaneRuns(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	running := storetest.MustOpen(t, dsn, store.Options{})
	l, err := running.LockLane(t.Context(), "old")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	var top int
	if err := running.DB().QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&top); err != nil {
		t.Fatal(err)
	}
	// The database as an older Inkwell left it: the newest migration not
	// recorded (its tables exist, so applying it would fail anyway: the
	// refusal must come first).
	mustExecAll(t, running.DB(), fmt.Sprintf(`DELETE FROM schema_migrations WHERE version = %d`, top))
	_, err = store.Open(t.Context(), dsn, store.Options{})
	if inkwell.ErrorCode(err) != inkwell.ELANEHELD || !strings.Contains(err.Error(), "lanes are running on this database") {
		t.Fatalf("migrate under a live lane: %v, want %s naming the running lanes", err, inkwell.ELANEHELD)
	}
	var n int
	if err := running.DB().QueryRow(`SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, top).Scan(&n); err != nil || n != 0 {
		t.Errorf("refused migration recorded version %d (%d rows, %v)", top, n, err)
	}
}

// openAtVersion opens a fresh database of backend b with the embedded
// migrations 1..n only applied, as an older Inkwell left it, for a
// test of what a later migration does to its rows; it returns the DSN too.
func openAtVersion(t *testing.T, b storetest.Backend, n int) (string, *store.Store) {
	t.Helper()
	dsn := b.DSN
	if b.Name == "postgres" {
		dsn = storetest.EmptyPostgresDSN(t)
	}
	old := storetest.MustOpen(t, dsn, store.Options{NoMigrate: true})
	if err := store.MigrateUpTo(t.Context(), old, n); err != nil {
		t.Fatalf("migrations 1-%d of %s: %v", n, b.Name, err)
	}
	return dsn, old
}
