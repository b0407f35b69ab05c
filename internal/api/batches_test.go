package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// POST /v1/batches, GET /v1/batches/{id} and /output (docs/batches.md), on
// both dialects, over a real store and a real server on loopback.

// batchLine is one line of the OpenAI batch input form for POST /v1/jobs.
func batchLine(customID, body string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/jobs","body":%s}`, customID, body)
}

// batchBody is n lines, custom_ids line-1…line-n.
func batchBody(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(batchLine(fmt.Sprintf("line-%d", i), fmt.Sprintf(`{"prompt":"poem %d","max_words":5}`, i)))
		b.WriteByte('\n')
	}
	return b.String()
}

func (e *cancelEnv) postBatch(key, body string) reply {
	e.t.Helper()
	return e.do(http.MethodPost, "/v1/batches", map[string]string{"Idempotency-Key": key, "Content-Type": "application/jsonl"}, body)
}

func (r reply) batch(t *testing.T) api.BatchResponse {
	t.Helper()
	var b api.BatchResponse
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("status %d body %q is not a batch: %v", r.status, r.body, err)
	}
	return b
}

// outputLines reads a JSONL output strictly: each line has exactly the
// four fields of the OpenAI form.
func outputLines(t *testing.T, r reply) []api.BatchOutputLine {
	t.Helper()
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/jsonl" {
		t.Fatalf("output: %d %q %s, want 200 application/jsonl", r.status, r.header.Get("Content-Type"), r.body)
	}
	var out []api.BatchOutputLine
	for _, l := range strings.Split(strings.TrimSuffix(string(r.body), "\n"), "\n") {
		if l == "" {
			continue
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &raw); err != nil || len(raw) != 4 {
			t.Fatalf("output line %s: want exactly id, custom_id, response, error (%v)", l, err)
		}
		var o api.BatchOutputLine
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			t.Fatalf("output line %s: %v", l, err)
		}
		out = append(out, o)
	}
	return out
}

func TestBatch_AcceptResendShowOutput(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := newCancelEnv(t, st)
		body := batchBody(3)
		r := e.postBatch("batch-1", body)
		if r.status != http.StatusCreated {
			t.Fatalf("POST /v1/batches: %d %s, want 201", r.status, r.body)
		}
		b := r.batch(t)
		want := map[string]int64{"queued": 3, "running": 0, "failed": 0, "done": 0}
		if b.ID < 1 || b.Lines != 3 || b.IdempotencyKey != "batch-1" || b.Account != inkwell.DefaultAccount || b.Ended ||
			!cmp.Equal(b.Counts, want) || b.OutputURL != fmt.Sprintf("/v1/batches/%d/output", b.ID) || b.CreatedAt.IsZero() {
			t.Errorf("201 body = %+v, want 3 queued lines of account default under key batch-1", b)
		}

		before := e.snapshot()
		again := e.postBatch("batch-1", strings.ReplaceAll(body, `"max_words":5}`, `"max_words":5,"account":"default"}`))
		if again.status != http.StatusOK || again.batch(t).ID != b.ID {
			t.Errorf("re-send (defaults spelled out): %d %s, want 200 with batch %d", again.status, again.body, b.ID)
		}
		assertError(t, e.postBatch("batch-1", batchBody(2)), http.StatusUnprocessableEntity, inkwell.EKEYREUSED)
		e.assertUnchanged("a re-sent batch", before)

		// The jobs are ordinary jobs: one done, one cancelled, one still queued.
		l := lockLane(t, st, "test")
		c := claim(t, st, l)
		if err := complete(t, st, c); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Cancel(t.Context(), c.Job.ID+1, "test"); err != nil {
			t.Fatal(err)
		}
		show := e.do(http.MethodGet, fmt.Sprintf("/v1/batches/%d", b.ID), nil, "").batch(t)
		if want := map[string]int64{"queued": 1, "running": 0, "failed": 1, "done": 1}; !cmp.Equal(show.Counts, want) || show.Ended {
			t.Errorf("GET batch counts = %v ended %v, want %v, not ended", show.Counts, show.Ended, want)
		}

		out := outputLines(t, e.do(http.MethodGet, b.OutputURL, nil, ""))
		if len(out) != 1 {
			t.Fatalf("output has %d lines, want 1 (the done job; the failed one is in /errors)", len(out))
		}
		done := out[0]
		var answer struct {
			Object  string `json:"object"`
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if done.Response != nil {
			_ = json.Unmarshal(done.Response.Body, &answer)
		}
		if done.CustomID != "line-1" || done.ID != fmt.Sprintf("batch_req_%d", c.Job.ID) || done.Error != nil || done.Response == nil ||
			done.Response.StatusCode != 200 || done.Response.RequestID != fmt.Sprintf("req-%d", c.Job.ID) ||
			answer.Object != "chat.completion" || len(answer.Choices) != 1 || answer.Choices[0].Message.Content != "the text" {
			t.Errorf("done line = %+v (body %s), want line-1 with response 200, its provider request id and a chat.completion of its text", done, done.Response.Body)
		}
		errs := outputLines(t, e.do(http.MethodGet, fmt.Sprintf("/v1/batches/%d/errors", b.ID), nil, ""))
		if len(errs) != 1 {
			t.Fatalf("errors has %d lines, want 1 (the failed job)", len(errs))
		}
		failed := errs[0]
		if failed.CustomID != "line-2" || failed.Response != nil || failed.Error == nil || failed.Error.Code != string(inkwell.ClassCancelled) || failed.Error.Message == "" {
			t.Errorf("failed line = %+v, want line-2 with error code cancelled and no response", failed)
		}
	})
}

// TestBatch_BadInputWritesNothing: every bad line refuses the whole batch,
// naming the line and the field, and writes nothing.
func TestBatch_BadInputWritesNothing(t *testing.T) {
	t.Parallel()
	good := batchLine("a", `{"prompt":"p"}`)
	cases := []struct {
		name, key, ctype, body string
		status                 int
		code                   string
		words                  []string
	}{
		{"no key", "", "application/jsonl", good, 400, inkwell.EINVALID, []string{"Idempotency-Key"}},
		{"json content type", "k", "application/json", good, 400, inkwell.EINVALID, []string{"application/jsonl"}},
		{"empty", "k", "application/jsonl", "\n\n", 400, inkwell.EINVALID, []string{"no lines"}},
		{"not json", "k", "application/jsonl", good + "\nnope\n", 400, inkwell.EINVALID, []string{"line 2"}},
		{"array", "k", "application/x-ndjson", "[" + good + "]", 400, inkwell.EINVALID, []string{"line 1", "JSON object"}},
		{"two objects", "k", "application/jsonl", good + good, 400, inkwell.EINVALID, []string{"line 1", "exactly one"}},
		{"unknown field", "k", "application/jsonl", `{"custom_id":"a","method":"POST","url":"/v1/jobs","body":{"prompt":"p"},"x":1}`, 400, inkwell.EINVALID, []string{"line 1", `"x"`}},
		{"no custom_id", "k", "application/jsonl", good + "\n" + `{"method":"POST","url":"/v1/jobs","body":{"prompt":"p"}}`, 400, inkwell.EINVALID, []string{"line 2", "custom_id"}},
		{"long custom_id", "k", "application/jsonl", batchLine(strings.Repeat("c", api.MaxCustomIDBytes+1), `{"prompt":"p"}`), 400, inkwell.EINVALID, []string{"line 1", "custom_id"}},
		{"control in custom_id", "k", "application/jsonl", batchLine("a\nb", `{"prompt":"p"}`), 400, inkwell.EINVALID, []string{"line 1", "custom_id", "control"}},
		{"duplicate custom_id", "k", "application/jsonl", good + "\n" + batchLine("b", `{"prompt":"q"}`) + "\n\n" + good, 400, inkwell.EINVALID, []string{"line 4", "repeats line 1"}},
		{"method", "k", "application/jsonl", `{"custom_id":"a","method":"GET","url":"/v1/jobs","body":{"prompt":"p"}}`, 400, inkwell.EINVALID, []string{"line 1", "method"}},
		{"url", "k", "application/jsonl", `{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"prompt":"p"}}`, 400, inkwell.EINVALID, []string{"line 1", "url"}},
		{"no body", "k", "application/jsonl", `{"custom_id":"a","method":"POST","url":"/v1/jobs"}`, 400, inkwell.EINVALID, []string{"line 1", "body"}},
		{"blank prompt", "k", "application/jsonl", good + "\n" + batchLine("b", `{"prompt":" "}`), 400, inkwell.EINVALID, []string{"line 2", "body", "prompt"}},
		{"max_words", "k", "application/jsonl", batchLine("b", `{"prompt":"p","max_words":-1}`), 400, inkwell.EINVALID, []string{"line 1", "max_words"}},
		{"body field", "k", "application/jsonl", batchLine("b", `{"prompt":"p","temperature":1}`), 400, inkwell.EINVALID, []string{"line 1", "body", "temperature"}},
		{"bad account", "k", "application/jsonl", batchLine("b", `{"prompt":"p","account":"a b"}`), 400, inkwell.EINVALID, []string{"line 1", "account"}},
		{"two accounts", "k", "application/jsonl", good + "\n" + batchLine("b", `{"prompt":"p","account":"acme"}`), 400, inkwell.EINVALID, []string{"line 2", "account", "one account"}},
		{"not utf-8", "k", "application/jsonl", good + "\n" + batchLine("b", "{\"prompt\":\"\xff\"}"), 400, inkwell.EINVALID, []string{"line 2", "UTF-8"}},
		{"custom_id twice", "k", "application/jsonl", good + "\n" + `{"custom_id":"b","method":"POST","url":"/v1/jobs","body":{"prompt":"p"},"Custom_ID":"c"}`, 400, inkwell.EINVALID, []string{"line 2", "appears twice"}},
		{"body account twice", "k", "application/jsonl", batchLine("b", `{"prompt":"p","account":"default","account":"acme"}`), 400, inkwell.EINVALID, []string{"line 1", "body", `"account" appears twice`}},
		{"long line", "k", "application/jsonl", good + "\n" + batchLine("b", `{"prompt":"`+strings.Repeat("p", api.MaxBatchLineBytes)+`"}`), 413, inkwell.ETOOLARGE, []string{"line 2"}},
	}
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := newCancelEnv(t, st)
		if r := e.postBatch("stored", batchBody(2)); r.status != http.StatusCreated {
			t.Fatalf("a good batch first: %d %s", r.status, r.body)
		}
		before := e.snapshot()
		for _, tc := range cases {
			h := map[string]string{"Content-Type": tc.ctype}
			if tc.key != "" {
				h["Idempotency-Key"] = tc.key
			}
			r := e.do(http.MethodPost, "/v1/batches", h, tc.body)
			got := assertError(t, r, tc.status, tc.code)
			for _, w := range tc.words {
				if !strings.Contains(got.Message, w) {
					t.Errorf("%s: message %q does not say %q", tc.name, got.Message, w)
				}
			}
		}
		e.assertUnchanged("refused batches", before)
	})
}

// TestBatch_Admission: --max-queued applies to a batch as a whole.
func TestBatch_Admission(t *testing.T) {
	t.Parallel()
	e := setupBatchEnv(t, 3)
	if r := e.postBatch("first", batchBody(2)); r.status != http.StatusCreated {
		t.Fatalf("2 lines under a limit of 3: %d %s", r.status, r.body)
	}
	before := e.snapshot()
	r := e.postBatch("second", batchBody(2))
	assertError(t, r, http.StatusTooManyRequests, inkwell.ETOOMANY)
	if r.header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
	if r := e.postBatch("first", batchBody(2)); r.status != http.StatusOK {
		t.Errorf("re-send past the limit: %d %s, want 200", r.status, r.body)
	}
	e.assertUnchanged("a batch the queue has no room for", before)
	if r := e.postBatch("third", batchBody(1)); r.status != http.StatusCreated {
		t.Errorf("1 line that fits: %d %s, want 201", r.status, r.body)
	}
}

func setupBatchEnv(t *testing.T, maxQueued int) *cancelEnv {
	t.Helper()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	e := &cancelEnv{t: t, st: st}
	a := api.New(api.Config{Store: st, Logger: storetest.TestLogger(t), MaxQueued: maxQueued})
	a.SetReady(true)
	e.srv = httptest.NewServer(a)
	t.Cleanup(e.srv.Close)
	return e
}

// TestBatch_ConcurrentResend: the same batch sent twice at once is one
// batch: one 201, one 200, one set of jobs.
func TestBatch_ConcurrentResend(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := newCancelEnv(t, st)
		body := batchBody(50)
		var wg sync.WaitGroup
		replies := make([]reply, 4)
		for i := range replies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				replies[i] = e.postBatch("same", body)
			}()
		}
		wg.Wait()
		created := 0
		for _, r := range replies {
			switch r.status {
			case http.StatusCreated:
				created++
			case http.StatusOK:
			default:
				t.Errorf("concurrent send: %d %s", r.status, r.body)
			}
		}
		var jobs, batches int
		if err := st.DB().QueryRow(`SELECT (SELECT COUNT(*) FROM jobs), (SELECT COUNT(*) FROM batches)`).Scan(&jobs, &batches); err != nil {
			t.Fatal(err)
		}
		if created != 1 || jobs != 50 || batches != 1 {
			t.Errorf("%d created, %d jobs, %d batches; want 1, 50, 1", created, jobs, batches)
		}
	})
}

// TestBatch_AtTheLineLimit: exactly MaxBatchLines lines are accepted.
func TestBatch_AtTheLineLimit(t *testing.T) {
	t.Parallel()
	e := setupBatchEnv(t, 0)
	r := e.postBatch("big", batchBody(api.MaxBatchLines))
	if r.status != http.StatusCreated || r.batch(t).Counts["queued"] != api.MaxBatchLines {
		t.Fatalf("%d lines: %d %.300s, want 201 with every line queued", api.MaxBatchLines, r.status, r.body)
	}
}

func (se *secEnv) submitBatch(token, key, body string, want int) api.BatchResponse {
	se.t.Helper()
	r := se.req(http.MethodPost, "/v1/batches", "Bearer "+token, map[string]string{"Idempotency-Key": key, "Content-Type": "application/jsonl"}, []byte(body))
	if r.status != want {
		se.t.Fatalf("POST /v1/batches %s = %d %s, want %d", key, r.status, r.body, want)
	}
	if want >= 400 {
		return api.BatchResponse{}
	}
	return r.batch(se.t)
}

// TestBatch_ClientScope: with tokens in force the token's account pays for
// every line and owns the batch; another account's client token cannot
// see it (404, as for no such batch); a line naming another account is
// 403 naming the line; the same batch key under two accounts is two
// batches.
func TestBatch_ClientScope(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	path := fmt.Sprintf("/v1/batches/%d", se.acmeBatch)
	if r := se.req(http.MethodGet, path, "Bearer "+se.acme, nil, nil); r.status != http.StatusOK || r.batch(t).Account != "acme" {
		t.Errorf("acme reads its batch: %d %s, want 200 of account acme", r.status, r.body)
	}
	for _, p := range []string{path, path + "/output"} {
		r := se.req(http.MethodGet, p, "Bearer "+se.globex, nil, nil)
		if e := assertError(t, r, http.StatusNotFound, inkwell.ENOTFOUND); !strings.Contains(e.Message, "not found") {
			t.Errorf("globex reads acme's %s: %q, want worded as no such batch", p, e.Message)
		}
		if r := se.req(http.MethodGet, p, "Bearer "+se.operator, nil, nil); r.status != http.StatusOK {
			t.Errorf("operator reads %s: %d %s, want 200", p, r.status, r.body)
		}
	}
	var accounts []string
	rows, err := se.st.DB().Query(`SELECT DISTINCT payload FROM jobs WHERE batch_id = ?`, se.acmeBatch)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		accounts = append(accounts, p)
	}
	rows.Close()
	for _, p := range accounts {
		if !strings.Contains(p, `"account":"acme"`) {
			t.Errorf("a job of acme's batch has payload %s, want account acme", p)
		}
	}

	before := se.snapshot()
	body := batchBody(1) + batchLine("other", `{"prompt":"p","account":"globex"}`) + "\n"
	r := se.req(http.MethodPost, "/v1/batches", "Bearer "+se.acme, map[string]string{"Idempotency-Key": "mixed", "Content-Type": "application/jsonl"}, []byte(body))
	if e := assertError(t, r, http.StatusForbidden, inkwell.EFORBIDDEN); !strings.HasPrefix(e.Message, "line 2: body:") {
		t.Errorf("line naming another account: %q, want it to name line 2", e.Message)
	}
	se.assertUnchanged(before)

	g := se.submitBatch(se.globex, "acme-batch", batchBody(2), http.StatusCreated)
	if g.ID == se.acmeBatch || g.Account != "globex" {
		t.Errorf("globex under acme's batch key: batch %d of %s, want a new batch of globex", g.ID, g.Account)
	}
}
