package providersim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
)

// clock is a settable clock for the simulator's NowFunc.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// refusal is one call's status, Retry-After and error body.
type refusal struct {
	status     int
	retryAfter string
	code, typ  string
}

func postRaw(t *testing.T, url, key, body string) refusal {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Idempotency-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var e struct {
		Error struct{ Code, Type string } `json:"error"`
	}
	json.Unmarshal(raw, &e)
	return refusal{res.StatusCode, res.Header.Get("Retry-After"), e.Error.Code, e.Error.Type}
}

func TestServer_RPMIsEnforced(t *testing.T) {
	t.Parallel()
	clk := newClock()
	sim := simtest.MustStart(t, providersim.Config{RPM: 120, NowFunc: clk.Now}) // 2 a second, a bucket of 2
	call := func(key string) refusal { return postRaw(t, sim.URL, key, chatBody("p", 4)) }
	for _, key := range []string{"a", "b"} {
		if got := call(key); got.status != http.StatusOK {
			t.Fatalf("call %s within the limit: %+v, want 200", key, got)
		}
	}
	got := call("c")
	want := refusal{http.StatusTooManyRequests, "1", "rate_limit_exceeded", "requests"}
	if got != want {
		t.Errorf("call past the limit = %+v, want %+v", got, want)
	}
	if got := call("a"); got.status != http.StatusTooManyRequests {
		t.Errorf("a repeated key past the limit = %+v, want 429: every request counts", got)
	}
	clk.Advance(500 * time.Millisecond) // one more call's worth
	if got := call("c"); got.status != http.StatusOK {
		t.Errorf("call after the refill = %+v, want 200", got)
	}
	if got := call("d"); got.status != http.StatusTooManyRequests {
		t.Errorf("call right after = %+v, want 429", got)
	}
	l := sim.MustLedger(t)
	if _, billed := l.Entry("d"); billed || l.TotalBills != 3 {
		t.Errorf("ledger = %+v, want a, b and c billed once each and nothing refused billed", l)
	}
	if e, _ := l.Entry("a"); e.Calls != 1 {
		t.Errorf("key a answered %d times, want 1: the refused repeat is not an answer", e.Calls)
	}
}

func TestServer_RetryAfterRoundsUp(t *testing.T) {
	t.Parallel()
	clk := newClock()
	start := clk.Now()
	sim := simtest.MustStart(t, providersim.Config{RPM: 20, NowFunc: clk.Now}) // one every 3 s
	postRaw(t, sim.URL, "a", chatBody("p", 4))
	for _, tt := range []struct {
		after time.Duration
		want  string
	}{{0, "3"}, {time.Second, "2"}, {1500 * time.Millisecond, "2"}, {2900 * time.Millisecond, "1"}} {
		clk.Advance(tt.after - clk.Now().Sub(start))
		if got := postRaw(t, sim.URL, "b", chatBody("p", 4)); got.status != 429 || got.retryAfter != tt.want {
			t.Errorf("%v after the first call: %+v, want 429 with Retry-After %s", tt.after, got, tt.want)
		}
	}
}

func TestServer_TPMIsEnforcedByUsage(t *testing.T) {
	t.Parallel()
	clk := newClock()
	// 600 tokens a minute: 10 a second, a bucket of 10. Each call below uses
	// (1 prompt word + 4 answer words) * 2 = 10 tokens.
	sim := simtest.MustStart(t, providersim.Config{TPM: 600, NowFunc: clk.Now})
	if got := postRaw(t, sim.URL, "a", chatBody("p", 8)); got.status != http.StatusOK {
		t.Fatalf("first call: %+v, want 200", got)
	}
	got := postRaw(t, sim.URL, "b", chatBody("p", 8))
	if want := (refusal{http.StatusTooManyRequests, "1", "rate_limit_exceeded", "tokens"}); got != want {
		t.Errorf("second call = %+v, want %+v", got, want)
	}
	clk.Advance(time.Second)
	// A call larger than the bucket goes through when it is full, and its
	// debt holds the next one back for as long as it took.
	if got := postRaw(t, sim.URL, "big", chatBody("p", 2*48)); got.status != http.StatusOK { // (1+48)*2 = 98 tokens
		t.Fatalf("big call on a full bucket: %+v, want 200", got)
	}
	clk.Advance(5 * time.Second)
	// -88 + 5 s * 10 = -38: 48 more tokens for a call of 10, 4.8 s.
	if got := postRaw(t, sim.URL, "c", chatBody("p", 8)); got.status != 429 || got.retryAfter != "5" {
		t.Errorf("call 5 s after the big one = %+v, want 429 with Retry-After 5 (its debt of 88, then 10)", got)
	}
}

func TestServer_AnswerReportsUsage(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	res, err := http.Post(sim.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody("three word prompt", 10)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var a struct {
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
			Total      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(res.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	want := provider.UsageOf("three word prompt", provider.Generate("three word prompt", 5))
	if a.Usage.Prompt != want.PromptTokens || a.Usage.Completion != want.CompletionTokens || a.Usage.Total != want.TotalTokens() || a.Usage.Total != (3+5)*2 {
		t.Errorf("usage = %+v, want %+v (total %d)", a.Usage, want, want.TotalTokens())
	}
}

func TestNew_NegativeLimit(t *testing.T) {
	t.Parallel()
	for _, cfg := range []providersim.Config{{RPM: -1}, {TPM: -1}} {
		cfg.LedgerPath = t.TempDir() + "/l.db"
		if s, err := providersim.New(cfg); err == nil {
			s.Close()
			t.Errorf("New(%+v) = nil error, want a refusal", cfg)
		}
	}
}
