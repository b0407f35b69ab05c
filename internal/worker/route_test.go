package worker_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// Routing by model (docs/design.md §12, docs/providers.md): a lane with a
// Router sends each job to its model's provider under the model's
// upstream name, charges a priced model's usage at its prices (an answer
// without usage at its bound) and an unpriced one what the provider
// billed, and keeps the whole answer beside the text. The providers are
// httptest servers speaking the OpenAI chat-completions wire format, so
// the test knows the exact usage and sees exactly what was sent.

// wireCall is one request a wire server received.
type wireCall struct {
	Body map[string]json.RawMessage
	Key  string // its Idempotency-Key header
}

// wireServer is an OpenAI-compatible chat-completions server that records
// every request and answers each with answer(call number, body).
type wireServer struct {
	url    string
	answer func(n int, body map[string]json.RawMessage) (status int, reply string)

	mu    sync.Mutex
	calls []wireCall
}

func startWire(t *testing.T, answer func(n int, body map[string]json.RawMessage) (int, string)) *wireServer {
	t.Helper()
	w := &wireServer{answer: answer}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]json.RawMessage
		if r.URL.Path != "/v1/chat/completions" || json.Unmarshal(raw, &body) != nil {
			http.Error(rw, "not a chat completion: "+r.URL.Path, http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		w.calls = append(w.calls, wireCall{Body: body, Key: r.Header.Get("Idempotency-Key")})
		n := len(w.calls)
		w.mu.Unlock()
		status, reply := w.answer(n, body)
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(status)
		io.WriteString(rw, reply)
	}))
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

func (w *wireServer) received() []wireCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls)
}

// answerWith is a chat.completion answering body's last user message, with
// usage prompt/completion (none when prompt < 0).
func answerWith(body map[string]json.RawMessage, prompt, completion int64) string {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(mustMarshal(body), &req)
	last := ""
	if len(req.Messages) > 0 {
		last = req.Messages[len(req.Messages)-1].Content
	}
	a := map[string]any{
		"id": "chatcmpl-" + strings.ReplaceAll(last, " ", "-"), "object": "chat.completion", "created": 1767225600, "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "answer to " + last}, "finish_reason": "stop"}},
	}
	if prompt >= 0 {
		a["usage"] = map[string]int64{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
	}
	return string(mustMarshal(a))
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// catalogRouter routes as serve does (cmd/inkwell Routes): the catalog
// finds the model and its provider, whose client and key promise the test
// set.
type catalogRouter struct {
	cat        *catalog.Catalog
	byProvider map[string]worker.Route
}

func (r catalogRouter) Route(model string) (worker.Route, error) {
	m, p, err := r.cat.Lookup(model)
	if err != nil {
		return worker.Route{}, err
	}
	rt := r.byProvider[p.Name]
	rt.Model = m
	return rt, nil
}

func (r catalogRouter) Limiters() []worker.Limiter { return nil }

func mustOpenAIAt(t *testing.T, url string, timeout time.Duration) *provider.OpenAI {
	t.Helper()
	p, err := provider.NewOpenAI(provider.OpenAIConfig{URL: url, Timeout: timeout, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// acceptChat stores a chat-form job for account as the API would (the
// payload ChatPayload makes of body), reserving reserve.
func acceptChat(t *testing.T, st *store.Store, key, account, body string, metadata json.RawMessage, reserve int64) inkwell.Job {
	t.Helper()
	c := parseChat(t, body)
	payload := inkwell.ChatPayload(c, account, metadata)
	job, _, err := st.Accept(t.Context(), store.AcceptParams{Account: account, IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload),
		Payload: payload, ReserveMicros: reserve})
	if err != nil {
		t.Fatalf("Accept %s: %v", key, err)
	}
	return job
}

// parseChat is the chat request of a chat-form body.
func parseChat(t *testing.T, body string) inkwell.ChatRequest {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &fields); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	c, err := inkwell.ParseChat(fields)
	if err != nil {
		t.Fatalf("ParseChat(%s): %v", body, err)
	}
	return c
}

// chatOf is the chat request a stored job carries, as the lane reads it.
func chatOf(t *testing.T, job inkwell.Job) inkwell.ChatRequest {
	t.Helper()
	w, err := inkwell.ReadPayload(job.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return w.Chat
}

func ptr(n int64) *int64 { return &n }

// Models of the routing tests.
var (
	alpha = inkwell.Model{Name: "alpha", Provider: "pa", Upstream: "alpha-2025-01-01", InputMicrosPerMTok: 150_000, OutputMicrosPerMTok: 600_000, MaxOutputTokens: 256}
	beta  = inkwell.Model{Name: "beta", Provider: "pb", Upstream: "beta-v2", InputMicrosPerMTok: 3_000_000, OutputMicrosPerMTok: 15_000_000, MaxOutputTokens: 4096}
)

// TestLane_RoutesEachJobByItsModel: each job reaches only its model's
// server, under the upstream name, with its unknown members unchanged and
// without Inkwell's account and metadata; its charge is its usage at its
// model's prices, and the result and charge rows keep the model, the
// usage, finish_reason and the whole answer.
func TestLane_RoutesEachJobByItsModel(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		srvA := startWire(t, func(_ int, body map[string]json.RawMessage) (int, string) { return 200, answerWith(body, 21, 17) })
		srvB := startWire(t, func(_ int, body map[string]json.RawMessage) (int, string) { return 200, answerWith(body, 20, 40) })
		cat := &catalog.Catalog{Providers: []catalog.Provider{{Name: "pa", Kind: catalog.KindOpenAI}, {Name: "pb", Kind: catalog.KindOpenAI}},
			Models: []inkwell.Model{alpha, beta}, Default: "alpha"}
		router := catalogRouter{cat: cat, byProvider: map[string]worker.Route{
			"pa": {Provider: mustOpenAIAt(t, srvA.url, 10*time.Second)},
			"pb": {Provider: mustOpenAIAt(t, srvB.url, 10*time.Second)},
		}}
		meta := json.RawMessage(`{"ticket":"T-1"}`)
		jobs := map[string]inkwell.Job{
			"a1":      acceptChat(t, st, "a1", "acme", `{"model":"alpha","messages":[{"role":"user","content":"a1"}],"logprobs":true,"x_vendor":{"deep":[1,2]}}`, meta, 0),
			"b1":      acceptChat(t, st, "b1", "acme", `{"model":"beta","messages":[{"role":"user","content":"b1"}],"max_tokens":40,"temperature":0.5}`, meta, 0),
			"a2":      acceptChat(t, st, "a2", "acme", `{"model":"alpha","messages":[{"role":"system","content":"s"},{"role":"user","content":"a2"}],"max_completion_tokens":12}`, nil, 0),
			"default": acceptChat(t, st, "default", "acme", `{"messages":[{"role":"user","content":"default"}]}`, nil, 0),
		}
		r := startLane(t, st, worker.Config{Router: router, Concurrency: 2})
		r.lane.Wake()
		for key, job := range jobs {
			d := waitJob(t, st, job.ID, "done", isStatus(inkwell.StatusDone))
			m, in, out, srv := alpha, int64(21), int64(17), srvA
			if key == "b1" {
				m, in, out, srv = beta, 20, 40, srvB
			}
			var reply string
			for _, c := range srv.received() {
				if c.Key == storetest.ProviderKey(t, st, job.ID, key) {
					reply = answerWith(c.Body, in, out)
				}
			}
			if reply == "" {
				t.Errorf("job %s: no call under its provider key reached %s's server", key, m.Name)
				continue
			}
			want := inkwell.JobDetail{
				Result: &inkwell.Result{JobID: job.ID, AttemptID: d.Attempts[0].ID, Text: "answer to " + key, Model: m.Name, FinishReason: "stop",
					PromptTokens: ptr(in), CompletionTokens: ptr(out), Response: json.RawMessage(reply)},
				Charge: &inkwell.Charge{JobID: job.ID, AttemptID: d.Attempts[0].ID, Account: "acme", AmountMicros: m.Cost(in, out),
					ProviderRequestID: "chatcmpl-" + key, Model: m.Name, PromptTokens: ptr(in), CompletionTokens: ptr(out)},
			}
			got := inkwell.JobDetail{Result: d.Result, Charge: d.Charge}
			if got.Result != nil {
				got.Result.CreatedAt = time.Time{}
			}
			if got.Charge != nil {
				got.Charge.CreatedAt = time.Time{}
			}
			if diff := cmp.Diff(want, got, cmp.Transformer("json", func(r json.RawMessage) string { return string(r) })); diff != "" {
				t.Errorf("job %s rows (-want +got):\n%s", key, diff)
			}
		}
		// alpha's 21 + 17 tokens cost 13.35 micros, rounded up; beta's
		// 20 + 40 exactly 660 (within b1's worst case: its max_tokens is
		// 40, its request more than 20 bytes).
		if a, b := alpha.Cost(21, 17), beta.Cost(20, 40); a != 14 || b != 660 {
			t.Errorf("the figures the rows were checked against: %d, %d; want 14, 660", a, b)
		}

		// What each server was sent.
		sent := func(w *wireServer) map[string]map[string]string {
			out := map[string]map[string]string{}
			for _, c := range w.received() {
				var req struct {
					Messages []struct{ Content string } `json:"messages"`
				}
				_ = json.Unmarshal(mustMarshal(c.Body), &req)
				fields := map[string]string{}
				for k, v := range c.Body {
					if k != "messages" {
						fields[k] = string(v)
					}
				}
				out[req.Messages[len(req.Messages)-1].Content] = fields
			}
			return out
		}
		wantA := map[string]map[string]string{
			"a1":      {"model": `"alpha-2025-01-01"`, "logprobs": "true", "x_vendor": `{"deep":[1,2]}`, "max_completion_tokens": "256"},
			"a2":      {"model": `"alpha-2025-01-01"`, "max_completion_tokens": "12"},
			"default": {"model": `"alpha-2025-01-01"`, "max_completion_tokens": "256"},
		}
		wantB := map[string]map[string]string{
			"b1": {"model": `"beta-v2"`, "max_tokens": "40", "temperature": "0.5"},
		}
		if diff := cmp.Diff(wantA, sent(srvA)); diff != "" {
			t.Errorf("alpha's server was sent (-want +got), by last message:\n%s", diff)
		}
		if diff := cmp.Diff(wantB, sent(srvB)); diff != "" {
			t.Errorf("beta's server was sent (-want +got), by last message:\n%s", diff)
		}
		if n, m := len(srvA.received()), len(srvB.received()); n != 3 || m != 1 {
			t.Errorf("calls: alpha's server %d, beta's %d; want 3 and 1", n, m)
		}
	})
}

// singleRoute is a router of one model on one wire server.
func singleRoute(t *testing.T, m inkwell.Model, srv *wireServer, honoursKeys bool, timeout time.Duration) catalogRouter {
	t.Helper()
	return catalogRouter{
		cat:        &catalog.Catalog{Providers: []catalog.Provider{{Name: m.Provider, Kind: catalog.KindOpenAI}}, Models: []inkwell.Model{m}, Default: m.Name},
		byProvider: map[string]worker.Route{m.Provider: {Provider: mustOpenAIAt(t, srv.url, timeout), HonoursKeys: honoursKeys}},
	}
}

// TestLane_ChargeWithoutUsage: a priced model's answer that reports no
// usage is charged at a bound no real usage can pass: every byte of the
// request a prompt token, and as completion tokens the answer's bytes,
// but never more than the output bound the request was sent with. So it
// never costs more than accept reserved (Model.WorstCase), and an
// account whose budget is exactly that worst case never spends past it.
func TestLane_ChargeWithoutUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		maxTokens int
	}{
		{"ShortAnswer", 2000}, // the answer's bytes are well under the bound
		{"BoundUnderTheAnswersBytes", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T, st *store.Store) {
				srv := startWire(t, func(_ int, body map[string]json.RawMessage) (int, string) { return 200, answerWith(body, -1, 0) })
				m := beta
				body := fmt.Sprintf(`{"model":"beta","messages":[{"role":"user","content":"no usage"}],"max_tokens":%d}`, tc.maxTokens)
				c := parseChat(t, body)
				worst := m.WorstCase(c)
				if _, err := st.CreateAccount(t.Context(), store.Account{Name: "acme", BudgetMicros: &worst}); err != nil {
					t.Fatal(err)
				}
				job := acceptChat(t, st, "k", "acme", body, nil, worst)
				startLane(t, st, worker.Config{Router: singleRoute(t, m, srv, false, 10*time.Second)}).lane.Wake()
				d := waitJob(t, st, job.ID, "done", isStatus(inkwell.StatusDone))
				calls := srv.received()
				if len(calls) != 1 {
					t.Fatalf("%d calls, want 1", len(calls))
				}
				reply := answerWith(calls[0].Body, -1, 0)
				text := "answer to no usage"
				in := int64(chatOf(t, job).InputBytes())
				out := min(int64(len(text)+len(reply)), int64(tc.maxTokens))
				want := m.Cost(in, out)
				if d.Charge == nil || d.Charge.AmountMicros != want || d.Charge.PromptTokens != nil || d.Charge.CompletionTokens != nil || d.Charge.Model != "beta" {
					t.Errorf("charge %+v; want %d micros (%d prompt bytes, %d answer tokens at most), no token counts, model beta", d.Charge, want, in, out)
				}
				if d.Result == nil || d.Result.PromptTokens != nil || d.Result.CompletionTokens != nil || string(d.Result.Response) != reply {
					t.Errorf("result %+v; want no token counts and the answer kept whole", d.Result)
				}
				if d.Charge != nil && d.Charge.AmountMicros > worst {
					t.Errorf("charged %d micros, more than the %d accept reserved as the worst case", d.Charge.AmountMicros, worst)
				}
				a, err := st.Account(t.Context(), "acme")
				if err != nil {
					t.Fatal(err)
				}
				if a.SpentMicros > worst || a.ReservedMicros != 0 {
					t.Errorf("account spent %d, reserved %d; its budget is %d: want at most the budget spent and nothing reserved", a.SpentMicros, a.ReservedMicros, worst)
				}
			})
		})
	}
}

// TestLane_UnpricedRouteChargesTheProvidersAmount: a model without prices
// (serve without a config file) charges what the provider says it billed;
// the usage is still kept.
func TestLane_UnpricedRouteChargesTheProvidersAmount(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		srv := startWire(t, func(_ int, body map[string]json.RawMessage) (int, string) {
			var a map[string]any
			_ = json.Unmarshal([]byte(answerWith(body, 300, 400)), &a)
			a["inkwell_amount_micros"] = 777
			return 200, string(mustMarshal(a))
		})
		free := inkwell.Model{Name: "free", Provider: "p", Upstream: "free-up", MaxOutputTokens: 100}
		job := acceptChat(t, st, "k", "acme", `{"model":"free","messages":[{"role":"user","content":"hi"}]}`, nil, 0)
		startLane(t, st, worker.Config{Router: singleRoute(t, free, srv, false, 10*time.Second)}).lane.Wake()
		d := waitJob(t, st, job.ID, "done", isStatus(inkwell.StatusDone))
		if c := d.Charge; c == nil || c.AmountMicros != 777 || c.Model != "free" || c.PromptTokens == nil || *c.PromptTokens != 300 ||
			c.CompletionTokens == nil || *c.CompletionTokens != 400 {
			t.Errorf("charge %+v, want the provider's 777 micros, model free, 300 and 400 tokens", c)
		}
	})
}

// TestLane_ModelNoLongerServed: a job whose model left the catalog after it
// was accepted fails, class rejected, and no provider is called.
func TestLane_ModelNoLongerServed(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		srv := startWire(t, func(_ int, body map[string]json.RawMessage) (int, string) { return 200, answerWith(body, 1, 1) })
		gone := acceptChat(t, st, "gone", "acme", `{"model":"retired","messages":[{"role":"user","content":"hi"}]}`, nil, 0)
		served := acceptChat(t, st, "served", "acme", `{"model":"beta","messages":[{"role":"user","content":"still here"}]}`, nil, 0)
		startLane(t, st, worker.Config{Router: singleRoute(t, beta, srv, true, 10*time.Second),
			Retry: worker.RetryPolicy{MaxAttempts: 5, Base: time.Millisecond, Cap: time.Millisecond, ProviderHonoursKeys: true}}).lane.Wake()
		d := waitJob(t, st, gone.ID, "failed", isStatus(inkwell.StatusFailed))
		wantClasses(t, "retired model", d, inkwell.ClassRejected)
		if d.Job.ErrorClass != inkwell.ClassRejected || !strings.Contains(d.Job.Error, `"retired"`) || !strings.HasPrefix(d.Job.Error, "not sent") {
			t.Errorf("job error %q class %q; want class rejected, 'not sent', naming the model", d.Job.Error, d.Job.ErrorClass)
		}
		waitJob(t, st, served.ID, "done", isStatus(inkwell.StatusDone))
		for _, c := range srv.received() {
			if c.Key == storetest.ProviderKey(t, st, gone.ID, "gone") {
				t.Errorf("the retired model's job reached a provider: %v", c.Body)
			}
		}
		if n := len(srv.received()); n != 1 {
			t.Errorf("%d calls, want 1 (the served job's)", n)
		}
	})
}

// TestLane_TimeoutRetryFollowsTheRoute: whether a call that timed out may
// be sent again is its route's provider's to say (Route.HonoursKeys),
// whatever the lane's own policy says.
func TestLane_TimeoutRetryFollowsTheRoute(t *testing.T) {
	t.Parallel()
	for _, honours := range []bool{false, true} {
		t.Run(fmt.Sprintf("honours=%t", honours), func(t *testing.T) {
			t.Parallel()
			st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
			// The first call is never answered (its handler waits until the
			// test ends), so it times out however slow the machine; the
			// second is answered at once.
			hang := make(chan struct{})
			srv := startWire(t, func(n int, body map[string]json.RawMessage) (int, string) {
				if n == 1 {
					<-hang
				}
				return 200, answerWith(body, 5, 5)
			})
			t.Cleanup(func() { close(hang) }) // before the server closes: cleanups run last first
			// The lane's own policy says the opposite of the route.
			policy := worker.RetryPolicy{MaxAttempts: 3, Base: 10 * time.Millisecond, Cap: 20 * time.Millisecond, ProviderHonoursKeys: !honours}
			startLane(t, st, worker.Config{Router: singleRoute(t, beta, srv, honours, 2*time.Second), Poll: 20 * time.Millisecond, Retry: policy})
			job := acceptChat(t, st, "k", "acme", `{"model":"beta","messages":[{"role":"user","content":"slow first"}]}`, nil, 0)
			if !honours {
				d := waitJob(t, st, job.ID, "failed", isStatus(inkwell.StatusFailed))
				wantClasses(t, "timeout", d, inkwell.ClassTimeout)
				if n := len(srv.received()); n != 1 {
					t.Errorf("%d calls, want 1: a timeout is not sent again to a provider that ignores keys", n)
				}
				return
			}
			d := waitJob(t, st, job.ID, "done", isStatus(inkwell.StatusDone))
			wantClasses(t, "timeout", d, inkwell.ClassTimeout, "")
			calls := srv.received()
			if len(calls) != 2 || calls[0].Key != calls[1].Key || calls[0].Key == "" {
				t.Errorf("calls %+v, want two under one provider key", calls)
			}
		})
	}
}

// TestLane_ToolCallAnswer: an answer that only calls tools (content null,
// tool_calls) is stored with text "", finish_reason tool_calls and the
// calls in the response.
func TestLane_ToolCallAnswer(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		const reply = `{"id":"chatcmpl-tools","object":"chat.completion","created":1767225600,"model":"beta-v2","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"look","arguments":"{\"q\":\"ink\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42}}`
		srv := startWire(t, func(int, map[string]json.RawMessage) (int, string) { return 200, reply })
		body := `{"model":"beta","messages":[{"role":"user","content":"look up ink"}],"tools":[{"type":"function","function":{"name":"look","parameters":{"type":"object"}}}],"tool_choice":"required"}`
		job := acceptChat(t, st, "k", "acme", body, nil, 0)
		startLane(t, st, worker.Config{Router: singleRoute(t, beta, srv, false, 10*time.Second)}).lane.Wake()
		d := waitJob(t, st, job.ID, "done", isStatus(inkwell.StatusDone))
		if r := d.Result; r == nil || r.Text != "" || r.FinishReason != "tool_calls" || string(r.Response) != reply || r.Model != "beta" {
			t.Errorf("result %+v; want text \"\", finish_reason tool_calls, the answer kept whole, model beta", r)
		}
		if c := d.Charge; c == nil || c.AmountMicros != beta.Cost(30, 12) || c.ProviderRequestID != "chatcmpl-tools" {
			t.Errorf("charge %+v; want %d micros for 30 + 12 tokens, request chatcmpl-tools", c, beta.Cost(30, 12))
		}
		calls := srv.received()
		if len(calls) != 1 || string(calls[0].Body["tool_choice"]) != `"required"` ||
			string(calls[0].Body["tools"]) != `[{"type":"function","function":{"name":"look","parameters":{"type":"object"}}}]` {
			t.Errorf("sent %+v; want the tools and tool_choice as the client sent them", calls)
		}
	})
}

// TestLane_ImpossibleUsageIsNeverCharged: an answer reporting more tokens
// than any request can use (Model.Cost's "impossible count", over 2^32)
// is not charged Cost's math.MaxInt64: the charge must stay a sum every
// account read can hold (provider.MaxAmountMicros). The job fails as
// malformed, as Cost's own comment says the provider refuses it.
func TestLane_ImpossibleUsageIsNeverCharged(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		srv := startWire(t, func(_ int, body map[string]json.RawMessage) (int, string) { return 200, answerWith(body, 1<<33, 10) })
		budget := int64(1_000_000_000)
		if _, err := st.CreateAccount(t.Context(), store.Account{Name: "acme", BudgetMicros: &budget}); err != nil {
			t.Fatal(err)
		}
		job := acceptChat(t, st, "k", "acme", `{"model":"beta","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`, nil, 1000)
		startLane(t, st, worker.Config{Router: singleRoute(t, beta, srv, false, 10*time.Second)}).lane.Wake()
		d := waitJob(t, st, job.ID, "ended", func(d inkwell.JobDetail) bool {
			return d.Job.Status == inkwell.StatusDone || d.Job.Status == inkwell.StatusFailed
		})
		if d.Charge != nil && d.Charge.AmountMicros > provider.MaxAmountMicros {
			t.Errorf("charged %d micros for an answer reporting %d prompt tokens; no answer may bill more than %d", d.Charge.AmountMicros, int64(1<<33), int64(provider.MaxAmountMicros))
		}
		if d.Job.Status != inkwell.StatusFailed || d.Job.ErrorClass != inkwell.ClassMalformed {
			t.Errorf("job %s class %q (%s); want failed, class malformed", d.Job.Status, d.Job.ErrorClass, d.Job.Error)
		}
		a, err := st.Account(t.Context(), "acme")
		if err != nil {
			t.Fatalf("the account cannot be read after the answer: %v", err)
		}
		if a.SpentMicros != 0 {
			t.Errorf("account spent %d, want 0", a.SpentMicros)
		}
	})
}

func (r catalogRouter) WorstCase(w inkwell.Work, m inkwell.Model) int64 {
	_, p, err := r.cat.Lookup(m.Name)
	if err != nil {
		return 0
	}
	return provider.WorstCaseMicros(r.byProvider[p.Name].Provider, m, w)
}

// TestLane_ChargeNeverPastTheReservation: an answer that reports more
// usage than its request could have had (a priced model's tokens, or an
// unpriced provider's billed amount) is stored, charged the worst case
// accept reserved and no more, and keeps the counts it reported: the
// account's charges never pass its budget, the budget being exactly that
// worst case.
func TestLane_ChargeNeverPastTheReservation(t *testing.T) {
	t.Parallel()
	free := inkwell.Model{Name: "free", Provider: "p", Upstream: "free-up", MaxOutputTokens: 100}
	for _, tc := range []struct {
		name     string
		model    inkwell.Model
		reported int64 // what the answer costs as it reports it
		answer   func(body map[string]json.RawMessage) string
	}{
		{"PricedUsage", beta, beta.Cost(100_000, 5_000), func(body map[string]json.RawMessage) string { return answerWith(body, 100_000, 5_000) }},
		{"UnpricedAmount", free, 1_500_000, func(body map[string]json.RawMessage) string {
			var a map[string]any
			_ = json.Unmarshal([]byte(answerWith(body, 100_000, 5_000)), &a)
			a["inkwell_amount_micros"] = 1_500_000
			return string(mustMarshal(a))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T, st *store.Store) {
				srv := startWire(t, func(_ int, body map[string]json.RawMessage) (int, string) { return 200, tc.answer(body) })
				router := singleRoute(t, tc.model, srv, false, 10*time.Second)
				body := `{"model":"` + tc.model.Name + `","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`
				c := parseChat(t, body)
				worst := router.WorstCase(inkwell.Work{Chat: c}, tc.model)
				if worst <= 0 || worst >= 1_500_000 {
					t.Fatalf("worst case %d: the answer must report more than it", worst)
				}
				if _, err := st.CreateAccount(t.Context(), store.Account{Name: "acme", BudgetMicros: &worst}); err != nil {
					t.Fatal(err)
				}
				job := acceptChat(t, st, "k", "acme", body, nil, worst)
				obs := &capRecorder{}
				startLane(t, st, worker.Config{Name: "capped", Router: router, Observer: obs}).lane.Wake()
				d := waitJob(t, st, job.ID, "done", isStatus(inkwell.StatusDone))
				if got := obs.capped(); len(got) != 1 || got[0] != fmt.Sprintf("capped %s %d>%d", tc.model.Name, tc.reported, worst) {
					t.Errorf("the observer heard %q; want one cap of model %s from %d to %d micros", got, tc.model.Name, tc.reported, worst)
				}
				if ch := d.Charge; ch == nil || ch.AmountMicros != worst || ch.PromptTokens == nil || *ch.PromptTokens != 100_000 ||
					ch.CompletionTokens == nil || *ch.CompletionTokens != 5_000 {
					t.Errorf("charge %+v; want the %d micros reserved, the 100000 + 5000 tokens reported kept", ch, worst)
				}
				a, err := st.Account(t.Context(), "acme")
				if err != nil {
					t.Fatal(err)
				}
				if a.SpentMicros != worst || a.ReservedMicros != 0 {
					t.Errorf("account spent %d, reserved %d; want %d spent (its whole budget, no more), nothing reserved", a.SpentMicros, a.ReservedMicros, worst)
				}
			})
		})
	}
}

// capRecorder is an Observer that records what worker.ChargeCapObserver
// hears.
type capRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *capRecorder) Claimed(string)                                {}
func (r *capRecorder) Finished(string, string, float64, inkwell.Job) {}
func (r *capRecorder) ChargeCapped(lane, model string, reported, charged int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, fmt.Sprintf("%s %s %d>%d", lane, model, reported, charged))
}

func (r *capRecorder) capped() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// TestLane_UsageBeyondTheBytesChargedInFull: an answer to a request with
// an image, or with a file the provider stores, reports more prompt
// tokens than the request has bytes (input the bytes do not show).
// Within the model's bound for it (max_image_tokens for an image, its
// context window, max_input_tokens, for a file), that usage is charged as
// reported, not capped at the bytes; past it, the charge is capped at the
// worst case accept reserved, as for any answer.
func TestLane_UsageBeyondTheBytesChargedInFull(t *testing.T) {
	t.Parallel()
	image, file := beta, beta
	image.ImageTokens = 1445
	file.InputTokens = 3000
	const (
		withImage = `{"model":"beta","max_tokens":50,"messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}`
		withFile  = `{"model":"beta","max_tokens":50,"messages":[{"role":"user","content":[{"type":"text","text":"sum it up"},{"type":"file","file":{"file_id":"file-abc"}}]}]}`
	)
	for _, tc := range []struct {
		name       string
		m          inkwell.Model
		body       string
		prompt     func(inkwell.ChatRequest) int64 // prompt tokens the answer reports
		wantCapped bool
	}{
		{"ImageWithinItsBound", image, withImage, func(c inkwell.ChatRequest) int64 { return int64(c.InputBytes()) + 1400 }, false},
		{"ImagePastItsBound", image, withImage, func(c inkwell.ChatRequest) int64 { return int64(c.InputBytes()) + 5000 }, true},
		{"FileWithinTheWindow", file, withFile, func(inkwell.ChatRequest) int64 { return 2900 }, false},
		{"FilePastTheWindow", file, withFile, func(inkwell.ChatRequest) int64 { return 3500 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, m := parseChat(t, tc.body), tc.m
			worst, prompt := m.WorstCase(c), tc.prompt(c)
			storetest.Run(t, func(t *testing.T, st *store.Store) {
				srv := startWire(t, func(_ int, body map[string]json.RawMessage) (int, string) { return 200, answerWith(body, prompt, 10) })
				budget := worst
				if _, err := st.CreateAccount(t.Context(), store.Account{Name: "acme", BudgetMicros: &budget}); err != nil {
					t.Fatal(err)
				}
				job := acceptChat(t, st, "k", "acme", tc.body, nil, worst)
				startLane(t, st, worker.Config{Router: singleRoute(t, m, srv, false, 10*time.Second)}).lane.Wake()
				d := waitJob(t, st, job.ID, "done", isStatus(inkwell.StatusDone))
				want := m.Cost(prompt, 10)
				if tc.wantCapped {
					want = worst
				}
				if d.Charge == nil || d.Charge.AmountMicros != want {
					t.Fatalf("charge %+v; want %d micros (reported usage %d+10 costs %d, the worst case is %d)", d.Charge, want, prompt, m.Cost(prompt, 10), worst)
				}
				if !tc.wantCapped && want <= m.Cost(int64(c.InputBytes()), 50) {
					t.Errorf("the test's usage costs %d, not more than the bytes alone could (%d): it would pass without the bound", want, m.Cost(int64(c.InputBytes()), 50))
				}
			})
		})
	}
}
