package worker_test

// The money path of a job on an Anthropic model, end to end:
// a real store (SQLite, and PostgreSQL with INKWELL_TEST_POSTGRES_URL), a
// lane, the Anthropic provider, and an httptest server speaking the
// Messages API's wire format (its answers, its error bodies, 529, 429
// with retry-after, a hang, a reset after the request was read).

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// claude is a priced model served by an anthropic provider, at Claude
// Sonnet's prices (3 and 15 units a million tokens).
var claude = inkwell.Model{Name: "claude", Provider: "anth", Upstream: "claude-sonnet-4-5", InputMicrosPerMTok: 3_000_000,
	OutputMicrosPerMTok: 15_000_000, MaxOutputTokens: 1024, ImageTokens: 1600, InputTokens: 200_000}

// anthropicServer answers POST /v1/messages with answer(call number).
type anthropicServer struct {
	url   string
	calls atomic.Int64
}

func startAnthropicWire(t *testing.T, answer func(n int64, w http.ResponseWriter, r *http.Request)) *anthropicServer {
	t.Helper()
	a := &anthropicServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if r.URL.Path != "/v1/messages" || r.Header.Get("anthropic-version") == "" {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"not a messages call"}}`)
			return
		}
		answer(a.calls.Add(1), w, r)
	}))
	t.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

func writeAnthropic(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// anthropicRoute is a router of claude on an Anthropic provider at url
// (honours_keys false, as the config file forces for anthropic).
func anthropicRoute(t *testing.T, url string, timeout time.Duration) catalogRouter {
	t.Helper()
	p, err := provider.NewAnthropic(provider.AnthropicConfig{URL: url, APIKey: "sk-ant-test", Timeout: timeout, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return catalogRouter{
		cat:        &catalog.Catalog{Providers: []catalog.Provider{{Name: "anth", Kind: catalog.KindAnthropic}}, Models: []inkwell.Model{claude}, Default: "claude"},
		byProvider: map[string]worker.Route{"anth": {Provider: p}},
	}
}

// budgetedAccept gives acme a budget of exactly body's worst case on
// claude and accepts body, reserving it.
func budgetedAccept(t *testing.T, st *store.Store, router catalogRouter, body string) (inkwell.Job, int64) {
	t.Helper()
	worst := router.WorstCase(inkwell.Work{Chat: parseChat(t, body)}, claude)
	if worst <= 0 {
		t.Fatalf("worst case %d", worst)
	}
	if _, err := st.CreateAccount(t.Context(), store.Account{Name: "acme", BudgetMicros: &worst}); err != nil {
		t.Fatal(err)
	}
	return acceptChat(t, st, "k", "acme", body, nil, worst), worst
}

const toolTurnThenText = `{"model":"claude","max_tokens":200,"messages":[
	{"role":"user","content":"Calculate the sum of 1234 and 5678"},
	{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_123","type":"function","function":{"name":"calculator","arguments":"{\"a\":1234,\"b\":5678}"}}]},
	{"role":"tool","tool_call_id":"toolu_123","content":"6912"},
	{"role":"user","content":"Here's the result"}],
	"tools":[{"type":"function","function":{"name":"calculator","parameters":{"type":"object"}}}]}`

// TestLane_EmptyAnthropicAnswerIsChargedItsUsage: Anthropic answers the
// tool turn with its documented empty answer (content [], end_turn, 3
// output tokens: "Handling stop reasons", "Empty responses with
// end_turn"), which it bills. The job is done with no text, charged its
// usage (812 + 3 tokens), its reservation settled. It used to fail as
// malformed: no charge, and the reservation left open (malformed may
// have been billed), holding the account's whole budget until an
// operator released it by hand.
func TestLane_EmptyAnthropicAnswerIsChargedItsUsage(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		srv := startAnthropicWire(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
			writeAnthropic(w, 200, `{"id":"msg_01EmptyTurn","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],
				"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":812,"output_tokens":3}}`)
		})
		router := anthropicRoute(t, srv.url, 10*time.Second)
		job, worst := budgetedAccept(t, st, router, toolTurnThenText)
		startLane(t, st, worker.Config{Router: router, Retry: worker.RetryPolicy{MaxAttempts: 3, Base: 10 * time.Millisecond}}).lane.Wake()
		d := waitJob(t, st, job.ID, "ended", func(d inkwell.JobDetail) bool {
			return d.Job.Status == inkwell.StatusDone || d.Job.Status == inkwell.StatusFailed
		})
		r, err := st.Reservation(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		a, err := st.Account(t.Context(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		if n := srv.calls.Load(); n != 1 {
			t.Errorf("Anthropic got %d calls, want 1", n)
		}
		if d.Job.Status != inkwell.StatusDone || d.Charge == nil || d.Charge.AmountMicros != claude.Cost(812, 3) {
			t.Errorf("job %s (class %q: %s), charge %+v, reservation %s of %d, account spent %d reserved %d of budget %d: "+
				"Anthropic billed msg_01EmptyTurn (812 + 3 tokens, %d micros at claude's prices) and nobody is charged for it; "+
				"want the job done, charged %d, its reservation settled",
				d.Job.Status, d.Job.ErrorClass, d.Job.Error, d.Charge, r.State, r.Micros, a.SpentMicros, a.ReservedMicros, worst,
				claude.Cost(812, 3), claude.Cost(812, 3))
		}
	})
}

// TestLane_AnthropicRetriesOverloadAndRateLimitOnly (the lane over
// the Anthropic wire format): a 529
// overloaded_error and a 429 whose retry-after is an HTTP date are
// retried; the third call answers with cache counts. The job is charged
// once, its usage (cache counts as prompt tokens) at claude's prices,
// within a budget of exactly its worst case, and its reservation is
// settled.
func TestLane_AnthropicRetriesOverloadAndRateLimitOnly(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		srv := startAnthropicWire(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
			switch n {
			case 1:
				writeAnthropic(w, 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`)
			case 2:
				w.Header().Set("retry-after", time.Now().Add(2*time.Second).UTC().Format(http.TimeFormat))
				writeAnthropic(w, 429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`)
			default:
				writeAnthropic(w, 200, `{"id":"msg_ok","type":"message","role":"assistant","model":"claude-sonnet-4-5",
					"content":[{"type":"text","text":"6912."}],"stop_reason":"end_turn","stop_sequence":null,
					"usage":{"input_tokens":50,"cache_creation_input_tokens":100,"cache_read_input_tokens":200,"output_tokens":4}}`)
			}
		})
		router := anthropicRoute(t, srv.url, 10*time.Second)
		body := `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"` + repeatWord("sum", 200) + `"}]}`
		job, worst := budgetedAccept(t, st, router, body)
		startLane(t, st, worker.Config{Router: router, Poll: 50 * time.Millisecond,
			Retry: worker.RetryPolicy{MaxAttempts: 4, Base: 10 * time.Millisecond, Cap: 20 * time.Millisecond}}).lane.Wake()
		d := waitJob(t, st, job.ID, "done", isStatus(inkwell.StatusDone))
		wantClasses(t, "job", d, inkwell.ClassProviderError, inkwell.ClassRateLimited, "")
		if want := claude.Cost(350, 4); d.Charge == nil || d.Charge.AmountMicros != want || want > worst {
			t.Errorf("charge %+v; want %d micros (350 + 4 tokens), within the worst case %d", d.Charge, want, worst)
		}
		a, err := st.Account(t.Context(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		if a.ReservedMicros != 0 || a.SpentMicros != claude.Cost(350, 4) {
			t.Errorf("account spent %d reserved %d; want %d spent, nothing reserved", a.SpentMicros, a.ReservedMicros, claude.Cost(350, 4))
		}
		if n := srv.calls.Load(); n != 3 {
			t.Errorf("Anthropic got %d calls, want 3", n)
		}
	})
}

func repeatWord(w string, n int) string {
	b := make([]byte, 0, n*(len(w)+1))
	for i := range n {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, w...)
	}
	return string(b)
}

// TestLane_AmbiguousAnthropicCallsAreNeverRetried (the lane over the
// Anthropic provider): a call that hangs past the
// provider's timeout, and one whose connection is reset after the request
// was read, may have been billed; with automatic retry on, neither is sent
// again, the job fails timeout, nothing is charged, and the reservation
// stays open (not released: the call may have been billed).
func TestLane_AmbiguousAnthropicCallsAreNeverRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []string{"HangPastTimeout", "ResetAfterRequestRead"} {
		t.Run(tc, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T, st *store.Store) {
				var url string
				var calls func() int
				if tc == "HangPastTimeout" {
					release := make(chan struct{})
					srv := startAnthropicWire(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
						select {
						case <-r.Context().Done():
						case <-release:
						}
					})
					t.Cleanup(func() { close(release) })
					url, calls = srv.url, func() int { return int(srv.calls.Load()) }
				} else {
					url, calls = simtest.ResetAfterRead(t)
				}
				router := anthropicRoute(t, url, 200*time.Millisecond)
				job, worst := budgetedAccept(t, st, router, `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
				startLane(t, st, worker.Config{Router: router, Poll: 20 * time.Millisecond,
					Retry: worker.RetryPolicy{MaxAttempts: 5, Base: 10 * time.Millisecond, Cap: 20 * time.Millisecond}}).lane.Wake()
				d := waitJob(t, st, job.ID, "failed", isStatus(inkwell.StatusFailed))
				time.Sleep(300 * time.Millisecond) // room for a wrong retry to show
				wantClasses(t, tc, d, inkwell.ClassTimeout)
				if n := calls(); n != 1 {
					t.Errorf("the provider read %d requests, want 1: an ambiguous Anthropic call was sent again", n)
				}
				r, err := st.Reservation(t.Context(), job.ID)
				if err != nil {
					t.Fatal(err)
				}
				if d.Charge != nil || r.State != store.ReservationOpen || r.Micros != worst {
					t.Errorf("charge %+v, reservation %+v; want no charge and the %d micros kept open", d.Charge, r, worst)
				}
			})
		})
	}
}
