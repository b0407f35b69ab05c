package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Budgets and per-account rpm over real HTTP (docs/design.md §10): 402
// budget_exceeded and 429 too_many write nothing (every table compared);
// re-sends are answered and never counted.

// budgetEnv is a server whose worst case is 10 micros a word.
func budgetEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t}
	e.st = storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	e.api = api.New(api.Config{Store: e.st, Logger: storetest.TestLogger(t), OnAccepted: func() { e.accepted.Add(1) },
		WorstCase: func(w inkwell.Work, _ inkwell.Model) int64 { return int64(w.Short.MaxWords) * 10 }})
	e.api.SetReady(true)
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) mustAccount(name string, budget *int64, rpm int) {
	e.t.Helper()
	if _, err := e.st.CreateAccount(e.t.Context(), store.Account{Name: name, BudgetMicros: budget, RPM: rpm}); err != nil {
		e.t.Fatal(err)
	}
}

func TestAccept_BudgetExceeded(t *testing.T) {
	t.Parallel()
	e := budgetEnv(t)
	budget := int64(2_500)
	e.mustAccount("acme", &budget, 0)
	if r := e.post("k1", `{"prompt":"p","account":"acme","max_words":200}`); r.status != http.StatusCreated {
		t.Fatalf("accept under the budget: %d %s", r.status, r.body)
	}
	before := e.contents()
	assertError(t, e.post("k2", `{"prompt":"p","account":"acme","max_words":100}`), http.StatusPaymentRequired, inkwell.EBUDGET)
	e.assertUnchanged(before)
	if r := e.post("k1", `{"prompt":"p","account":"acme","max_words":200}`); r.status != http.StatusOK {
		t.Errorf("re-send past the budget: %d %s; want 200", r.status, r.body)
	}
	e.assertUnchanged(before)
	if r := e.post("k3", `{"prompt":"p","max_words":100}`); r.status != http.StatusCreated {
		t.Errorf("another account is not held by acme's budget: %d %s", r.status, r.body)
	}

	// Job 1 fails with nothing sent: its reservation is released, job 4
	// takes the room, and job 1's retry is refused with nothing written.
	c := storetest.ClaimAs(t, e.st, "lane-a")
	if err := e.st.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "refused", Class: inkwell.ClassNotSent}); err != nil {
		t.Fatal(err)
	}
	if r := e.post("k4", `{"prompt":"p","account":"acme","max_words":200}`); r.status != http.StatusCreated {
		t.Fatalf("accept after the release: %d %s", r.status, r.body)
	}
	before = e.contents()
	assertError(t, e.do(http.MethodPost, "/v1/jobs/1/retry", nil, nil), http.StatusPaymentRequired, inkwell.EBUDGET)
	e.assertUnchanged(before)
}

func TestAccept_AccountRPM(t *testing.T) {
	t.Parallel()
	e := budgetEnv(t)
	e.mustAccount("acme", nil, 2)
	for _, k := range []string{"a", "a", "b"} { // the re-send of a is not counted
		if r := e.post(k, `{"prompt":"p","account":"acme"}`); r.status != http.StatusCreated && r.status != http.StatusOK {
			t.Fatalf("accept %s under the rpm: %d %s", k, r.status, r.body)
		}
	}
	before := e.contents()
	r := e.post("c", `{"prompt":"p","account":"acme"}`)
	assertError(t, r, http.StatusTooManyRequests, inkwell.ETOOMANY)
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
		t.Errorf("Retry-After %q, want 1-60 seconds", r.header.Get("Retry-After"))
	}
	e.assertUnchanged(before)
	if r := e.post("a", `{"prompt":"p","account":"acme"}`); r.status != http.StatusOK {
		t.Errorf("re-send past the rpm: %d %s; want 200", r.status, r.body)
	}
	assertError(t, e.post("a", `{"prompt":"other","account":"acme"}`), http.StatusUnprocessableEntity, inkwell.EKEYREUSED)
	e.assertUnchanged(before)
	if r := e.post("d", `{"prompt":"p"}`); r.status != http.StatusCreated {
		t.Errorf("another account is not held by acme's rpm: %d %s", r.status, r.body)
	}

	// A request refused for its budget gives its place in the minute back.
	zero := int64(0)
	e.mustAccount("tight", &zero, 1)
	assertError(t, e.post("t1", `{"prompt":"p","account":"tight"}`), http.StatusPaymentRequired, inkwell.EBUDGET)
	if _, err := e.st.UpdateAccount(t.Context(), "tight", store.AccountChange{NoBudget: true}); err != nil {
		t.Fatal(err)
	}
	if r := e.post("t1", `{"prompt":"p","account":"tight"}`); r.status != http.StatusCreated {
		t.Errorf("after a 402, the account's one request a minute is still free: %d %s", r.status, r.body)
	}
}

// TestBatch_AccountRPM: a batch is one request in its account's rpm,
// however many lines it has; past the rpm a new batch is 429 with
// Retry-After and writes nothing, and a re-send is still answered.
func TestBatch_AccountRPM(t *testing.T) {
	t.Parallel()
	e := budgetEnv(t)
	e.mustAccount("acme", nil, 2)
	line := func(id string) string {
		return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/jobs","body":{"prompt":"p","account":"acme"}}`, id) + "\n"
	}
	batch := func(key, body string) reply {
		return e.do(http.MethodPost, "/v1/batches", map[string]string{"Idempotency-Key": key, "Content-Type": "application/jsonl"}, []byte(body))
	}
	three := line("a") + line("b") + line("c")
	for _, k := range []string{"b1", "b1"} { // the re-send is not counted
		if r := batch(k, three); r.status != http.StatusCreated && r.status != http.StatusOK {
			t.Fatalf("batch %s under the rpm: %d %s", k, r.status, r.body)
		}
	}
	if r := e.post("j1", `{"prompt":"p","account":"acme"}`); r.status != http.StatusCreated {
		t.Fatalf("a job after one batch of three lines, rpm 2: %d %s; want 201 (a batch is one request)", r.status, r.body)
	}
	before := e.contents()
	r := batch("b2", line("d"))
	assertError(t, r, http.StatusTooManyRequests, inkwell.ETOOMANY)
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
		t.Errorf("Retry-After %q, want 1-60 seconds", r.header.Get("Retry-After"))
	}
	e.assertUnchanged(before)
	if r := batch("b1", three); r.status != http.StatusOK {
		t.Errorf("batch re-send past the rpm: %d %s; want 200", r.status, r.body)
	}
	e.assertUnchanged(before)
	assertError(t, e.post("j2", `{"prompt":"p","account":"acme"}`), http.StatusTooManyRequests, inkwell.ETOOMANY)
	e.assertUnchanged(before)
}
