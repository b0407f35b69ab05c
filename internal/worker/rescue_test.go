package worker_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// rescueWait bounds every wait here; conditions normally hold in well under
// a second, the bound only keeps a broken lane from hanging the suite.
const rescueWait = 30 * time.Second

// TestRescue_FencesALaneThatLostItsLock plays the partition story on a real
// PostgreSQL: lane A is mid-call when its lock session is terminated (as a
// network cut or a server-side kill would end it). Lane B, which left A
// alone while A was alive however long the call took, proves A dead by
// taking its lock and closes A's attempt; A stops claiming at once, and
// when its call finally answers, the completion is refused and writes
// nothing. A retry then finishes the job on B, billed once in all.
func TestRescue_FencesALaneThatLostItsLock(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	stA := storetest.MustOpen(t, dsn, store.Options{})
	stB := storetest.MustOpen(t, dsn, store.Options{})
	sim := simtest.MustStart(t, providersim.Config{})
	openai, err := provider.NewOpenAI(provider.OpenAIConfig{URL: sim.URL, Timeout: rescueWait})
	if err != nil {
		t.Fatal(err)
	}
	gate := newGatedProvider(openai)
	obsA := newOutcomes()
	a := startRescueLane(t, stA, worker.Config{Name: "A", Provider: gate, Observer: obsA})
	job := rescueAccept(t, stA, "fenced")
	gate.waitStarted(t)

	// B watches A for several looks while A's call hangs: A is alive.
	b := startRescueLane(t, stB, worker.Config{Name: "B", Provider: openai})
	start := worker.RescueScans(b.lane)
	storetest.WaitFor(t, rescueWait, "B to look for dead lanes five times", func() bool { return worker.RescueScans(b.lane) >= start+5 })
	if d := rescueShow(t, stB, job.ID); d.Job.Status != inkwell.StatusRunning || d.Attempts[0].Lane != "A" {
		t.Fatalf("while A lives: job %s on %q, want running on A", d.Job.Status, d.Attempts[0].Lane)
	}
	if n := rescueCount(t, stB, `SELECT COUNT(*) FROM recovery_runs WHERE evidence LIKE '%rescued_by_lane%'`); n != 0 {
		t.Fatalf("%d rescues of a live lane, want 0", n)
	}

	// A's lock session ends; B rescues on proof.
	rescueTerminateLockSession(t, stB, "A")
	run := rescueWaitRun(t, stB, "A")
	var ev store.Evidence
	if err := json.Unmarshal([]byte(run.Evidence), &ev); err != nil || ev.RescuedBy != "B" {
		t.Errorf("rescue evidence = %s (%v), want rescued_by_lane B", run.Evidence, err)
	}
	if run.AttemptsClosed != 1 || run.JobsFailed != 1 {
		t.Errorf("rescue run closed %d attempts, failed %d jobs; want 1 and 1", run.AttemptsClosed, run.JobsFailed)
	}
	// Queued now, while A is fenced: only B may claim it.
	second := rescueAccept(t, stB, "after-the-cut")

	gate.release()
	if outcome := obsA.wait(t, job.ID); outcome != worker.OutcomeFenced {
		t.Errorf("A's late outcome = %q, want %q", outcome, worker.OutcomeFenced)
	}
	// A stops on whichever it sees first: its keeper finding the lock
	// session gone (lane_held), or its heartbeat finding its lanes row
	// stopped by the rescuer (conflict).
	if err := a.wait(t); inkwell.ErrorCode(err) != inkwell.ELANEHELD && inkwell.ErrorCode(err) != inkwell.ECONFLICT {
		t.Errorf("A's Run = %v, want it stopped with %s or %s", err, inkwell.ELANEHELD, inkwell.ECONFLICT)
	}
	d := rescueShow(t, stB, job.ID)
	if d.Job.Status != inkwell.StatusFailed || d.Job.Error != inkwell.ErrWorkerRestarted || len(d.Attempts) != 1 ||
		d.Attempts[0].Status != inkwell.StatusFailed || d.Attempts[0].RecoveryRunID == nil || *d.Attempts[0].RecoveryRunID != run.ID ||
		d.Result != nil || d.Charge != nil {
		t.Errorf("after the fenced completion: %+v; want failed by run %d with no result or charge", d, run.ID)
	}
	rescueWaitDone(t, stB, second.ID)
	for _, at := range rescueShow(t, stB, second.ID).Attempts {
		if at.Lane != "B" {
			t.Errorf("job %d attempt %d ran on lane %s after A lost its lock, want B only", second.ID, at.AttemptNumber, at.Lane)
		}
	}

	if _, err := stB.RetryIfFailed(t.Context(), job.ID, store.ActorCLI); err != nil {
		t.Fatal(err)
	}
	done := rescueWaitDone(t, stB, job.ID)
	if len(done.Attempts) != 2 || done.Attempts[1].Lane != "B" || done.Charge == nil {
		t.Errorf("after retry: %+v; want attempt 2 done on B with a charge", done)
	}
	e, ok := sim.MustLedger(t).Entry(storetest.ProviderKey(t, stB, job.ID, job.IdempotencyKey))
	if !ok || e.Bills != 1 || e.Calls != 2 || done.Charge.ProviderRequestID != e.RequestID {
		t.Errorf("ledger entry = %+v (found %t), charge %+v; want 2 calls billed once, charged under its request id", e, ok, done.Charge)
	}
}

// gatedProvider holds each call until the test releases it, then makes it
// for real against the simulator: the outside world, merely slow.
type gatedProvider struct {
	inner    inkwell.Provider
	started  chan struct{}
	released chan struct{}
	once     sync.Once
}

func newGatedProvider(inner inkwell.Provider) *gatedProvider {
	return &gatedProvider{inner: inner, started: make(chan struct{}, 16), released: make(chan struct{})}
}

func (g *gatedProvider) Generate(ctx context.Context, req inkwell.ProviderRequest) (inkwell.ProviderResponse, error) {
	g.started <- struct{}{}
	select {
	case <-g.released:
	case <-ctx.Done():
	}
	if err := ctx.Err(); err != nil { // the caller gave up on the call first
		return inkwell.ProviderResponse{}, err
	}
	return g.inner.Generate(ctx, req)
}

func (g *gatedProvider) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-g.started:
	case <-time.After(rescueWait):
		t.Fatalf("no provider call began within %v", rescueWait)
	}
}

func (g *gatedProvider) release() { g.once.Do(func() { close(g.released) }) }

// outcomes records each job's outcome as the lane's Observer hears it.
type outcomes struct {
	mu   sync.Mutex
	seen map[int64]string
	ch   chan struct{}
}

func newOutcomes() *outcomes { return &outcomes{seen: map[int64]string{}, ch: make(chan struct{}, 1)} }

func (o *outcomes) Claimed(string) {}

func (o *outcomes) Finished(_ string, outcome string, _ float64, job inkwell.Job) {
	o.mu.Lock()
	o.seen[job.ID] = outcome
	o.mu.Unlock()
	select {
	case o.ch <- struct{}{}:
	default:
	}
}

func (o *outcomes) wait(t *testing.T, jobID int64) string {
	t.Helper()
	deadline := time.After(rescueWait)
	for {
		o.mu.Lock()
		got, ok := o.seen[jobID]
		o.mu.Unlock()
		if ok {
			return got
		}
		select {
		case <-o.ch:
		case <-deadline:
			t.Fatalf("no outcome for job %d within %v", jobID, rescueWait)
		}
	}
}

// rescueLane is a lane whose Run goroutine the test owns.
type rescueLane struct {
	lane *worker.Lane
	done chan error
}

func startRescueLane(t *testing.T, st *store.Store, cfg worker.Config) *rescueLane {
	t.Helper()
	cfg.Logger = storetest.TestLogger(t)
	cfg.Heartbeat, cfg.Poll, cfg.Rescue, cfg.Grace = 50*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond, rescueWait
	l := worker.New(st, cfg)
	if _, err := l.Open(t.Context()); err != nil {
		t.Fatalf("lane %s Open: %v", cfg.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &rescueLane{lane: l, done: make(chan error, 1)}
	go func() { r.done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		r.wait(t)
		l.Close()
	})
	return r
}

func (r *rescueLane) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(rescueWait):
		t.Fatalf("lane %s Run did not return within %v", r.lane.Name(), rescueWait)
		return nil
	}
}

func rescueAccept(t *testing.T, st *store.Store, key string) inkwell.Job {
	t.Helper()
	job, _, err := st.Accept(t.Context(), store.AcceptParams{IdempotencyKey: key, RequestHash: "h-" + key, Payload: []byte(`{"prompt":"a line about ` + key + `","max_words":8}`)})
	if err != nil {
		t.Fatalf("Accept %s: %v", key, err)
	}
	return job
}

// rescueTerminateLockSession ends the session that holds lane's lock, found
// as an operator would: by the incarnation its application_name carries.
func rescueTerminateLockSession(t *testing.T, st *store.Store, lane string) {
	t.Helper()
	const q = `SELECT pg_terminate_backend(a.pid, 10000) FROM pg_stat_activity a JOIN lanes l ON l.name = $1
		WHERE a.application_name LIKE 'inkwell/lane/%/' || l.incarnation || '/%'`
	var ok bool
	if err := st.DB().QueryRowContext(t.Context(), q, lane).Scan(&ok); err != nil || !ok {
		t.Fatalf("terminate lane %s's lock session: %v, %v", lane, ok, err)
	}
}

func rescueWaitRun(t *testing.T, st *store.Store, lane string) store.RecoveryRun {
	t.Helper()
	const q = `SELECT COALESCE(MAX(id), 0) FROM recovery_runs WHERE lane = $1 AND evidence LIKE '%rescued_by_lane%'`
	var id int64
	storetest.WaitFor(t, rescueWait, "a rescue of lane "+lane, func() bool {
		if err := st.DB().QueryRowContext(t.Context(), q, lane).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id > 0
	})
	run, err := st.RecoveryRunByID(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func rescueWaitDone(t *testing.T, st *store.Store, id int64) inkwell.JobDetail {
	t.Helper()
	var d inkwell.JobDetail
	storetest.WaitFor(t, rescueWait, "a job to be done", func() bool {
		d = rescueShow(t, st, id)
		return d.Job.Status == inkwell.StatusDone
	})
	return d
}

func rescueShow(t *testing.T, st *store.Store, id int64) inkwell.JobDetail {
	t.Helper()
	d, err := st.Show(t.Context(), id)
	if err != nil {
		t.Fatalf("Show(%d): %v", id, err)
	}
	return d
}

func rescueCount(t *testing.T, st *store.Store, q string) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}
