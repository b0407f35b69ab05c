package worker_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(storetest.Exit)) // storetest.Exit: a line when PostgreSQL tests were skipped
}

// waitLimit bounds every wait on a condition; the conditions normally hold
// within milliseconds, the limit only keeps a broken lane from hanging.
const waitLimit = 30 * time.Second

// running is a lane whose Run goroutine the test owns.
type running struct {
	lane     *worker.Lane
	recovery store.RecoveryReport // what Open's startup recovery did
	cancel   context.CancelFunc
	done     chan error // Run's result
}

// startLane opens a lane over st and runs it until the test ends (or the
// test stops it). Its lock is released at cleanup.
func startLane(t *testing.T, st *store.Store, cfg worker.Config) *running {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = storetest.TestLogger(t)
	}
	l := worker.New(st, cfg)
	rep, err := l.Open(t.Context())
	if err != nil {
		t.Fatalf("lane Open: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{lane: l, recovery: rep, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(waitLimit):
			t.Errorf("lane Run did not return within %v of its stop", waitLimit)
		}
		l.Close()
	})
	return r
}

// stop cancels Run's context and returns Run's result.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return r.wait(t)
}

func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(waitLimit):
		t.Fatalf("lane Run did not return within %v", waitLimit)
		return nil
	}
}

func accept(t *testing.T, st *store.Store, key, prompt string, maxWords int) inkwell.Job {
	t.Helper()
	payload, _ := json.Marshal(inkwell.Request{Prompt: prompt, Account: "acme", MaxWords: maxWords})
	job, _, err := st.Accept(t.Context(), store.AcceptParams{Account: "acme", IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload})
	if err != nil {
		t.Fatalf("Accept %s: %v", key, err)
	}
	return job
}

// waitJob polls the job until cond holds, and returns it.
func waitJob(t *testing.T, st *store.Store, id int64, what string, cond func(inkwell.JobDetail) bool) inkwell.JobDetail {
	t.Helper()
	var d inkwell.JobDetail
	held := false
	defer func() { // WaitFor's t.Fatal unwinds through here: say what the job was
		if !held {
			t.Logf("job %d last seen %+v", id, d.Job)
		}
	}()
	storetest.WaitFor(t, waitLimit, fmt.Sprintf("job %d to become %s", id, what), func() bool {
		var err error
		if d, err = st.Show(t.Context(), id); err != nil {
			t.Fatalf("Show %d: %v", id, err)
		}
		return cond(d)
	})
	held = true
	return d
}

func isStatus(status string) func(inkwell.JobDetail) bool {
	return func(d inkwell.JobDetail) bool { return d.Job.Status == status }
}

func laneRow(t *testing.T, st *store.Store, name string) store.LaneRow {
	t.Helper()
	rows, err := st.Lanes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no lanes row %q in %+v", name, rows)
	return store.LaneRow{}
}

func TestLane_RunsJobsEndToEnd(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	r := startLane(t, st, worker.Config{Name: "lane-a", Provider: provider.NewSim(5 * time.Millisecond)})
	var jobs []inkwell.Job
	for i := range 5 {
		jobs = append(jobs, accept(t, st, fmt.Sprintf("k%d", i), fmt.Sprintf("poem number %d", i), 10+i))
		r.lane.Wake()
	}
	for i, j := range jobs {
		d := waitJob(t, st, j.ID, "done", isStatus(inkwell.StatusDone))
		wantText := provider.Generate(fmt.Sprintf("poem number %d", i), 10+i)
		if d.Result == nil || d.Result.Text != wantText {
			t.Errorf("job %d result %+v, want the sim's text %q", j.ID, d.Result, wantText)
		}
		if d.Charge == nil || d.Charge.Account != "acme" || d.Charge.AmountMicros != provider.Price(wantText) || d.Charge.ProviderRequestID == "" {
			t.Errorf("job %d charge %+v, want account acme, %d micros and a provider request id", j.ID, d.Charge, provider.Price(wantText))
		}
		if len(d.Attempts) != 1 || d.Attempts[0].Status != inkwell.StatusDone || d.Attempts[0].Lane != "lane-a" || d.Job.Lane != "lane-a" {
			t.Errorf("job %d: lane %q, attempts %+v; want one done attempt on lane-a", j.ID, d.Job.Lane, d.Attempts)
		}
	}
	if err := r.stop(t); err != nil {
		t.Errorf("Run after a stop = %v, want nil", err)
	}
	if row := laneRow(t, st, "lane-a"); row.StoppedAt == nil || row.StopReason != "shutdown" || row.PID != os.Getpid() {
		t.Errorf("lanes row %+v, want stopped for shutdown by pid %d", row, os.Getpid())
	}
}

func TestLane_OpenRecoversTheDeadHolder(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	// The previous holder of lane "local" claimed a job and died.
	orphan := accept(t, st, "orphan", "left running", 5)
	if c := storetest.ClaimAs(t, st, "local"); c == nil || c.Job.ID != orphan.ID {
		t.Fatalf("claim: %+v", c)
	}
	r := startLane(t, st, worker.Config{Provider: provider.NewSim(0), Poll: time.Hour})
	rep := r.recovery
	if rep.AttemptsClosed != 1 || rep.JobsFailed != 1 {
		t.Fatalf("recovery = %+v, want one attempt closed and one job failed", rep)
	}
	d := waitJob(t, st, orphan.ID, "failed", isStatus(inkwell.StatusFailed))
	if d.Job.Error != inkwell.ErrWorkerRestarted || d.Attempts[0].RecoveryRunID == nil || *d.Attempts[0].RecoveryRunID != rep.RunID {
		t.Errorf("orphan = %+v / %+v, want failed %q by recovery run %d", d.Job, d.Attempts, inkwell.ErrWorkerRestarted, rep.RunID)
	}
	// The recovered job runs again only when retried, as attempt 2.
	if _, err := st.RetryIfFailed(t.Context(), orphan.ID, store.ActorCLI); err != nil {
		t.Fatal(err)
	}
	r.lane.Wake()
	d = waitJob(t, st, orphan.ID, "done", isStatus(inkwell.StatusDone))
	if len(d.Attempts) != 2 || d.Attempts[1].AttemptNumber != 2 || d.Attempts[1].Status != inkwell.StatusDone {
		t.Errorf("attempts %+v, want attempt 1 failed and attempt 2 done", d.Attempts)
	}
}

func TestLane_OpenRefusesAHeldLane(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	held, err := st.LockLane(t.Context(), "local")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	l := worker.New(st, worker.Config{Provider: provider.NewSim(0), Logger: storetest.TestLogger(t)})
	_, err = l.Open(t.Context())
	if inkwell.ErrorCode(err) != inkwell.ELANEHELD || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("Open of a held lane = %v, want %s naming pid %d", err, inkwell.ELANEHELD, os.Getpid())
	}
	if runs, _ := st.Lanes(t.Context()); len(runs) != 0 {
		t.Errorf("a refused Open registered lanes %+v", runs)
	}
	var n int
	if err := st.DB().QueryRow(`SELECT COUNT(*) FROM recovery_runs`).Scan(&n); err != nil || n != 0 {
		t.Errorf("a refused Open wrote %d recovery runs (err %v), want 0", n, err)
	}
	if err := l.Run(t.Context()); err == nil {
		t.Errorf("Run of a lane that never opened = nil, want an error")
	}
}

func TestLane_GracefulStop(t *testing.T) {
	t.Parallel()
	t.Run("GraceCutsTheCallShort", func(t *testing.T) {
		t.Parallel()
		st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
		r := startLane(t, st, worker.Config{Provider: provider.NewSim(time.Hour), Grace: 50 * time.Millisecond})
		job := accept(t, st, "slow", "a very slow poem", 5)
		r.lane.Wake()
		waitJob(t, st, job.ID, "running", isStatus(inkwell.StatusRunning))
		if err := r.stop(t); err != nil {
			t.Errorf("Run after a stop = %v, want nil", err)
		}
		d, err := st.Show(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Job.Status != inkwell.StatusFailed || d.Job.Error != inkwell.ErrShutdownGrace || d.Job.FinishedAt == nil {
			t.Errorf("job = %+v, want failed %q with finished_at", d.Job, inkwell.ErrShutdownGrace)
		}
		if len(d.Attempts) != 1 || d.Attempts[0].Status != inkwell.StatusFailed || d.Attempts[0].Error != inkwell.ErrShutdownGrace || d.Attempts[0].FinishedAt == nil {
			t.Errorf("attempts = %+v, want one failed with %q", d.Attempts, inkwell.ErrShutdownGrace)
		}
		if d.Result != nil || d.Charge != nil {
			t.Errorf("a cut-short call left result %+v, charge %+v", d.Result, d.Charge)
		}
		if row := laneRow(t, st, "local"); row.StoppedAt == nil {
			t.Errorf("lanes row %+v, want stopped_at set", row)
		}
	})
	t.Run("GraceLetsTheCallFinish", func(t *testing.T) {
		t.Parallel()
		st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
		// The call is held until the stop has been asked for, so the stop
		// surely lands mid-call, whatever the machine's speed.
		gate := newGatedProvider(provider.NewSim(0))
		r := startLane(t, st, worker.Config{Provider: gate, Grace: time.Minute})
		job := accept(t, st, "slowish", "a poem worth waiting for", 5)
		second := accept(t, st, "not-claimed", "never started", 5)
		r.lane.Wake()
		gate.waitStarted(t)
		r.cancel()
		gate.release()
		if err := r.wait(t); err != nil {
			t.Errorf("Run after a stop = %v, want nil", err)
		}
		d, err := st.Show(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Job.Status != inkwell.StatusDone || d.Result == nil || d.Charge == nil {
			t.Errorf("job = %+v, want done with result and charge: the call had its grace", d.Job)
		}
		// A stopping lane claims nothing more.
		if j, err := st.Job(t.Context(), second.ID); err != nil || j.Status != inkwell.StatusQueued {
			t.Errorf("second job = %+v (%v), want still queued", j, err)
		}
		if row := laneRow(t, st, "local"); row.StoppedAt == nil || row.StopReason != "shutdown" {
			t.Errorf("lanes row %+v, want stopped for shutdown", row)
		}
	})
}

func TestLane_TakesItsDeletedLockFileAgain(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	r := startLane(t, st, worker.Config{Provider: provider.NewSim(0), Heartbeat: 10 * time.Millisecond})
	path := st.Path() + ".lane-local.lock"
	if err := os.Remove(path); err != nil {
		t.Fatalf("delete the lock file: %v", err)
	}
	// Taken again once the new file names this lane's incarnation (the
	// lane writes it after its flock is granted).
	self := r.recovery.Evidence.Recoverer.Incarnation
	storetest.WaitFor(t, 10*time.Second, "lock file re-created and held", func() bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(b), self)
	})
	// The lane holds the new file: nobody else can take the lane.
	if l, err := st.LockLane(t.Context(), "local"); err == nil {
		l.Release()
		t.Fatal("LockLane succeeded beside a running lane whose lock file was deleted")
	}
	// And it carries on working.
	job := accept(t, st, "after-delete", "still working", 5)
	r.lane.Wake()
	storetest.WaitFor(t, 10*time.Second, "job done", func() bool {
		j, err := st.Job(t.Context(), job.ID)
		return err == nil && j.Status == inkwell.StatusDone
	})
}

func TestLane_StopsWhenAnotherHoldsItsReplacedLockFile(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	path := st.Path() + ".lane-local.lock"
	r := startLane(t, st, worker.Config{Provider: provider.NewSim(0), Heartbeat: time.Hour, Poll: time.Hour})
	// The imposter is locked before it is renamed over the lane's file, so
	// the lane never sees a moment where the path is free to take.
	f, err := os.OpenFile(path+".imposter", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".imposter", path); err != nil {
		t.Fatal(err)
	}
	r.lane.Wake() // the loop checks the lock before it claims
	err = r.wait(t)
	if err == nil || !strings.Contains(err.Error(), "deleted or replaced") {
		t.Errorf("Run = %v, want an error saying the lock file was deleted or replaced", err)
	}
	if row := laneRow(t, st, "local"); row.StoppedAt == nil || !strings.Contains(row.StopReason, "deleted or replaced") {
		t.Errorf("lanes row %+v, want stopped with the reason", row)
	}
}

func TestLane_WakeClaimsAtOnce(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	// With an hour between polls, only Wake can make the idle lane claim.
	r := startLane(t, st, worker.Config{Provider: provider.NewSim(0), Poll: time.Hour, Heartbeat: time.Hour})
	for i := range 3 {
		job := accept(t, st, fmt.Sprintf("wake-%d", i), "wake up", 5)
		r.lane.Wake()
		waitJob(t, st, job.ID, "done", isStatus(inkwell.StatusDone))
	}
	if err := r.stop(t); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

// TestLane_RunsARetriedLegacyJob: a job adopted from the old single-table
// Inkwell (its payload holds only the prompt) is recovered at Open and,
// once retried, runs to done like any other.
func TestLane_RunsARetriedLegacyJob(t *testing.T) {
	t.Parallel()
	path := storetest.SQLitePath(t)
	legacy, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE jobs (id INTEGER PRIMARY KEY, prompt TEXT NOT NULL, status TEXT NOT NULL, error TEXT, created_at TEXT, started_at TEXT, finished_at TEXT)`,
		`INSERT INTO jobs VALUES (3, 'an old poem', 'running', NULL, '2024-03-01 10:00:00', '2024-03-01 10:00:01', NULL)`,
	} {
		if _, err := legacy.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	legacy.Close()
	st := storetest.MustOpen(t, path, store.Options{})
	r := startLane(t, st, worker.Config{Provider: provider.NewSim(0), Poll: time.Hour})
	if rep := r.recovery; rep.AttemptsBackfilled != 1 || rep.JobsFailed != 1 {
		t.Fatalf("recovery = %+v, want one back-filled attempt and one failed job", rep)
	}
	if _, err := st.RetryIfFailed(t.Context(), 3, store.ActorCLI); err != nil {
		t.Fatal(err)
	}
	r.lane.Wake()
	d := waitJob(t, st, 3, "done", isStatus(inkwell.StatusDone))
	if want := provider.Generate("an old poem", 0); d.Result == nil || d.Result.Text != want {
		t.Errorf("result %+v, want %q", d.Result, want)
	}
	if d.Charge == nil || d.Charge.Account != inkwell.DefaultAccount {
		t.Errorf("charge %+v, want the default account", d.Charge)
	}
	if len(d.Attempts) != 2 || d.Attempts[0].Lane != "" || d.Attempts[1].AttemptNumber != 2 || d.Attempts[1].Status != inkwell.StatusDone {
		t.Errorf("attempts %+v, want the back-filled attempt 1 (no lane) and attempt 2 done", d.Attempts)
	}
}

// TestLane_SlotRunsTheJobClaimedWithItsOutcome: on SQLite a slot's
// outcome claims the slot's next job in the same transaction, and the slot
// runs it (Lane.run, store.CompleteAndClaim): one commit per job where
// there were two. Every job still runs once, in one attempt, on this lane.
// A stop ends the chain: every job claimed, by the loop or with an
// outcome, is taken to an outcome, and nothing is claimed after.
func TestLane_SlotRunsTheJobClaimedWithItsOutcome(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	const n = 60
	var jobs []inkwell.Job
	for i := range n {
		jobs = append(jobs, accept(t, st, fmt.Sprintf("k%d", i), fmt.Sprintf("poem %d", i), 5))
	}
	r := startLane(t, st, worker.Config{Provider: provider.NewSim(0), Concurrency: 4})
	for _, j := range jobs {
		d := waitJob(t, st, j.ID, "done", isStatus(inkwell.StatusDone))
		if len(d.Attempts) != 1 || d.Attempts[0].Status != inkwell.StatusDone || d.Attempts[0].Lane != "local" {
			t.Errorf("job %d attempts %+v, want one done attempt on local", j.ID, d.Attempts)
		}
	}
	var withOutcome int
	if err := st.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM job_attempts a
		WHERE EXISTS (SELECT 1 FROM job_attempts b WHERE b.id <> a.id AND b.finished_at = a.started_at)`).Scan(&withOutcome); err != nil {
		t.Fatal(err)
	}
	if withOutcome == 0 {
		t.Errorf("no job was claimed in the transaction of another's outcome; want most of %d", n)
	}
	t.Logf("%d of %d jobs claimed with an outcome", withOutcome, n)

	// A stop mid-drain: the chains end, nothing is left running.
	storetest.MustQueue(t, st, "acme", "more", 5000)
	r.lane.Wake()
	storetest.WaitFor(t, waitLimit, "the lane to take more jobs", func() bool {
		var done int
		if err := st.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM jobs WHERE status = 'done'`).Scan(&done); err != nil {
			t.Fatal(err)
		}
		return done > n+20
	})
	if err := r.stop(t); err != nil {
		t.Errorf("Run after a stop = %v, want nil", err)
	}
	var running, queued int
	if err := st.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FILTER (WHERE status = 'running'), COUNT(*) FILTER (WHERE status = 'queued') FROM jobs`).Scan(&running, &queued); err != nil {
		t.Fatal(err)
	}
	if running != 0 {
		t.Errorf("%d jobs left running after a stop, want none: every claimed job is taken to an outcome", running)
	}
	if queued == 0 {
		t.Errorf("no job left queued: the stop came too late to test anything")
	}
}
