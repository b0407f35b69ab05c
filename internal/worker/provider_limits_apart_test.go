package worker_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/limiter"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// Per-provider limits (docs/design.md §12, docs/providers.md "Each kind of
// provider"): "each provider has one limiter, and a 429 pauses that
// provider's calls only ... a 429 from Anthropic pauses the calls to
// Anthropic, not those to OpenAI." These tests give one lane two
// providers, make one of them slow to admit (a 429 pause, or its rpm),
// and check that a job of the other provider still runs at once.

// limitedRouter is catalogRouter with each provider's limiter, as serve's
// Routes builds it.
type limitedRouter struct {
	catalogRouter
	lims []worker.Limiter
}

func (r limitedRouter) Limiters() []worker.Limiter { return r.lims }

func twoProviderRouter(t *testing.T, srvA, srvB *wireServer, limA, limB *limiter.Limiter) limitedRouter {
	t.Helper()
	a := inkwell.Model{Name: "alpha", Provider: "pa", Upstream: "alpha", InputMicrosPerMTok: 1, OutputMicrosPerMTok: 1, MaxOutputTokens: 64}
	b := inkwell.Model{Name: "beta", Provider: "pb", Upstream: "beta", InputMicrosPerMTok: 1, OutputMicrosPerMTok: 1, MaxOutputTokens: 64}
	cat := &catalog.Catalog{Providers: []catalog.Provider{{Name: "pa", Kind: catalog.KindOpenAI}, {Name: "pb", Kind: catalog.KindOpenAI}},
		Models: []inkwell.Model{a, b}, Default: "alpha"}
	return limitedRouter{
		catalogRouter: catalogRouter{cat: cat, byProvider: map[string]worker.Route{
			"pa": {Provider: mustOpenAIAt(t, srvA.url, 10*time.Second), Limiter: limA},
			"pb": {Provider: mustOpenAIAt(t, srvB.url, 10*time.Second), Limiter: limB},
		}},
		lims: []worker.Limiter{limA, limB},
	}
}

// TestLane_OtherProviderRunsDuringA429Pause: provider pa answers
// every call 429 with Retry-After: 120; provider pb answers at once. Five
// alpha (pa) jobs are queued before one beta (pb) job on a lane of two
// slots. pa's pause must hold pa's calls only: the beta job should be
// done within seconds. Before the fix the alpha jobs claimed after
// the 429 sit in both slots waiting out pa's 120 s pause (Lane.call waits
// on the route's limiter after the claim), so the beta job is never
// claimed: pb is paused by pa's 429.
func TestLane_OtherProviderRunsDuringA429Pause(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	srvA := startWireRetryAfter(t, "120")
	srvB := startWire(t, func(_ int, body map[string]json.RawMessage) (int, string) { return 200, answerWith(body, 5, 5) })
	limA, limB := limiter.New(limiter.Config{}), limiter.New(limiter.Config{})
	router := twoProviderRouter(t, srvA, srvB, limA, limB)

	for i := range 5 {
		acceptChat(t, st, fmt.Sprintf("a%d", i), "acme", fmt.Sprintf(`{"model":"alpha","messages":[{"role":"user","content":"a%d"}]}`, i), nil, 0)
	}
	b := acceptChat(t, st, "b0", "acme", `{"model":"beta","messages":[{"role":"user","content":"b0"}]}`, nil, 0)
	r := startLane(t, st, worker.Config{Name: "mixed", Router: router, Concurrency: 2, Poll: 50 * time.Millisecond, Grace: 2 * time.Second})
	r.lane.Wake()

	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		d, err := st.Show(t.Context(), b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Job.Status == inkwell.StatusDone {
			assertGivenBack(t, st, len(srvA.received()))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	d, _ := st.Show(t.Context(), b.ID)
	t.Errorf("beta's job (provider pb, never rate limited) is %q 10 s after start; pa paused until %v, pa waiting %d, pb calls %d: pa's 429 pause holds pb's work (every slot waits in pa's limiter)",
		d.Job.Status, limA.PausedUntil().Format(time.RFC3339), limA.Waiting(), len(srvB.received()))
}

// startWireRetryAfter is an OpenAI-compatible server that answers every
// chat completion 429 with Retry-After: retryAfter, recording the calls.
func startWireRetryAfter(t *testing.T, retryAfter string) *wireServer {
	t.Helper()
	w := &wireServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]json.RawMessage
		_ = json.Unmarshal(raw, &body)
		w.mu.Lock()
		w.calls = append(w.calls, wireCall{Body: body, Key: r.Header.Get("Idempotency-Key")})
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		rw.Header().Set("Retry-After", retryAfter)
		rw.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(rw, `{"error":{"message":"rate limited","type":"rate_limit_error"}}`)
	}))
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

// assertGivenBack checks what became of the alpha jobs pa's pause held:
// each one pa never received was given back unsent, its attempt failed as
// rate_limited saying "not sent", the job queued again with a not_before
// near the pause's end (120 s), and no alpha job is left running in a slot.
func assertGivenBack(t *testing.T, st *store.Store, sentToA int) {
	t.Helper()
	var running, queued, heldBack, badWait int
	err := st.DB().QueryRowContext(t.Context(), `SELECT
			(SELECT COUNT(*) FROM jobs WHERE status = 'running'),
			(SELECT COUNT(*) FROM jobs WHERE status = 'queued'),
			(SELECT COUNT(*) FROM job_attempts WHERE status = 'failed' AND error_class = 'rate_limited' AND error LIKE 'not sent: provider pa%'),
			(SELECT COUNT(*) FROM jobs WHERE status = 'queued' AND (not_before IS NULL OR not_before < created_at))`).Scan(&running, &queued, &heldBack, &badWait)
	if err != nil {
		t.Fatal(err)
	}
	if running != 0 {
		t.Errorf("%d jobs still running in the lane's slots once beta is done; want 0 (pa's jobs given back)", running)
	}
	if want := 5 - sentToA; heldBack < want || queued != want {
		t.Errorf("pa received %d of the 5 alpha calls: %d attempts given back unsent and %d jobs queued again; want %d of each", sentToA, heldBack, queued, want)
	}
	if badWait != 0 {
		t.Errorf("%d given-back jobs have no not_before in the future of their acceptance; want each to wait for pa's pause", badWait)
	}
}
