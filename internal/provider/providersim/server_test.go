package providersim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
)

// answer is the part of a chat completion the tests read.
type answer struct {
	ID      string `json:"id"`
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Amount int64 `json:"inkwell_amount_micros"`
}

func (a answer) text() string {
	if len(a.Choices) == 0 {
		return ""
	}
	return a.Choices[0].Message.Content
}

// chatBody is a minimal chat-completion request.
func chatBody(prompt string, maxTokens int) string {
	b, _ := json.Marshal(map[string]any{
		"model":      "m",
		"messages":   []map[string]string{{"role": "system", "content": "be brief"}, {"role": "user", "content": prompt}},
		"max_tokens": maxTokens,
	})
	return string(b)
}

// mustPost sends one chat completion and returns the status and answer.
func mustPost(t *testing.T, baseURL, key, body string) (int, answer) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, baseURL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer res.Body.Close()
	var a answer
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("answer %s: %v", raw, err)
		}
	}
	return res.StatusCode, a
}

func TestServer_Completion(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})

	t.Run("MaxTokensSetsWords", func(t *testing.T) {
		t.Parallel()
		_, a := mustPost(t, sim.URL, "words-14", chatBody("count me", 14))
		if got, want := a.text(), provider.Generate("count me", 7); got != want {
			t.Errorf("text = %q, want %q (7 words)", got, want)
		}
		if got, want := a.Amount, int64(7*provider.MicrosPerWord); got != want {
			t.Errorf("amount = %d, want %d", got, want)
		}
	})
	t.Run("MaxCompletionTokens", func(t *testing.T) {
		t.Parallel()
		_, a := mustPost(t, sim.URL, "", `{"messages":[{"role":"user","content":[{"type":"text","text":"parts"}]}],"max_completion_tokens":6}`)
		if got, want := a.text(), provider.Generate("parts", 3); got != want {
			t.Errorf("text = %q, want %q", got, want)
		}
	})
	t.Run("NoLimitIsDefault", func(t *testing.T) {
		t.Parallel()
		_, a := mustPost(t, sim.URL, "", `{"messages":[{"role":"user","content":"x"}]}`)
		if got := len(strings.Fields(a.text())); got != 50 {
			t.Errorf("words = %d, want 50", got)
		}
	})
}

func TestServer_Refusals(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	tests := []struct {
		name, key, body string
		want            int
	}{
		{"NotJSON", "k1", "{", http.StatusBadRequest},
		{"NoUserMessage", "k2", `{"messages":[{"role":"system","content":"x"}]}`, http.StatusBadRequest},
		{"EmptyPrompt", "k3", `{"messages":[{"role":"user","content":" "}]}`, http.StatusBadRequest},
		{"TooLarge", "k4", chatBody(strings.Repeat("a", 2<<20), 4), http.StatusRequestEntityTooLarge},
		{"KeyTooLong", strings.Repeat("k", 1025), chatBody("p", 4), http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, _ := mustPost(t, sim.URL, tt.key, tt.body); got != tt.want {
				t.Errorf("status = %d, want %d", got, tt.want)
			}
		})
	}
	t.Run("KeyReusedForOtherPrompt", func(t *testing.T) {
		t.Parallel()
		mustPost(t, sim.URL, "reused", chatBody("first", 4))
		if got, _ := mustPost(t, sim.URL, "reused", chatBody("second", 4)); got != http.StatusUnprocessableEntity {
			t.Errorf("status = %d, want 422", got)
		}
		if e, _ := sim.MustLedger(t).Entry("reused"); e.Calls != 1 {
			t.Errorf("calls = %d, want 1: a refused call is not counted", e.Calls)
		}
	})
	t.Run("WrongMethod", func(t *testing.T) {
		t.Parallel()
		res, err := http.Get(sim.URL + "/v1/chat/completions")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("status = %d, want 405", res.StatusCode)
		}
	})
}

func TestServer_RefusalsAreNotBilled(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	mustPost(t, sim.URL, "k", "{")
	mustPost(t, sim.URL, "", `{"messages":[]}`)
	if l := sim.MustLedger(t); len(l.Entries) != 0 || l.TotalBills != 0 {
		t.Errorf("ledger = %+v, want empty", l)
	}
}

func TestServer_InjectedFailureIsNotBilled(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{FailRate: 1})
	for _, key := range []string{"k", "k", ""} {
		if got, _ := mustPost(t, sim.URL, key, chatBody("p", 4)); got != http.StatusInternalServerError {
			t.Errorf("status = %d, want 500", got)
		}
	}
	if l := sim.MustLedger(t); len(l.Entries) != 0 {
		t.Errorf("ledger = %+v, want empty", l)
	}
}

func TestServer_ConcurrentSameKeyBillsOnce(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	const n = 16
	ids := make([]string, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			_, a := mustPost(t, sim.URL, "same", chatBody("p", 4))
			ids[i] = a.ID
		})
	}
	close(start)
	wg.Wait()
	for i, id := range ids {
		if id == "" || id != ids[0] {
			t.Errorf("call %d got id %q, want %q", i, id, ids[0])
		}
	}
	want := providersim.Ledger{
		Entries:           []providersim.LedgerEntry{{Key: "same", RequestID: ids[0], Calls: n, Bills: 1, AmountMicros: 2000, Text: provider.Generate("p", 2)}},
		TotalBills:        1,
		TotalAmountMicros: 2000,
	}
	if diff := cmp.Diff(want, sim.MustLedger(t)); diff != "" {
		t.Errorf("ledger (-want +got):\n%s", diff)
	}
}

// TestServer_LedgerSurvivesRestart: a new simulator on the same file still
// knows the key, and ReadLedger reads the file with no server at all.
func TestServer_LedgerSurvivesRestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	ctx := context.Background()

	first := mustServe(t, providersim.Config{LedgerPath: path})
	_, a := mustPost(t, first.url, "job-1", chatBody("p", 6))
	first.stop(t)

	l, err := providersim.ReadLedger(ctx, path)
	if err != nil {
		t.Fatalf("ReadLedger: %v", err)
	}
	if e, ok := l.Entry("job-1"); !ok || e.Bills != 1 || e.RequestID != a.ID {
		t.Fatalf("ledger after stop = %+v, want job-1 billed once as %q", l, a.ID)
	}

	second := mustServe(t, providersim.Config{LedgerPath: path})
	_, b := mustPost(t, second.url, "job-1", chatBody("p", 6))
	second.stop(t)
	if b.ID != a.ID || b.text() != a.text() {
		t.Errorf("after restart answered %q %q, want %q %q", b.ID, b.text(), a.ID, a.text())
	}
	l, err = providersim.ReadLedger(ctx, path)
	if err != nil {
		t.Fatalf("ReadLedger: %v", err)
	}
	if e, _ := l.Entry("job-1"); e.Bills != 1 || e.Calls != 2 || l.TotalBills != 1 {
		t.Errorf("ledger after restart = %+v, want job-1 billed once, called twice", l)
	}
}

func TestReadLedger_MissingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "nope.db")
	if _, err := providersim.ReadLedger(context.Background(), path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadLedger(missing) = %v, want os.ErrNotExist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadLedger created %s", path)
	}
}

// TestServer_SeedReproduces: the same seed gives the same failures in the
// same order; another seed gives others.
func TestServer_SeedReproduces(t *testing.T) {
	t.Parallel()
	outcomes := func(seed int64) string {
		sim := simtest.MustStart(t, providersim.Config{FailRate: 0.5, Seed: seed})
		var b strings.Builder
		for range 24 {
			status, _ := mustPost(t, sim.URL, "", chatBody("p", 2))
			b.WriteString(map[int]string{200: "a", 500: "F"}[status])
		}
		return b.String()
	}
	a, b, c := outcomes(7), outcomes(7), outcomes(8)
	if a != b {
		t.Errorf("seed 7 gave %s then %s, want the same", a, b)
	}
	if a == c {
		t.Errorf("seeds 7 and 8 both gave %s, want different", a)
	}
	if !strings.Contains(a, "a") || !strings.Contains(a, "F") {
		t.Errorf("fail rate 0.5 gave %s, want both answers and failures", a)
	}
}

func TestServer_Healthz(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	res, err := http.Get(sim.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("status = %d, want 200", res.StatusCode)
	}
}

func TestNew_BadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, cfg := range []providersim.Config{
		{},
		{LedgerPath: filepath.Join(dir, "a.db"), FailRate: 1.5},
		{LedgerPath: filepath.Join(dir, "b.db"), HangRate: -0.1},
		{LedgerPath: filepath.Join(dir, "no-such-dir", "c.db")},
	} {
		if s, err := providersim.New(cfg); err == nil {
			s.Close()
			t.Errorf("New(%+v) = nil error, want a refusal", cfg)
		}
	}
}

// TestServer_StopCutsHungCall: stopping the server drops a hung call's
// connection instead of waiting for it forever.
func TestServer_StopCutsHungCall(t *testing.T) {
	t.Parallel()
	hung := make(chan struct{}, 1)
	s := mustServe(t, providersim.Config{HangRate: 1, Logger: slog.New(signalHandler{"injected hang", hung})})
	posted := make(chan error, 1)
	go func() {
		res, err := http.Post(s.url+"/v1/chat/completions", "application/json", strings.NewReader(chatBody("p", 4)))
		if err == nil {
			res.Body.Close()
		}
		posted <- err
	}()
	waitFor(t, hung, "the call to hang")
	s.stop(t)
	select {
	case err := <-posted:
		if err == nil {
			t.Error("hung call got an answer, want a dropped connection")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("hung call still open 10s after stop")
	}
}

type served struct {
	url    string
	srv    *providersim.Server
	cancel context.CancelFunc
	done   chan error
}

// mustServe starts a simulator that the test stops itself, with stop.
func mustServe(t *testing.T, cfg providersim.Config) *served {
	t.Helper()
	if cfg.LedgerPath == "" {
		cfg.LedgerPath = filepath.Join(t.TempDir(), "ledger.db")
	}
	srv, err := providersim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{url: "http://" + ln.Addr().String(), srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); srv.Close() })
	return s
}

func (s *served) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("Serve = %v, want nil after a clean stop", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10s of stop")
	}
	if err := s.srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// signalHandler is a slog handler that signals when a message is logged:
// the test's way to know the server reached a point, without sleeping.
type signalHandler struct {
	msg string
	c   chan struct{}
}

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h signalHandler) WithGroup(string) slog.Handler            { return h }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.c <- struct{}{}:
		default:
		}
	}
	return nil
}
