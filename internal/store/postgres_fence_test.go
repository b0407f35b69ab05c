package store_test

import (
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// TestPostgres_Fence: on PostgreSQL every write that must not outlive the
// lane lock (claim, recovery, rescue, registration) carries the lock's
// fence in its own statement, so a lock session that ends between taking
// the lock and the write makes the write refuse and change nothing.
func TestPostgres_Fence(t *testing.T) {
	t.Parallel()
	t.Run("ClaimUnderAReleasedLockIsRefused", func(t *testing.T) {
		t.Parallel()
		f := newPGLanes(t)
		f.accept("k")
		// A claim takes the lock as a parameter: there is no claim by lane
		// name to refuse. One under a lock already let go is refused.
		l := pgMustLock(t, f.sa, "A")
		l.Release()
		if _, err := claimUnder(t, f.sa, l); inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Errorf("claim under A's released lock = %v, want %s", err, inkwell.ELANEHELD)
		}
		if n := f.count(`SELECT COUNT(*) FROM job_attempts`) + f.count(`SELECT COUNT(*) FROM jobs WHERE status <> 'queued'`); n != 0 {
			t.Errorf("%d attempts or moved jobs after refused claims, want 0", n)
		}
	})
	t.Run("ClaimComparesTheBackendStart", func(t *testing.T) {
		t.Parallel()
		f := newPGLanes(t)
		l := pgMustLock(t, f.sa, "A")
		f.accept("k")
		// The same pid, a backend started a microsecond later: another session.
		l.ShiftBackendStart(time.Microsecond)
		if c, err := claimUnder(t, f.sa, l); err != nil || c != nil {
			t.Errorf("Claim(A) fenced on another backend start = %+v, %v; want nothing claimed", c, err)
		}
		l.ShiftBackendStart(-time.Microsecond)
		if c, err := claimUnder(t, f.sa, l); err != nil || c == nil {
			t.Errorf("Claim(A) under its own session = %+v, %v; want the job", c, err)
		}
	})
	t.Run("StaleRegistrationIsRefused", func(t *testing.T) {
		t.Parallel()
		f := newPGLanes(t)
		stale := pgMustLock(t, f.sa, "A")
		pgTerminate(t, f.sb, stale.BackendPID()) // between LockLane and RegisterLane
		live := pgMustLock(t, f.sb, "A")
		if err := f.sb.RegisterLane(t.Context(), live); err != nil {
			t.Fatalf("RegisterLane(live) = %v", err)
		}
		before := f.lanesRow("A")
		if err := f.sa.RegisterLane(t.Context(), stale); inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Errorf("RegisterLane(stale) = %v, want %s", err, inkwell.ELANEHELD)
		}
		if after := f.lanesRow("A"); after != before || after.incarnation != live.Self.Incarnation {
			t.Errorf("lanes row A after a stale registration = %+v, want it unchanged, naming incarnation %s", after, live.Self.Incarnation)
		}
	})
	t.Run("StaleRecoveryIsRefused", func(t *testing.T) {
		t.Parallel()
		f := newPGLanes(t)
		stale := pgMustLock(t, f.sa, "A")
		pgTerminate(t, f.sb, stale.BackendPID()) // between LockLane and Recover
		// A new incarnation takes the lane, registers and claims.
		live := pgMustLock(t, f.sb, "A")
		if err := f.sb.RegisterLane(t.Context(), live); err != nil {
			t.Fatal(err)
		}
		f.accept("k")
		c, err := claimUnder(t, f.sb, live)
		if err != nil || c == nil {
			t.Fatalf("Claim(A) by the live incarnation = %v, %v", c, err)
		}
		for name, recover := range map[string]func() (store.RecoveryReport, error){
			"Recover":        func() (store.RecoveryReport, error) { return f.sa.Recover(t.Context(), stale, false) },
			"DryRun":         func() (store.RecoveryReport, error) { return f.sa.Recover(t.Context(), stale, true) },
			"FenceAloneSays": func() (store.RecoveryReport, error) { return f.sa.RecoverSkippingCheck(t.Context(), stale) },
		} {
			if _, err := recover(); inkwell.ErrorCode(err) != inkwell.ELANEHELD {
				t.Errorf("%s with the stale lock = %v, want %s", name, err, inkwell.ELANEHELD)
			}
		}
		if got := f.attemptStatus(c.Attempt.ID); got != inkwell.StatusRunning {
			t.Errorf("the live incarnation's attempt is %s after stale recoveries, want running", got)
		}
		if n := f.count(`SELECT COUNT(*) FROM recovery_runs`); n != 0 {
			t.Errorf("recovery_runs = %d rows after refused recoveries, want 0", n)
		}
	})
	t.Run("RescueLockIsProvenOnCheck", func(t *testing.T) {
		t.Parallel()
		f := newPGLanes(t)
		a := pgMustLock(t, f.sa, "A")
		if err := f.sa.RegisterLane(t.Context(), a); err != nil {
			t.Fatal(err)
		}
		b := pgMustLock(t, f.sb, "B")
		c := f.claimOn(a)
		pgTerminate(t, f.sb, a.BackendPID()) // A dies
		rl, err := f.sb.LockLaneForRescue(t.Context(), "A", b)
		if err != nil || rl == nil {
			t.Fatalf("LockLaneForRescue(A) = %v, %v; want the lock", rl, err)
		}
		defer rl.Release()
		pgTerminate(t, f.sa, rl.BackendPID()) // the rescue's own session dies
		if err := rl.Check(); inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Errorf("Check of a rescue lock whose session ended = %v, want %s", err, inkwell.ELANEHELD)
		}
		if _, err := f.sb.Rescue(t.Context(), rl); inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Errorf("Rescue under a lost lock = %v, want %s", err, inkwell.ELANEHELD)
		}
		if _, err := f.sb.RecoverSkippingCheck(t.Context(), rl); inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Errorf("rescue's recovery under a lost lock, unchecked = %v, want %s", err, inkwell.ELANEHELD)
		}
		if got := f.attemptStatus(c.Attempt.ID); got != inkwell.StatusRunning {
			t.Errorf("A's attempt is %s after refused rescues, want running", got)
		}
		if n := f.count(`SELECT COUNT(*) FROM recovery_runs`); n != 0 {
			t.Errorf("recovery_runs = %d rows after refused rescues, want 0", n)
		}
	})
}

func (f *pgLanes) accept(key string) {
	f.t.Helper()
	if _, _, err := f.sa.Accept(f.t.Context(), store.AcceptParams{IdempotencyKey: key, RequestHash: "h", Payload: []byte(`{"prompt":"x"}`)}); err != nil {
		f.t.Fatal(err)
	}
}

type laneRowSeen struct {
	incarnation, heartbeat string
	stopped                bool
}

func (f *pgLanes) lanesRow(name string) laneRowSeen {
	f.t.Helper()
	var r laneRowSeen
	err := f.sa.DB().QueryRowContext(f.t.Context(), `SELECT incarnation, heartbeat_at::text, stopped_at IS NOT NULL FROM lanes WHERE name = $1`, name).
		Scan(&r.incarnation, &r.heartbeat, &r.stopped)
	if err != nil {
		f.t.Fatalf("lanes row %s: %v", name, err)
	}
	return r
}
