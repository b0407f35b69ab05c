package worker_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/limiter"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// Provider limits end to end (docs/design.md §8): a lane with many calls in flight,
// the real openai provider, and the real provider simulator on loopback
// enforcing its own limit. The simulator is watched (each call's key,
// arrival, end and status), never replaced.

// TestLimits_LaneKeepsToTheProviderRPM: the simulator allows 600 calls a
// minute; a lane with 32 slots and the same --provider-rpm gets twice the
// work the limit allows in the window. Its throughput is the limit, within
// 10%, and it draws at most a handful of 429s. Not parallel: it measures a
// rate, so it runs alone.
func TestLimits_LaneKeepsToTheProviderRPM(t *testing.T) {
	const rpm = 600 // 10 calls a second
	sim := startWatchedSim(t, providersim.Config{RPM: rpm, Latency: 100 * time.Millisecond})
	lim := limiter.New(limiter.Config{RPM: rpm})
	assertLimitedRate(t, sim, lim, 100, rpm/60.0) // about 10 s
}

// TestLimits_LaneKeepsToTheProviderTPM: the same with tokens. The
// simulator allows 6,000 tokens a minute and bills each call's usage (20
// tokens here: 5 calls a second); the lane estimates fewer (13) before
// each call and corrects by the usage its answers report, so the debts
// hold it to the limit. Not parallel: it measures a rate.
func TestLimits_LaneKeepsToTheProviderTPM(t *testing.T) {
	const tpm = 6000
	sim := startWatchedSim(t, providersim.Config{TPM: tpm, Latency: 100 * time.Millisecond})
	lim := limiter.New(limiter.Config{TPM: tpm})
	perCall := provider.UsageOf("line 10 about limits", provider.Generate("line 10 about limits", 6)).TotalTokens()
	assertLimitedRate(t, sim, lim, 40, tpm/60.0/float64(perCall)) // about 8 s
}

// assertLimitedRate gives a 32-slot lane limited by lim twice the jobs it
// may run while the simulator answers measured calls, and checks that
// they came at want a second, within 10%, with at most 3 429s.
func assertLimitedRate(t *testing.T, sim *watchedSim, lim *limiter.Limiter, measured int, want float64) {
	t.Helper()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	jobs := 2 * measured
	for i := range jobs {
		accept(t, st, fmt.Sprintf("limited-%03d", i), fmt.Sprintf("line %d about limits", 10+i), 6)
	}
	startLane(t, st, worker.Config{Name: "limited", Provider: sim.provider(t), Concurrency: 32, Limiter: lim,
		Poll: 50 * time.Millisecond, Grace: 5 * time.Second})

	storetest.WaitFor(t, waitLimit, fmt.Sprintf("%d calls answered", measured), func() bool {
		return len(sim.answered()) >= measured || sim.count(http.StatusTooManyRequests) > 3
	})
	if n := sim.count(http.StatusTooManyRequests); n > 3 {
		t.Fatalf("the simulator answered 429 %d times (%d calls answered), want at most 3", n, len(sim.answered()))
	}
	answered := sim.answered()[:measured]
	elapsed := answered[measured-1].arrived.Sub(answered[0].arrived)
	rate := float64(measured-1) / elapsed.Seconds()
	t.Logf("%d calls answered in %v: %.2f calls/s against a limit of %.2f/s; 429s: %d at the simulator, %d seen by the limiter",
		measured, elapsed.Round(time.Millisecond), rate, want, sim.count(http.StatusTooManyRequests), lim.RateLimited())
	if rate < 0.9*want || rate > 1.1*want {
		t.Errorf("throughput %.2f calls/s, want %.2f within 10%%", rate, want)
	}
	if waiting := lim.Waiting(); waiting == 0 {
		t.Errorf("no call waits for the limiter with %d jobs left: the lane is not limited by it", jobs-measured)
	}
}

// TestLimits_429PausesEveryCallOfTheLane: the simulator allows one call
// every 2 s, and the test spends it; the lane's call right after is
// answered 429 with Retry-After: 2. Every call the lane's slots start after
// that waits out the pause: the simulator receives none of them before it
// ends.
func TestLimits_429PausesEveryCallOfTheLane(t *testing.T) {
	t.Parallel()
	const slots = 8
	sim := startWatchedSim(t, providersim.Config{RPM: 30})
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	lim := limiter.New(limiter.Config{}) // no limit set: a 429 pauses the lane all the same
	r := startLane(t, st, worker.Config{Name: "paused", Provider: sim.provider(t), Concurrency: slots, Limiter: lim,
		Poll: 50 * time.Millisecond, Grace: 5 * time.Second})

	sim.spend(t) // the simulator's one call for the next 2 s
	refused := accept(t, st, "refused", "a short line", 4)
	r.lane.Wake()
	d := waitJob(t, st, refused.ID, "failed", isStatus(inkwell.StatusFailed))
	if !strings.Contains(d.Job.Error, "rate limited: HTTP 429") {
		t.Fatalf("job failed with %q, want the provider's 429", d.Job.Error)
	}
	refusedAt := sim.firstEnd(http.StatusTooManyRequests)
	pausedUntil := lim.PausedUntil()
	if pausedUntil.Before(refusedAt.Add(2*time.Second)) || pausedUntil.After(time.Now().Add(2*time.Second)) {
		t.Errorf("lane paused until %v, want 2 s after the 429 reached it (it was sent at %v)", pausedUntil, refusedAt)
	}

	// New work during the pause: every slot's call waits in the limiter.
	var waited []string
	for i := range slots {
		j := accept(t, st, fmt.Sprintf("waits-%d", i), "another short line", 4)
		waited = append(waited, storetest.ProviderKey(t, st, j.ID, j.IdempotencyKey))
	}
	r.lane.Wake()
	storetest.WaitFor(t, waitLimit, "every slot waiting for the pause to end", func() bool { return lim.Waiting() == slots })
	if now := time.Now(); !now.Before(pausedUntil) {
		t.Fatalf("the pause (until %v) ended before every slot was seen waiting (%v): the machine is too slow for this test", pausedUntil, now)
	}
	storetest.WaitFor(t, waitLimit, "the waiting calls sent", func() bool { return len(sim.callsOf(waited)) == slots })
	calls := sim.callsOf(waited)
	for _, c := range calls {
		if c.arrived.Before(refusedAt.Add(2 * time.Second)) {
			t.Errorf("call %s reached the simulator %v after the 429, within the 2 s pause", c.key, c.arrived.Sub(refusedAt))
		}
	}
	if gap := calls[0].arrived.Sub(refusedAt); gap > 4*time.Second {
		t.Errorf("the first call after the pause was sent %v after the 429, want soon after 2 s", gap)
	}
	if got := len(sim.all()); got != 2+slots {
		t.Errorf("the simulator received %d calls, want %d: the test's, the refused one, one per waiting job", got, 2+slots)
	}
}

// watchedSim is the provider simulator on loopback, with a record of every
// chat completion it received.
type watchedSim struct {
	url   string
	mu    sync.Mutex
	calls []simCall
}

type simCall struct {
	key           string
	arrived, done time.Time
	status        int
}

func startWatchedSim(t *testing.T, cfg providersim.Config) *watchedSim {
	t.Helper()
	cfg.LedgerPath = filepath.Join(t.TempDir(), "ledger.db")
	srv, err := providersim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	w := &watchedSim{url: "http://" + ln.Addr().String()}
	inner := srv.Handler()
	hs := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			inner.ServeHTTP(rw, r)
			return
		}
		c := simCall{key: r.Header.Get("Idempotency-Key"), arrived: time.Now()}
		sw := &statusWriter{ResponseWriter: rw, status: http.StatusOK}
		inner.ServeHTTP(sw, r)
		c.done, c.status = time.Now(), sw.status
		w.mu.Lock()
		w.calls = append(w.calls, c)
		w.mu.Unlock()
	})}
	served := make(chan struct{})
	go func() { defer close(served); hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		<-served
		srv.Close()
	})
	return w
}

// provider is an openai provider pointed at the simulator, on a transport
// of its own that is closed when the test ends.
func (w *watchedSim) provider(t *testing.T) *provider.OpenAI {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	p, err := provider.NewOpenAI(provider.OpenAIConfig{URL: w.url, Timeout: 10 * time.Second,
		Client: &http.Client{Transport: tr}, Logger: storetest.TestLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// spend makes one call of the test's own, to spend the simulator's
// allowance.
func (w *watchedSim) spend(t *testing.T) {
	t.Helper()
	body := `{"messages":[{"role":"user","content":"the test's own call"}],"max_tokens":4}`
	req, err := http.NewRequest(http.MethodPost, w.url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true // no idle connection left behind for goleak to find
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the test's own call: HTTP %d, want 200", res.StatusCode)
	}
}

// all is every call received so far, in order of arrival.
func (w *watchedSim) all() []simCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	calls := slices.Clone(w.calls)
	slices.SortFunc(calls, func(a, b simCall) int { return a.arrived.Compare(b.arrived) })
	return calls
}

func (w *watchedSim) answered() []simCall {
	return slices.DeleteFunc(w.all(), func(c simCall) bool { return c.status != http.StatusOK })
}

func (w *watchedSim) count(status int) int {
	n := 0
	for _, c := range w.all() {
		if c.status == status {
			n++
		}
	}
	return n
}

// firstEnd is when the first answer with status left the simulator.
func (w *watchedSim) firstEnd(status int) time.Time {
	var first time.Time
	for _, c := range w.all() {
		if c.status == status && (first.IsZero() || c.done.Before(first)) {
			first = c.done
		}
	}
	return first
}

// callsOf is the calls made for these provider keys, in order of arrival.
func (w *watchedSim) callsOf(keys []string) []simCall {
	return slices.DeleteFunc(w.all(), func(c simCall) bool { return !slices.Contains(keys, c.key) })
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
