package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/inkwell/inkwell"
	cli "github.com/inkwell/inkwell/cmd/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// inFlight is how many calls these tests hold in flight in one lane.
const inFlight = 8

// startWithCallsInFlight starts serve with room for inFlight calls, submits
// inFlight jobs and returns once the simulator holds every one of their
// calls.
func startWithCallsInFlight(t *testing.T, db string, sim *heldSim, args ...string) (*cli.Child, []int64) {
	t.Helper()
	all := append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--provider", "openai", "--provider-url", sim.url,
		"--concurrency", fmt.Sprint(inFlight), "--heartbeat", "200ms"}, args...)
	srv := cli.StartChild(t, lanesBinary(t), append(os.Environ(), "INKWELL_CRASH_AT="), lanesWait, all...)
	sim.hold()
	var ids []int64
	for i := range inFlight {
		id, err := lanesPost(srv.URL, fmt.Sprintf("in-flight-%d", i), fmt.Sprintf(`{"prompt":"call %d"}`, i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	storetest.WaitFor(t, lanesWait, "every call held by the simulator", func() bool { return sim.heldCount() == inFlight })
	return srv, ids
}

// TestServe_KillWithCallsInFlight: SIGKILL a lane with 8 calls in flight;
// at restart one recovery run closes all 8 attempts, each linked to it.
func TestServe_KillWithCallsInFlight(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	sim := startHeldSim(t)
	srv, ids := startWithCallsInFlight(t, db, sim)
	srv.Signal(t, syscall.SIGKILL)
	sim.release()

	again := cli.StartChild(t, lanesBinary(t), append(os.Environ(), "INKWELL_CRASH_AT="), lanesWait,
		"serve", "--db", db, "--addr", "127.0.0.1:0", "--provider", "openai", "--provider-url", sim.url)
	var run store.RecoveryRun
	storetest.WaitFor(t, lanesWait, "the restart's recovery run", func() bool {
		r, err := st.LastRecoveryRun(t.Context())
		if err != nil || r == nil || r.AttemptsClosed == 0 {
			return false
		}
		run = *r
		return true
	})
	if run.AttemptsClosed != inFlight || run.JobsFailed != inFlight || run.AttemptsBackfilled != 0 {
		t.Errorf("recovery run = %+v, want all %d calls in flight closed in one run", run, inFlight)
	}
	for _, id := range ids {
		d := showJob(t, st, id)
		a := d.Attempts[0]
		if d.Job.Status != inkwell.StatusFailed || a.Status != inkwell.StatusFailed || a.Error != inkwell.ErrWorkerRestarted ||
			a.RecoveryRunID == nil || *a.RecoveryRunID != run.ID {
			t.Errorf("job %d = %s, attempt %+v; want failed, worker restarted, linked to run %d", id, d.Job.Status, a, run.ID)
		}
	}
	if err := again.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("restarted serve after SIGTERM: %v, want exit 0", err)
	}
}

// TestServe_StopWithCallsInFlight: SIGTERM a lane with 8 calls in flight
// that outlast the grace period: no new claims, each call is cut short and
// recorded as a failed attempt that says so, and serve exits 0.
func TestServe_StopWithCallsInFlight(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	sim := startHeldSim(t)
	srv, ids := startWithCallsInFlight(t, db, sim, "--grace", "1s")
	queued, err := lanesPost(srv.URL, "after-the-slots", `{"prompt":"waits for a slot"}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("serve after SIGTERM with %d calls in flight: %v, want exit 0", inFlight, err)
	}
	sim.release()
	for _, id := range ids {
		d := showJob(t, st, id)
		if len(d.Attempts) != 1 || d.Job.Status != inkwell.StatusFailed || d.Attempts[0].Error != inkwell.ErrShutdownGrace ||
			d.Attempts[0].ErrorClass != inkwell.ClassShutdown || d.Job.ErrorClass != inkwell.ClassShutdown {
			t.Errorf("job %d = %s (%s) with attempts %+v; want one failed attempt: %q, class shutdown", id, d.Job.Status, d.Job.ErrorClass, d.Attempts, inkwell.ErrShutdownGrace)
		}
	}
	if d := showJob(t, st, queued); d.Job.Status != inkwell.StatusQueued || len(d.Attempts) != 0 {
		t.Errorf("job queued behind full slots = %s with %d attempts; want still queued: a stopping lane claims nothing", d.Job.Status, len(d.Attempts))
	}
	if n := lanesCount(t, st, `SELECT COUNT(*) FROM job_attempts WHERE status = 'running'`); n != 0 {
		t.Errorf("%d attempts left running after a clean stop", n)
	}
}

// TestServe_StopWithCallsInFlightRequeuesWhenKeysAreHonoured: the same
// stop, with --provider-honours-keys on: a call cut short by the stop may
// have been billed, and a provider that honours keys answers its second
// call from its record, so each job goes back to queued (reschedule) in the
// transaction that fails its attempt, and the next start runs it.
func TestServe_StopWithCallsInFlightRequeuesWhenKeysAreHonoured(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	sim := startHeldSim(t)
	srv, ids := startWithCallsInFlight(t, db, sim, "--grace", "1s", "--provider-honours-keys", "on", "--retry-base", "10ms")
	if err := srv.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("serve after SIGTERM with %d calls in flight: %v, want exit 0", inFlight, err)
	}
	sim.release()
	for _, id := range ids {
		d := showJob(t, st, id)
		if len(d.Attempts) != 1 || d.Job.Status != inkwell.StatusQueued || d.Job.NotBefore == nil ||
			d.Attempts[0].ErrorClass != inkwell.ClassShutdown || d.Job.ErrorClass != inkwell.ClassShutdown {
			t.Errorf("job %d = %s (%s, not before %v) with attempts %+v; want queued again after one shutdown attempt",
				id, d.Job.Status, d.Job.ErrorClass, d.Job.NotBefore, d.Attempts)
		}
	}
}

func showJob(t *testing.T, st *store.Store, id int64) inkwell.JobDetail {
	t.Helper()
	d, err := st.Show(t.Context(), id)
	if err != nil {
		t.Fatalf("Show %d: %v", id, err)
	}
	return d
}
