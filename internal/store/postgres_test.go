package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// PostgreSQL-only behaviour: the advisory lane lock, rescue on proof, the
// database's clock, and concurrent migration. The shared suite (storetest.Run
// in the other files) covers everything the two dialects have in common.

// pgWait bounds every wait on a condition here.
const pgWait = 20 * time.Second

func TestPostgres_LaneLock(t *testing.T) {
	t.Parallel()
	t.Run("HolderNamedOnRefusal", func(t *testing.T) {
		t.Parallel()
		dsn := storetest.PostgresDSN(t)
		s1, s2 := storetest.MustOpen(t, dsn, store.Options{}), storetest.MustOpen(t, dsn, store.Options{})
		l := pgMustLock(t, s1, "A")
		if l.Method != "pg_advisory_lock" || l.BackendPID() == 0 {
			t.Errorf("lock = method %q, backend pid %d; want pg_advisory_lock on a backend", l.Method, l.BackendPID())
		}
		_, err := s2.LockLane(t.Context(), "A")
		if got := inkwell.ErrorCode(err); got != inkwell.ELANEHELD {
			t.Fatalf("second LockLane(A): code %q (%v), want %q", got, err, inkwell.ELANEHELD)
		}
		host, _ := os.Hostname()
		for _, want := range []string{fmt.Sprintf("pid %d", os.Getpid()), host, "since", l.Self.Incarnation, fmt.Sprintf("backend pid %d", l.BackendPID())} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q does not name %q", err, want)
			}
		}
		if _, err := s2.LockLane(t.Context(), "B"); err != nil {
			t.Errorf("LockLane(B) while A is held: %v, want another lane free", err)
		}
	})
	t.Run("ReleaseFreesTheLane", func(t *testing.T) {
		t.Parallel()
		dsn := storetest.PostgresDSN(t)
		s1, s2 := storetest.MustOpen(t, dsn, store.Options{}), storetest.MustOpen(t, dsn, store.Options{})
		l, err := s1.LockLane(t.Context(), "A")
		if err != nil {
			t.Fatalf("LockLane: %v", err)
		}
		if err := l.Release(); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if err := l.Check(); inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Errorf("Check after Release = %v, want %s", err, inkwell.ELANEHELD)
		}
		pgMustLock(t, s2, "A")
	})
	t.Run("TerminatedSessionIsLost", func(t *testing.T) {
		t.Parallel()
		dsn := storetest.PostgresDSN(t)
		s1, s2 := storetest.MustOpen(t, dsn, store.Options{}), storetest.MustOpen(t, dsn, store.Options{})
		l := pgMustLock(t, s1, "A")
		if err := l.Check(); err != nil {
			t.Fatalf("Check on a fresh lock: %v", err)
		}
		pgTerminate(t, s2, l.BackendPID())
		select {
		case <-l.Lost():
		case <-time.After(pgWait):
			t.Fatalf("Lost() not closed %v after the lock session was terminated", pgWait)
		}
		if err := l.Check(); inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Errorf("Check after the session ended = %v, want %s", err, inkwell.ELANEHELD)
		}
		pgMustLock(t, s2, "A") // the server released it with the session
	})
	t.Run("ClaimIsFencedByTheLock", func(t *testing.T) {
		t.Parallel()
		f := newPGLanes(t)
		a := pgMustLock(t, f.sa, "A")
		first := f.claimOn(a) // claims while the lock holds
		pgTerminate(t, f.sb, a.BackendPID())
		// Before the keeper has noticed, a claim must already fail: the
		// guard reads pg_locks in the claim's own statement.
		if _, _, err := f.sa.Accept(t.Context(), store.AcceptParams{IdempotencyKey: "after-loss", RequestHash: "h", Payload: []byte(`{"prompt":"x"}`)}); err != nil {
			t.Fatal(err)
		}
		c, err := claimUnder(t, f.sa, a)
		if (err != nil && inkwell.ErrorCode(err) != inkwell.ELANEHELD) || c != nil {
			t.Errorf("claim under A's lock after its session ended = %+v, %v; want nothing claimed", c, err)
		}
		if n := f.count(`SELECT COUNT(*) FROM job_attempts`); n != 1 {
			t.Errorf("job_attempts = %d rows, want only job %d's first attempt", n, first.Job.ID)
		}
		// Another lane, whose lock holds, claims it.
		b := pgMustLock(t, f.sb, "B")
		if c, err := claimUnder(t, f.sb, b); err != nil || c == nil {
			t.Errorf("Claim(B) = %v, %v; want the queued job", c, err)
		}
	})
	t.Run("KeyCollisionNamed", func(t *testing.T) {
		t.Parallel()
		dsn := storetest.PostgresDSN(t)
		s1, s2 := storetest.MustOpen(t, dsn, store.Options{}), storetest.MustOpen(t, dsn, store.Options{})
		// Two names whose 32-bit keys collide (see TestLaneLockKey).
		l := pgMustLock(t, s1, "lane-232789")
		if err := s1.RegisterLane(t.Context(), l); err != nil {
			t.Fatal(err)
		}
		_, err := s2.LockLane(t.Context(), "lane-429192")
		if inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Fatalf("LockLane(lane-429192) = %v, want %s", err, inkwell.ELANEHELD)
		}
		for _, want := range []string{"lane lane-232789 has the same lock", "hash to one key", l.Self.Incarnation, "Rename one of the two lanes"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q does not say %q", err, want)
			}
		}
	})
	t.Run("ForeignHolderNamed", func(t *testing.T) {
		t.Parallel()
		dsn := storetest.PostgresDSN(t)
		s := storetest.MustOpen(t, dsn, store.Options{})
		l := pgMustLock(t, s, "A")
		key := pgLockKeys(t, s, l.BackendPID())
		if err := l.Release(); err != nil {
			t.Fatalf("Release: %v", err)
		}
		// A session that is not Inkwell's takes the same keys by hand.
		conn, err := s.DB().Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(t.Context(), `SET application_name = 'psql-by-hand'`); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(t.Context(), `SELECT pg_advisory_lock($1, $2)`, key[0], key[1]); err != nil {
			t.Fatal(err)
		}
		defer conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock_all()`)
		_, err = s.LockLane(t.Context(), "A")
		if inkwell.ErrorCode(err) != inkwell.ELANEHELD || !strings.Contains(err.Error(), "not an Inkwell lane") || !strings.Contains(err.Error(), "psql-by-hand") {
			t.Errorf("LockLane under a foreign holder = %v, want %s naming the foreign session", err, inkwell.ELANEHELD)
		}
	})
}

func TestPostgres_Rescue(t *testing.T) {
	t.Parallel()
	t.Run("LiveLaneIsLeftAlone", func(t *testing.T) {
		t.Parallel()
		f := newPGLanes(t)
		a := pgMustLock(t, f.sa, "A")
		b := pgMustLock(t, f.sb, "B")
		c := f.claimOn(a)
		lanes, err := f.sb.LanesWithRunning(t.Context(), "B")
		if err != nil || len(lanes) != 1 || lanes[0] != "A" {
			t.Fatalf("LanesWithRunning(except B) = %v, %v; want [A]", lanes, err)
		}
		_, err = f.sb.LockLaneForRescue(t.Context(), "A", b)
		if inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Fatalf("LockLaneForRescue(A) while A lives = %v, want %s", err, inkwell.ELANEHELD)
		}
		if got := f.attemptStatus(c.Attempt.ID); got != inkwell.StatusRunning {
			t.Errorf("A's attempt is %s after a refused rescue, want running", got)
		}
		if n := f.count(`SELECT COUNT(*) FROM recovery_runs`); n != 0 {
			t.Errorf("recovery_runs = %d rows after a refused rescue, want 0", n)
		}
	})
	t.Run("DeadLaneIsRescuedOnProof", func(t *testing.T) {
		t.Parallel()
		f := newPGLanes(t)
		a := pgMustLock(t, f.sa, "A")
		if err := f.sa.RegisterLane(t.Context(), a); err != nil {
			t.Fatal(err)
		}
		b := pgMustLock(t, f.sb, "B")
		c := f.claimOn(a)
		pgTerminate(t, f.sb, a.BackendPID()) // A's session dies; A's process lives on

		rl, err := f.sb.LockLaneForRescue(t.Context(), "A", b)
		if err != nil || rl == nil {
			t.Fatalf("LockLaneForRescue(A) after its session ended = %v, %v; want the lock", rl, err)
		}
		rep, err := f.sb.Rescue(t.Context(), rl)
		rl.Release()
		if err != nil {
			t.Fatalf("Rescue: %v", err)
		}
		if rep.Lane != "A" || rep.AttemptsClosed != 1 || rep.AttemptsBackfilled != 0 || rep.JobsFailed != 1 {
			t.Errorf("report = lane %s, %d closed, %d back-filled, %d failed; want A, 1, 0, 1", rep.Lane, rep.AttemptsClosed, rep.AttemptsBackfilled, rep.JobsFailed)
		}
		run, err := f.sb.RecoveryRunByID(t.Context(), rep.RunID)
		if err != nil {
			t.Fatal(err)
		}
		var ev store.Evidence
		if err := json.Unmarshal([]byte(run.Evidence), &ev); err != nil {
			t.Fatalf("evidence %q: %v", run.Evidence, err)
		}
		if run.Lane != "A" || run.LockMethod != "pg_advisory_lock" || ev.RescuedBy != "B" || ev.Recoverer.Incarnation != b.Self.Incarnation ||
			ev.LaneRow == nil || ev.LaneRow.Incarnation != a.Self.Incarnation || !strings.Contains(ev.Proof, "session") {
			t.Errorf("recovery run = %+v, evidence %+v; want lane A proven dead by lock, rescued by B, previous holder A's incarnation", run, ev)
		}
		d, err := f.sb.Show(t.Context(), c.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		at := d.Attempts[0]
		if d.Job.Status != inkwell.StatusFailed || d.Job.Error != inkwell.ErrWorkerRestarted || at.Status != inkwell.StatusFailed ||
			at.RecoveryRunID == nil || *at.RecoveryRunID != rep.RunID || at.FinishedAt == nil {
			t.Errorf("after rescue: job %s %q, attempt %+v; want both failed, %q, linked to run %d", d.Job.Status, d.Job.Error, at, inkwell.ErrWorkerRestarted, rep.RunID)
		}
		var stopped sql.NullString
		if err := f.sb.DB().QueryRowContext(t.Context(), `SELECT stop_reason FROM lanes WHERE name = 'A'`).Scan(&stopped); err != nil || !strings.Contains(stopped.String, "lane B") {
			t.Errorf("lanes row A stop_reason = %q, %v; want it to name the rescuing lane B", stopped.String, err)
		}

		// Fencing: A's process, still alive, completes too late.
		err = f.sa.CompleteIfRunning(t.Context(), store.CompleteParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Text: "late", Account: "default", ProviderRequestID: "r1"})
		if inkwell.ErrorCode(err) != inkwell.ECONFLICT {
			t.Errorf("late CompleteIfRunning = %v, want %s", err, inkwell.ECONFLICT)
		}
		if n := f.count(`SELECT (SELECT COUNT(*) FROM results) + (SELECT COUNT(*) FROM charges)`); n != 0 {
			t.Errorf("results + charges = %d after a refused completion, want 0", n)
		}
		if err := f.sa.Heartbeat(t.Context(), a, store.LaneBeat{}); inkwell.ErrorCode(err) != inkwell.ECONFLICT {
			t.Errorf("the rescued incarnation's Heartbeat = %v, want %s (its lanes row is stopped)", err, inkwell.ECONFLICT)
		}
		// It then stops, as a fenced lane does: no error, and the row keeps
		// the rescuer's reason.
		if err := f.sa.StopLane(t.Context(), a, "lane lock lost"); err != nil {
			t.Errorf("the rescued incarnation's StopLane = %v, want nil (already stopped)", err)
		}
		if err := f.sb.DB().QueryRowContext(t.Context(), `SELECT stop_reason FROM lanes WHERE name = 'A'`).Scan(&stopped); err != nil || !strings.Contains(stopped.String, "lane B") {
			t.Errorf("lanes row A stop_reason after A's own stop = %q, %v; want the rescuer's, naming lane B", stopped.String, err)
		}

		// A second look finds nothing left to rescue and writes nothing.
		again, err := f.sb.LockLaneForRescue(t.Context(), "A", b)
		if err != nil || again != nil {
			t.Errorf("second LockLaneForRescue(A) = %v, %v; want nil, nil (nothing running)", again, err)
		}
		if n := f.count(`SELECT COUNT(*) FROM recovery_runs`); n != 1 {
			t.Errorf("recovery_runs = %d rows, want 1", n)
		}
	})
	t.Run("RescuerNeedsItsOwnLock", func(t *testing.T) {
		t.Parallel()
		f := newPGLanes(t)
		b := pgMustLock(t, f.sb, "B")
		if _, err := f.sb.LockLaneForRescue(t.Context(), "B", b); inkwell.ErrorCode(err) != inkwell.EINVALID {
			t.Errorf("B rescuing itself = %v, want %s", err, inkwell.EINVALID)
		}
		b.Release()
		if _, err := f.sb.LockLaneForRescue(t.Context(), "A", b); inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Errorf("rescue by a lane whose lock is released = %v, want %s", err, inkwell.ELANEHELD)
		}
	})
}

func TestStore_LockLaneForRescue_SQLiteRefused(t *testing.T) {
	t.Parallel()
	s := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	b, err := s.LockLane(t.Context(), "B")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if _, err := s.LockLaneForRescue(t.Context(), "A", b); inkwell.ErrorCode(err) != inkwell.EINVALID {
		t.Errorf("LockLaneForRescue on SQLite = %v, want %s", err, inkwell.EINVALID)
	}
}

// TestPostgres_DatabaseClock shows the timestamps come from the server:
// a schema earlier in search_path shadows clock_timestamp() with one an
// hour ahead (a server whose clock disagrees with this machine's), and every
// time the store writes follows it.
func TestPostgres_DatabaseClock(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	admin := storetest.MustOpen(t, dsn, store.Options{})
	for _, q := range []string{
		`CREATE SCHEMA skew`,
		`CREATE FUNCTION skew.clock_timestamp() RETURNS timestamptz LANGUAGE sql AS $$ SELECT pg_catalog.clock_timestamp() + interval '1 hour' $$`,
	} {
		if _, err := admin.DB().ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s := storetest.MustOpen(t, dsn+"&search_path=skew,pg_catalog,public", store.Options{})
	before := time.Now()
	job, _, err := s.Accept(t.Context(), store.AcceptParams{IdempotencyKey: "clock", RequestHash: "h", Payload: []byte(`{"prompt":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := claimUnder(t, s, pgMustLock(t, s, "A"))
	if err != nil || c == nil {
		t.Fatalf("Claim = %v, %v", c, err)
	}
	after := time.Now()
	lo, hi := before.Add(time.Hour-time.Minute), after.Add(time.Hour+time.Minute)
	stored, err := s.Job(t.Context(), job.ID)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]time.Time{"created_at": stored.CreatedAt, "started_at": *stored.StartedAt} {
		if got.Before(lo) || got.After(hi) {
			t.Errorf("%s = %v, want the database's clock, about an hour after this machine's %v", name, got, before)
		}
	}

	// An injected NowFunc still wins, on PostgreSQL as on SQLite: tests stub it.
	fixed := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	st := storetest.MustOpen(t, dsn, store.Options{NowFunc: func() time.Time { return fixed }})
	job2, _, err := st.Accept(t.Context(), store.AcceptParams{IdempotencyKey: "fixed", RequestHash: "h", Payload: []byte(`{"prompt":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !job2.CreatedAt.Equal(fixed) {
		t.Errorf("created_at with NowFunc = %v, want %v", job2.CreatedAt, fixed)
	}
}

// TestPostgres_PoolRunsWithoutJIT: every pool connection has JIT off,
// which the overview views need (see jitOff in postgres.go).
func TestPostgres_PoolRunsWithoutJIT(t *testing.T) {
	t.Parallel()
	s := storetest.MustOpen(t, storetest.PostgresDSN(t), store.Options{})
	for i := range 3 { // held at once: three connections of the pool
		c, err := s.DB().Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var jit string
		if err := c.QueryRowContext(t.Context(), `SHOW jit`).Scan(&jit); err != nil || jit != "off" {
			t.Errorf("pool connection %d: jit = %q (%v), want off", i, jit, err)
		}
	}
}

// TestPostgres_ConcurrentFirstMigration opens several stores on one empty
// database at once, as lanes started together do.
func TestPostgres_ConcurrentFirstMigration(t *testing.T) {
	t.Parallel()
	dsn := storetest.EmptyPostgresDSN(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := store.Open(t.Context(), dsn, store.Options{Logger: storetest.TestLogger(t)})
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("store %d: Open on an empty database = %v, want migrated", i, err)
		}
	}
	s := storetest.MustOpen(t, dsn, store.Options{NoMigrate: true})
	v, err := s.SchemaVersion(t.Context())
	if err != nil || v < 1 {
		t.Errorf("SchemaVersion = %d, %v; want >= 1", v, err)
	}
	var applied int
	if err := s.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM schema_migrations WHERE version = 1`).Scan(&applied); err != nil || applied != 1 {
		t.Errorf("migration 1 recorded %d times (%v), want once", applied, err)
	}
}

// pgLanes is two stores on one PostgreSQL database: two lane processes.
type pgLanes struct {
	t      *testing.T
	sa, sb *store.Store
}

func newPGLanes(t *testing.T) *pgLanes {
	dsn := storetest.PostgresDSN(t)
	return &pgLanes{t: t, sa: storetest.MustOpen(t, dsn, store.Options{}), sb: storetest.MustOpen(t, dsn, store.Options{})}
}

func (f *pgLanes) claimOn(l *store.LaneLock) *store.Claimed {
	f.t.Helper()
	key := fmt.Sprintf("job-%d", time.Now().UnixNano())
	if _, _, err := f.sa.Accept(f.t.Context(), store.AcceptParams{IdempotencyKey: key, RequestHash: "h", Payload: []byte(`{"prompt":"x"}`)}); err != nil {
		f.t.Fatal(err)
	}
	c, err := claimUnder(f.t, f.sa, l)
	if err != nil || c == nil {
		f.t.Fatalf("Claim(%s) = %v, %v", l.Lane, c, err)
	}
	return c
}

func (f *pgLanes) attemptStatus(id int64) string {
	f.t.Helper()
	var st string
	if err := f.sa.DB().QueryRowContext(f.t.Context(), `SELECT status FROM job_attempts WHERE id = $1`, id).Scan(&st); err != nil {
		f.t.Fatal(err)
	}
	return st
}

func (f *pgLanes) count(q string) int {
	f.t.Helper()
	var n int
	if err := f.sa.DB().QueryRowContext(f.t.Context(), q).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
	return n
}

func pgMustLock(t *testing.T, s *store.Store, lane string) *store.LaneLock {
	t.Helper()
	l, err := s.LockLane(t.Context(), lane)
	if err != nil {
		t.Fatalf("LockLane(%s): %v", lane, err)
	}
	t.Cleanup(func() { l.Release() })
	return l
}

// pgTerminate ends a backend and waits until it is gone, as a crash would.
func pgTerminate(t *testing.T, s *store.Store, pid int) {
	t.Helper()
	var ok bool
	if err := s.DB().QueryRowContext(t.Context(), `SELECT pg_terminate_backend($1, 10000)`, pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
}

// pgLockKeys reads the advisory keys a backend holds, as an operator would.
func pgLockKeys(t *testing.T, s *store.Store, pid int) [2]int64 {
	t.Helper()
	var k [2]int64
	err := s.DB().QueryRowContext(t.Context(), `SELECT classid::int8, objid::int8 FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 2 AND pid = $1`, pid).Scan(&k[0], &k[1])
	if err != nil {
		t.Fatalf("advisory lock of backend %d: %v", pid, err)
	}
	if k[1] > 1<<31-1 { // pg_locks shows the key as an unsigned oid
		k[1] -= 1 << 32
	}
	return k
}
