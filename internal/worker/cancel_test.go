package worker_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/limiter"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// Cancel of a running job (docs/design.md §9): the lane aborts its provider
// call, in process at once (CancelAttempt, which the API calls), from
// another process at the lane's next look (CancelPoll). The simulator is
// real and slow; the cancel is the store's, as `inkwell cancel` makes it.

// simLatency is far beyond every wait below: a call that ends within them
// was aborted, not answered.
const simLatency = time.Minute

// cancelLane runs a lane with one slot over st, calling a slow watched
// simulator, and logs to the test and to buf.
func cancelLane(t *testing.T, st *store.Store, sim *slowSim, cfg worker.Config) (*running, *syncBuffer, *outcomes) {
	t.Helper()
	buf := &syncBuffer{}
	obs := newOutcomes()
	cfg.Name, cfg.Provider, cfg.Observer = "cancel", sim.provider(t), obs
	cfg.Logger = slog.New(slog.NewTextHandler(multiWriter{buf, tWriter{t}}, nil))
	cfg.Poll, cfg.Grace = 20*time.Millisecond, 30*time.Second
	return startLane(t, st, cfg), buf, obs
}

type multiWriter struct {
	buf *syncBuffer
	t   tWriter
}

func (m multiWriter) Write(p []byte) (int, error) {
	m.buf.Write(p)
	return m.t.Write(p)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// waitRunning waits until the lane's call for job is at the simulator.
func waitCalled(t *testing.T, st *store.Store, sim *slowSim, job inkwell.Job) *store.Claimed {
	t.Helper()
	key := storetest.ProviderKey(t, st, job.ID, job.IdempotencyKey)
	storetest.WaitFor(t, waitLimit, "the call at the simulator", func() bool { return sim.inFlight(key) })
	d, err := st.Show(t.Context(), job.ID)
	if err != nil || d.Job.Status != inkwell.StatusRunning || len(d.Attempts) != 1 {
		t.Fatalf("job %d: %+v, %v; want running with one attempt", job.ID, d, err)
	}
	return &store.Claimed{Job: d.Job, Attempt: d.Attempts[0]}
}

// assertAborted checks that job's call ended soon after cancelled, as
// OutcomeCancelled, logged at info as "call aborted: job cancelled" and
// not as a warning; that the simulator saw its client leave and billed
// nothing; and that the job is failed, cancelled, with no result or charge.
func assertAborted(t *testing.T, st *store.Store, sim *slowSim, buf *syncBuffer, obs *outcomes, job inkwell.Job, cancelled time.Time) {
	t.Helper()
	if got := obs.wait(t, job.ID); got != worker.OutcomeCancelled {
		t.Errorf("outcome %q, want %q", got, worker.OutcomeCancelled)
	}
	if took := time.Since(cancelled); took > 10*time.Second {
		t.Errorf("the call ended %v after the cancel; want it aborted, not waited out", took)
	}
	key := storetest.ProviderKey(t, st, job.ID, job.IdempotencyKey)
	storetest.WaitFor(t, waitLimit, "the simulator's handler to see its client leave", func() bool { return !sim.inFlight(key) })
	if held, ok := sim.heldFor(key); !ok || held >= simLatency/2 {
		t.Errorf("the simulator held the call %v (seen %t): want its client gone long before its latency", held, ok)
	}
	if n := len(sim.ledger(t).Entries); n != 0 {
		t.Errorf("the simulator billed %d entries, want none (its client left before the answer)", n)
	}
	d, err := st.Show(t.Context(), job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Job.Status != inkwell.StatusFailed || d.Job.ErrorClass != inkwell.ClassCancelled || d.Result != nil || d.Charge != nil ||
		len(d.Attempts) != 1 || d.Attempts[0].ErrorClass != inkwell.ClassCancelled {
		t.Errorf("job after the abort: %+v; want failed, cancelled, one cancelled attempt, no result, no charge", d)
	}
	// The cancel's own words stay: the aborted call's fenced write wrote nothing.
	if !strings.HasPrefix(d.Attempts[0].Error, "cancelled by ") {
		t.Errorf("attempt error %q, want the cancel's (the lane's write must have been fenced out)", d.Attempts[0].Error)
	}
	storetest.WaitFor(t, waitLimit, "the abort logged", func() bool { return buf.contains(`msg="call aborted: job cancelled"`) })
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("the abort logged a warning or error: %s", line)
		}
	}
}

// TestCancel_InProcessAbortsTheCallAtOnce: CancelAttempt (the API's hook)
// aborts the call at once, with the cross-process look an hour away; the
// limiter is told neither of a 429 nor of a success, and its slot is free.
func TestCancel_InProcessAbortsTheCallAtOnce(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		sim := startSlowSim(t, simLatency)
		lim := limiter.New(limiter.Config{RPM: 6000})
		r, buf, obs := cancelLane(t, st, sim, worker.Config{CancelPoll: time.Hour, Limiter: lim})
		job := accept(t, st, "in-process", "a line to cancel", 5)
		r.lane.Wake()
		c := waitCalled(t, st, sim, job)

		got, err := st.Cancel(t.Context(), job.ID, "api")
		if err != nil || got.Attempt != c.Attempt.ID {
			t.Fatalf("Cancel: %+v, %v; want attempt %d closed", got, err, c.Attempt.ID)
		}
		at := time.Now()
		r.lane.CancelAttempt(got.Attempt)
		assertAborted(t, st, sim, buf, obs, job, at)
		if took := time.Since(at); took > 2*time.Second {
			t.Errorf("in-process abort took %v", took)
		}
		if n := lim.InFlight(); n != 0 || lim.RateLimited() != 0 {
			t.Errorf("limiter: %d in flight, %d rate limited after the abort; want 0 and 0", n, lim.RateLimited())
		}
		r.lane.CancelAttempt(got.Attempt) // twice, or after the end: nothing
		r.lane.CancelAttempt(12345)       // not this lane's
		assertCancelLaneRunning(t, st, r)
	})
}

// TestCancel_OtherProcessAbortsAtTheNextLook: a cancel made elsewhere (the
// lane's CancelAttempt is not called) aborts the call at the lane's next
// look at its calls in flight.
func TestCancel_OtherProcessAbortsAtTheNextLook(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		sim := startSlowSim(t, simLatency)
		r, buf, obs := cancelLane(t, st, sim, worker.Config{CancelPoll: 100 * time.Millisecond})
		job := accept(t, st, "elsewhere", "a line to cancel", 5)
		r.lane.Wake()
		waitCalled(t, st, sim, job)
		if _, err := st.Cancel(t.Context(), job.ID, "cli"); err != nil {
			t.Fatal(err)
		}
		assertAborted(t, st, sim, buf, obs, job, time.Now())

		// The slot is free again: the next job runs to its end.
		fast := accept(t, st, "next", "a line after the cancel", 5)
		r.lane.Wake()
		waitCalled(t, st, sim, fast)
		if _, err := st.Cancel(t.Context(), fast.ID, "cli"); err != nil {
			t.Fatal(err)
		}
		if got := obs.wait(t, fast.ID); got != worker.OutcomeCancelled {
			t.Errorf("second job's outcome %q, want %q", got, worker.OutcomeCancelled)
		}
		assertCancelLaneRunning(t, st, r)
	})
}

// TestCancel_DuringTheStopGrace: the lane was asked to stop and gives its
// call the grace period (30 s here); a cancel made elsewhere meanwhile
// still aborts the call, and the lane stops cleanly at once after it.
func TestCancel_DuringTheStopGrace(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		sim := startSlowSim(t, simLatency)
		r, _, obs := cancelLane(t, st, sim, worker.Config{CancelPoll: 50 * time.Millisecond})
		job := accept(t, st, "grace", "a line cancelled while the lane stops", 5)
		r.lane.Wake()
		waitCalled(t, st, sim, job)
		r.cancel() // stop: no more claims; the call gets the grace period
		if _, err := st.Cancel(t.Context(), job.ID, "cli"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if got := obs.wait(t, job.ID); got != worker.OutcomeCancelled {
			t.Errorf("outcome %q, want %q", got, worker.OutcomeCancelled)
		}
		if err := r.wait(t); err != nil {
			t.Errorf("Run = %v, want a clean stop", err)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("the lane stopped %v after the cancel; want the call aborted, not its grace waited out", took)
		}
		if d, _ := st.Show(t.Context(), job.ID); d.Job.ErrorClass != inkwell.ClassCancelled || d.Result != nil {
			t.Errorf("job %+v: want cancelled, no result", d.Job)
		}
	})
}

// TestCancel_WhileWaitingForTheLimiter: a call that waits for the
// provider's rate limit when its job is cancelled ends at once and is
// never sent; the call in flight beside it is not disturbed until its own
// cancel.
func TestCancel_WhileWaitingForTheLimiter(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		sim := startSlowSim(t, simLatency)
		lim := limiter.New(limiter.Config{RPM: 1}) // one call, then a minute's wait
		r, _, obs := cancelLane(t, st, sim, worker.Config{Concurrency: 2, Limiter: lim, CancelPoll: 50 * time.Millisecond})
		first := accept(t, st, "first", "the call that is sent", 5)
		r.lane.Wake()
		waitCalled(t, st, sim, first)
		waiting := accept(t, st, "waiting", "the call that waits", 5)
		r.lane.Wake()
		storetest.WaitFor(t, waitLimit, "the second call waiting for the limiter", func() bool { return lim.Waiting() == 1 })

		if _, err := st.Cancel(t.Context(), waiting.ID, "cli"); err != nil {
			t.Fatal(err)
		}
		if got := obs.wait(t, waiting.ID); got != worker.OutcomeCancelled {
			t.Errorf("outcome of the waiting call %q, want %q", got, worker.OutcomeCancelled)
		}
		if _, sent := sim.heldFor(storetest.ProviderKey(t, st, waiting.ID, waiting.IdempotencyKey)); sent {
			t.Errorf("the cancelled call reached the simulator; want it never sent")
		}
		if lim.Waiting() != 0 || lim.InFlight() != 1 {
			t.Errorf("limiter: %d waiting, %d in flight; want 0 and 1 (the first call)", lim.Waiting(), lim.InFlight())
		}
		if key := storetest.ProviderKey(t, st, first.ID, first.IdempotencyKey); !sim.inFlight(key) {
			t.Errorf("the first call ended with the second's cancel")
		}
		if _, err := st.Cancel(t.Context(), first.ID, "cli"); err != nil {
			t.Fatal(err)
		}
		if got := obs.wait(t, first.ID); got != worker.OutcomeCancelled {
			t.Errorf("outcome of the first call %q, want %q", got, worker.OutcomeCancelled)
		}
		assertCancelLaneRunning(t, st, r)
	})
}

// TestCancel_AnswerInHandIsDiscarded: the provider's answer is in hand
// (billed) when the cancel commits; the completion is fenced out, nothing
// is written, and the log names the provider request id that was
// discarded, so an operator can find the paid answer.
func TestCancel_AnswerInHandIsDiscarded(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		sim := simtest.MustStart(t, providersim.Config{})
		buf := &syncBuffer{}
		obs := newOutcomes()
		p := &answerHeld{inner: simProvider(t, sim.URL), answered: make(chan inkwell.ProviderResponse, 1), release: make(chan struct{})}
		r := startLane(t, st, worker.Config{Name: "held", Provider: p, Observer: obs, Poll: 20 * time.Millisecond,
			CancelPoll: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(multiWriter{buf, tWriter{t}}, nil))})
		job := accept(t, st, "held", "a line answered too late", 5)
		r.lane.Wake()
		var resp inkwell.ProviderResponse
		select {
		case resp = <-p.answered:
		case <-time.After(waitLimit):
			t.Fatal("no answer within the wait")
		}
		got, err := st.Cancel(t.Context(), job.ID, "api")
		if err != nil {
			t.Fatal(err)
		}
		r.lane.CancelAttempt(got.Attempt)
		p.once.Do(func() { close(p.release) })
		if o := obs.wait(t, job.ID); o != worker.OutcomeCancelled {
			t.Errorf("outcome %q, want %q", o, worker.OutcomeCancelled)
		}
		d, err := st.Show(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Job.ErrorClass != inkwell.ClassCancelled || d.Result != nil || d.Charge != nil {
			t.Errorf("job %+v: want cancelled, the answer not stored", d)
		}
		storetest.WaitFor(t, waitLimit, "the discarded answer logged", func() bool {
			return buf.contains("provider answer discarded: job cancelled") && buf.contains("provider_request_id="+resp.RequestID)
		})
		if e, ok := sim.MustLedger(t).Request(resp.RequestID); !ok || e.Bills != 1 {
			t.Errorf("ledger entry %+v (found %t): want the discarded answer billed once", e, ok)
		}
	})
}

// assertCancelLaneRunning checks lane "cancel" has not stopped: an
// aborted call is no reason to stop a lane.
func assertCancelLaneRunning(t *testing.T, st *store.Store, r *running) {
	t.Helper()
	assertRunNotReturned(t, r)
	if row := laneRow(t, st, "cancel"); row.StoppedAt != nil {
		t.Errorf("lanes row %+v, want the lane still running", row)
	}
}

// answerHeld gets the provider's answer, then holds it, whatever its
// context says, until released: an answer in hand when the cancel lands.
type answerHeld struct {
	inner    inkwell.Provider
	answered chan inkwell.ProviderResponse
	release  chan struct{}
	once     sync.Once
}

func (a *answerHeld) Generate(ctx context.Context, req inkwell.ProviderRequest) (inkwell.ProviderResponse, error) {
	resp, err := a.inner.Generate(context.WithoutCancel(ctx), req)
	if err != nil {
		return resp, err
	}
	a.answered <- resp
	<-a.release
	return resp, nil
}

func simProvider(t *testing.T, url string) inkwell.Provider {
	t.Helper()
	return (&watchedSim{url: url}).provider(t)
}

// slowSim is a real simulator on loopback behind a handler that notes
// each chat call's key while the simulator holds it, and how long it held
// it: the test sees the lane's client leave.
type slowSim struct {
	*watchedSim
	sim  *providersim.Server
	mu   sync.Mutex
	open map[string]int
	held map[string]time.Duration
}

func startSlowSim(t *testing.T, latency time.Duration) *slowSim {
	t.Helper()
	srv, err := providersim.New(providersim.Config{LedgerPath: filepath.Join(t.TempDir(), "ledger.db"), Latency: latency})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	s := &slowSim{watchedSim: &watchedSim{url: "http://" + ln.Addr().String()}, sim: srv, open: map[string]int{}, held: map[string]time.Duration{}}
	inner := srv.Handler()
	hs := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		start := time.Now()
		s.mu.Lock()
		s.open[key]++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.open[key]--
			s.held[key] = time.Since(start)
			s.mu.Unlock()
		}()
		inner.ServeHTTP(rw, r)
	})}
	served := make(chan struct{})
	go func() { defer close(served); hs.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close() // releases held calls first
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		<-served
	})
	return s
}

// inFlight says whether a call with key is held by the simulator now.
func (s *slowSim) inFlight(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[key] > 0
}

// heldFor is how long the simulator held the last call with key.
func (s *slowSim) heldFor(key string) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.held[key]
	return d, ok
}

func (s *slowSim) ledger(t *testing.T) providersim.Ledger {
	t.Helper()
	return (&simtest.Sim{URL: s.url}).MustLedger(t)
}
