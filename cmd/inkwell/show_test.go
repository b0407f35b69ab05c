package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestCLI_ShowsClassesBackOffAndAttemptNumbers: show prints each failed
// attempt's class, a queued job's back-off, and names the charge's attempt
// by its number, as the attempts table does, not by its row id.
func TestCLI_ShowsClassesBackOffAndAttemptNumbers(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	payload, _ := json.Marshal(inkwell.Request{Prompt: "p", Account: "acme", MaxWords: 5})
	job, _, err := st.Accept(t.Context(), store.AcceptParams{IdempotencyKey: "k", RequestHash: inkwell.RequestHash(payload), Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	c := storetest.ClaimAs(t, st, "local")
	retryAt := time.Now().Add(time.Hour)
	if err := st.FailIfRunning(t.Context(), store.FailParams{JobID: job.ID, AttemptID: c.Attempt.ID, Error: "provider: provider call: server error: HTTP 502: bad gateway",
		Class: inkwell.ClassProviderError, RetryAt: &retryAt}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "show", "1", "--db", db)
	if code != 0 {
		t.Fatalf("show: exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"job 1  queued", "class     provider_error", "waiting   automatic retry, not before " + retryAt.UTC().Format("2006-01-02T15:04"),
		"#  STATUS  CLASS", "  1  failed  provider_error"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("show of a rescheduled job lacks %q:\n%s", want, stdout)
		}
	}

	// Run it again and complete it: the charge names attempt #2.
	if _, err := st.DB().ExecContext(t.Context(), `UPDATE jobs SET not_before = NULL WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	c = storetest.ClaimAs(t, st, "local")
	if err := st.CompleteIfRunning(t.Context(), store.CompleteParams{JobID: job.ID, AttemptID: c.Attempt.ID, Text: "t", Account: "acme",
		AmountMicros: 5, ProviderRequestID: "req-1"}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI(t, "show", "1", "--db", db)
	if code != 0 {
		t.Fatalf("show: exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, "provider request req-1  (attempt #2)") || strings.Contains(stdout, "class     ") {
		t.Errorf("show of the done job: want the charge's attempt as #2 and no class line:\n%s", stdout)
	}
	if !strings.Contains(stdout, "charge  0.000005 currency units (5 micros)") {
		t.Errorf("show of the done job: want the money with its unit:\n%s", stdout)
	}
	// One time format on every screen: RFC 3339 in UTC, to the second.
	if !regexp.MustCompile(`accepted  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n`).MatchString(stdout) {
		t.Errorf("show prints times in another form than 2006-01-02T15:04:05Z:\n%s", stdout)
	}
}

// TestCLI_ShowsAnEmptyAnswerAsSuch: a done job whose billed answer has no
// text (a reasoning model that spent its tokens thinking, finish_reason
// length) shows that it has none and why, not a blank result.
func TestCLI_ShowsAnEmptyAnswerAsSuch(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	payload, _ := json.Marshal(inkwell.Request{Prompt: "p", MaxWords: 5})
	job, _, err := st.Accept(t.Context(), store.AcceptParams{IdempotencyKey: "k", RequestHash: inkwell.RequestHash(payload), Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	c := storetest.ClaimAs(t, st, "local")
	if err := st.CompleteIfRunning(t.Context(), store.CompleteParams{JobID: job.ID, AttemptID: c.Attempt.ID, Text: "", FinishReason: "length",
		Response: []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"length"}]}`),
		Account:  inkwell.DefaultAccount, AmountMicros: 5, ProviderRequestID: "chatcmpl-1"}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "show", "1", "--db", db)
	if code != 0 {
		t.Fatalf("show: exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, "result\n(no text: the provider answered nothing, finish length)\n") {
		t.Errorf("show of a done job with an empty answer:\n%s", stdout)
	}
}
