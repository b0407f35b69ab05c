package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// A provider answer the database cannot store must fail that one attempt,
// with an error that says why, and leave the lane running: retried, the
// job would get the same answer again, so stopping the lane on it would
// stop it for good.

// TestLane_UnstorableAnswerFailsTheAttempt drives real OpenAI-protocol
// calls to a loopback server that answers each prompt as the test says:
// NUL in the text, a negative bill, an over-long id, and error pages in
// Latin-1 or holding NUL. Each job fails with a clear, storable error; a
// good job queued after them all is done by the same, still running, lane.
func TestLane_UnstorableAnswerFailsTheAttempt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		prompt  string
		status  int
		body    string
		mention string // what the job's error must say
	}{
		{"nul-text", 200, chatAnswer("req-nul", "ink\u0000well", 10), "NUL"},
		{"negative-amount", 200, chatAnswer("req-neg", "a fine poem", -5), "negative amount"},
		{"long-id", 200, chatAnswer(strings.Repeat("r", 300), "a fine poem", 10), "answer id"},
		{"latin1-error-page", 502, "Bad gateway \xe9t\xe9", "Bad gateway"},
		{"nul-error-page", 500, "broken\x00proxy", "broken"},
	}
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		st := storetest.MustOpen(t, b.DSN, store.Options{})
		answers := map[string]func(w http.ResponseWriter){}
		for _, tc := range cases {
			answers[tc.prompt] = func(w http.ResponseWriter) {
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}
		}
		answers["good"] = func(w http.ResponseWriter) { fmt.Fprint(w, chatAnswer("req-good", "ink flows", 42)) }
		openai, err := provider.NewOpenAI(provider.OpenAIConfig{URL: startChatServer(t, answers), Timeout: waitLimit})
		if err != nil {
			t.Fatal(err)
		}
		r := startLane(t, st, worker.Config{Provider: openai, Poll: 20 * time.Millisecond})
		var jobs []inkwell.Job
		for _, tc := range cases {
			jobs = append(jobs, accept(t, st, tc.prompt, tc.prompt, 5))
		}
		good := accept(t, st, "good", "good", 5)
		r.lane.Wake()

		for i, tc := range cases {
			d := waitWhileRunning(t, st, r, jobs[i].ID, inkwell.StatusFailed)
			assertFailedStorably(t, d, tc.mention)
		}
		d := waitWhileRunning(t, st, r, good.ID, inkwell.StatusDone)
		if d.Result == nil || d.Result.Text != "ink flows" || d.Charge == nil || d.Charge.AmountMicros != 42 {
			t.Errorf("good job after the bad answers: result %+v, charge %+v; want its text and 42 micros", d.Result, d.Charge)
		}
		assertLaneRunning(t, st, r)
	})
}

// TestLane_CompletionTheDatabaseRefusesFailsTheAttempt: should an answer
// that the database refuses get past the provider's checks (here a
// provider stand-in answers directly), the completion's refusal is
// recorded as the attempt's failure, and the lane goes on.
func TestLane_CompletionTheDatabaseRefusesFailsTheAttempt(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		st := storetest.MustOpen(t, b.DSN, store.Options{})
		answers := map[string]inkwell.ProviderResponse{
			"negative-amount": {Text: "a fine poem", RequestID: "req-neg", AmountMicros: -5}, // CHECK (amount_micros >= 0)
			"good":            {Text: "ink flows", RequestID: "req-good", AmountMicros: 42},
		}
		if b.Name == "postgres" { // SQLite stores these; PostgreSQL's text type refuses them
			answers["nul-text"] = inkwell.ProviderResponse{Text: "ink\x00well", RequestID: "req-nul", AmountMicros: 1}
			answers["latin1-text"] = inkwell.ProviderResponse{Text: "\xe9t\xe9", RequestID: "req-latin1", AmountMicros: 1}
		}
		r := startLane(t, st, worker.Config{Provider: answerFunc(answers), Poll: 20 * time.Millisecond})
		var bad []inkwell.Job
		for prompt := range answers {
			if prompt != "good" {
				bad = append(bad, accept(t, st, prompt, prompt, 5))
			}
		}
		good := accept(t, st, "good", "good", 5)
		r.lane.Wake()

		for _, j := range bad {
			d := waitWhileRunning(t, st, r, j.ID, inkwell.StatusFailed)
			assertFailedStorably(t, d, "could not store the provider's answer")
		}
		if d := waitWhileRunning(t, st, r, good.ID, inkwell.StatusDone); d.Charge == nil || d.Charge.AmountMicros != 42 {
			t.Errorf("good job after the refused answers: charge %+v, want 42 micros", d.Charge)
		}
		assertLaneRunning(t, st, r)
	})
}

// assertFailedStorably checks a job failed on its one attempt, with the
// same error on both, valid UTF-8 without NUL, mentioning want; and that
// nothing of the refused answer was kept.
func assertFailedStorably(t *testing.T, d inkwell.JobDetail, want string) {
	t.Helper()
	if len(d.Attempts) != 1 || d.Attempts[0].Status != inkwell.StatusFailed || d.Attempts[0].Error != d.Job.Error {
		t.Errorf("job %d: attempts %+v; want one failed attempt with the job's error %q", d.Job.ID, d.Attempts, d.Job.Error)
	}
	if msg := d.Job.Error; !strings.Contains(msg, want) || !utf8.ValidString(msg) || strings.ContainsRune(msg, 0) {
		t.Errorf("job %d error %q: want valid UTF-8 without NUL that mentions %q", d.Job.ID, msg, want)
	}
	if d.Result != nil || d.Charge != nil {
		t.Errorf("job %d kept result %+v, charge %+v of an answer it refused", d.Job.ID, d.Result, d.Charge)
	}
}

// waitWhileRunning waits for the job to reach status, and fails at once
// if the lane stops first (it would never get there).
func waitWhileRunning(t *testing.T, st *store.Store, r *running, id int64, status string) inkwell.JobDetail {
	t.Helper()
	return waitJob(t, st, id, status, func(d inkwell.JobDetail) bool {
		assertRunNotReturned(t, r)
		return d.Job.Status == status
	})
}

func assertRunNotReturned(t *testing.T, r *running) {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		t.Fatalf("the lane stopped on a bad answer: Run = %v", err)
	default:
	}
}

// assertLaneRunning checks the lane has not stopped on its own and its
// lanes row is not marked stopped.
func assertLaneRunning(t *testing.T, st *store.Store, r *running) {
	t.Helper()
	assertRunNotReturned(t, r)
	if row := laneRow(t, st, "local"); row.StoppedAt != nil {
		t.Errorf("lanes row %+v, want the lane still running", row)
	}
}

// startChatServer serves the chat-completions API on loopback, answering
// each request by its prompt (the user message) from answers, and returns
// its URL.
func startChatServer(t *testing.T, answers map[string]func(w http.ResponseWriter)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
			http.Error(w, "not a chat completion", http.StatusBadRequest)
			return
		}
		answer, ok := answers[req.Messages[0].Content]
		if !ok {
			http.Error(w, "no answer for this prompt", http.StatusNotFound)
			return
		}
		answer(w)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// chatAnswer is a chat-completion answer with the simulator's billing
// extension.
func chatAnswer(id, content string, amountMicros int64) string {
	b, _ := json.Marshal(map[string]any{
		"id":                    id,
		"choices":               []any{map[string]any{"message": map[string]any{"role": "assistant", "content": content}}},
		"inkwell_amount_micros": amountMicros,
	})
	return string(b)
}

// answerFunc is a provider that answers each prompt from a table: the
// outside world, answering what no checked provider would pass on.
type answerFunc map[string]inkwell.ProviderResponse

func (a answerFunc) Generate(_ context.Context, req inkwell.ProviderRequest) (inkwell.ProviderResponse, error) {
	resp, ok := a[req.Prompt]
	if !ok {
		return inkwell.ProviderResponse{}, fmt.Errorf("no answer for prompt %q", req.Prompt)
	}
	return resp, nil
}
