package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// The OpenAI form of batches (docs/batches.md) over a real store and a
// real server on loopback: create from an uploaded file, the batch
// object through a batch's life, its virtual output and error files, a
// re-sent create, refusals that write nothing, the list, and cancel.

// createBatch is POST /v1/batches in the OpenAI form, with key when set.
func (e *cancelEnv) createBatch(key, body string) reply {
	e.t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return e.do(http.MethodPost, "/v1/batches", h, body)
}

func createBody(fileID, metadata string) string {
	if metadata == "" {
		metadata = "null"
	}
	return fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/chat/completions","completion_window":"24h","metadata":%s}`, fileID, metadata)
}

func (r reply) openAIBatch(t *testing.T) api.OpenAIBatch {
	t.Helper()
	var b api.OpenAIBatch
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if r.status != http.StatusOK || dec.Decode(&b) != nil {
		t.Fatalf("status %d body %s, want 200 with a batch object", r.status, r.body)
	}
	return b
}

// batchJobs is the ids of batch b's jobs, in line order.
func batchJobs(t *testing.T, st *store.Store, batchID int64) []int64 {
	t.Helper()
	rows, err := st.DB().QueryContext(t.Context(), rebindTest(st, `SELECT id FROM jobs WHERE batch_id = $1 ORDER BY id`), batchID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// compact is JSON without its white space.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func rebindTest(st *store.Store, q string) string {
	if st.Dialect() == "postgres" {
		return q
	}
	return strings.ReplaceAll(q, "$", "?")
}

const answer = `{"id":"chatcmpl-9","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Ink dries slowly"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`

// completeNext claims the next job and completes it with answer.
func completeNext(t *testing.T, st *store.Store) int64 {
	t.Helper()
	c := storetest.ClaimAs(t, st, "lane-a")
	if err := st.CompleteIfRunning(t.Context(), store.CompleteParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Text: "Ink dries slowly",
		Account: inkwell.DefaultAccount, AmountMicros: 3, ProviderRequestID: "chatcmpl-9", Model: "gpt-4o-mini",
		Response: []byte(answer), FinishReason: "stop", PromptTokens: 9, CompletionTokens: 4, Usage: true}); err != nil {
		t.Fatal(err)
	}
	return c.Job.ID
}

func TestOpenAIBatch_CreateRunOutput(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		f := e.upload("", "batch", "requests.jsonl", chatLine("a", "a haiku")+chatLine("b", "a limerick")+chatLine("c", "an ode")).file(t)
		b := e.createBatch("", createBody(f.ID, `{"team":"ink"}`)).openAIBatch(t)
		if !strings.HasPrefix(b.ID, "batch_") || b.Object != "batch" || b.Endpoint != "/v1/chat/completions" || b.InputFileID != f.ID ||
			b.CompletionWindow != "24h" || b.Status != "in_progress" || b.Errors != nil || b.OutputFileID != nil || b.ErrorFileID != nil ||
			b.CreatedAt == 0 || b.InProgressAt == nil || *b.InProgressAt != b.CreatedAt || b.CompletedAt != nil || b.CancelledAt != nil ||
			b.RequestCounts != (api.BatchRequestCounts{Total: 3}) || compact(b.Metadata) != `{"team":"ink"}` {
			t.Errorf("new batch %+v; want in_progress, 3 lines, no output yet, the metadata", b)
		}
		var n int64
		fmt.Sscanf(b.ID, "batch_%d", &n)
		jobs := batchJobs(t, st, n)

		// A re-sent create without a key (an SDK's retry) is the same
		// batch; other metadata for the same file is refused.
		before := e.snapshot()
		if again := e.createBatch("", createBody(f.ID, `{"team":"ink"}`)).openAIBatch(t); again.ID != b.ID {
			t.Errorf("re-sent create: %s, want %s", again.ID, b.ID)
		}
		assertError(t, e.createBatch("", createBody(f.ID, `{"team":"quill"}`)), http.StatusUnprocessableEntity, inkwell.EKEYREUSED)
		e.assertUnchanged("a re-sent create", before)

		// One line done (its whole answer kept), one cancelled, one queued.
		if got := completeNext(t, st); got != jobs[0] {
			t.Fatalf("completed job %d, want %d", got, jobs[0])
		}
		if _, err := st.Cancel(t.Context(), jobs[1], "test"); err != nil {
			t.Fatal(err)
		}
		b = e.do(http.MethodGet, "/v1/batches/"+b.ID, nil, "").openAIBatch(t)
		out, errs := fmt.Sprintf("file-batch_%d-output", n), fmt.Sprintf("file-batch_%d-errors", n)
		if b.Status != "in_progress" || b.RequestCounts != (api.BatchRequestCounts{Total: 3, Completed: 1, Failed: 1}) ||
			b.OutputFileID == nil || *b.OutputFileID != out || b.ErrorFileID == nil || *b.ErrorFileID != errs {
			t.Errorf("batch %+v; want in_progress, 1 completed, 1 failed, and both files", b)
		}
		r := e.do(http.MethodGet, "/v1/files/"+out+"/content", nil, "")
		wantOut := fmt.Sprintf(`{"id":"batch_req_%d","custom_id":"a","response":{"status_code":200,"request_id":"chatcmpl-9","body":%s},"error":null}`, jobs[0], answer) + "\n"
		if r.status != http.StatusOK || string(r.body) != wantOut || r.header.Get("Content-Type") != "application/jsonl" {
			t.Errorf("output file: %d %s\n%s\nwant\n%s", r.status, r.header.Get("Content-Type"), r.body, wantOut)
		}
		if legacy := e.do(http.MethodGet, fmt.Sprintf("/v1/batches/%d/output", n), nil, ""); string(legacy.body) != wantOut {
			t.Errorf("/output: %s, want the output file", legacy.body)
		}
		if of := e.do(http.MethodGet, "/v1/files/"+out, nil, "").file(t); of.Bytes != int64(len(wantOut)) || of.Purpose != "batch_output" {
			t.Errorf("output file object %+v; want %d bytes, purpose batch_output", of, len(wantOut))
		}
		el := outputLines(t, e.do(http.MethodGet, "/v1/files/"+errs+"/content", nil, ""))
		if len(el) != 1 || el[0].CustomID != "b" || el[0].ID != fmt.Sprintf("batch_req_%d", jobs[1]) || el[0].Response != nil ||
			el[0].Error == nil || el[0].Error.Code != "cancelled" {
			t.Errorf("error file lines %+v; want b, cancelled", el)
		}

		completeNext(t, st)
		b = e.do(http.MethodGet, "/v1/batches/"+b.ID, nil, "").openAIBatch(t)
		if b.Status != "completed" || b.CompletedAt == nil || b.FinalizingAt == nil || *b.CompletedAt < b.CreatedAt || b.RequestCounts.Completed != 2 {
			t.Errorf("ended batch %+v; want completed with completed_at", b)
		}
		if old := e.do(http.MethodGet, fmt.Sprintf("/v1/batches/%d", n), nil, "").batch(t); old.ID != n || !old.Ended || old.Lines != 3 {
			t.Errorf("GET by the whole number: %+v, want Inkwell's batch answer, ended", old)
		}

		// A key of its own makes a second batch of the same file.
		if second := e.createBatch("run-2", createBody(f.ID, "")).openAIBatch(t); second.ID == b.ID || compact(second.Metadata) != "null" || second.Status != "in_progress" {
			t.Errorf("create with its own key: %+v, want a new batch without metadata", second)
		}
	})
}

// TestOpenAIBatch_RefusedWritesNothing: a bad create, a bad line of the
// file (named by its line number) or a file that is not there is refused
// and writes nothing.
func TestOpenAIBatch_RefusedWritesNothing(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		good := e.upload("", "batch", "good.jsonl", chatLine("a", "x")).file(t).ID
		bad := e.upload("", "batch", "bad.jsonl", chatLine("a", "x")+"\n"+strings.Replace(chatLine("c", "z"), `"messages"`, `"mesages"`, 1)).file(t).ID
		jobsURL := e.upload("", "batch", "jobs.jsonl", `{"custom_id":"j","method":"POST","url":"/v1/jobs","body":{"prompt":"p"}}`).file(t).ID
		twice := e.upload("", "batch", "twice.jsonl", chatLine("a", "x")+chatLine("a", "y")).file(t).ID
		empty := e.upload("", "batch", "empty.jsonl", "\n").file(t).ID
		before := e.snapshot()
		for _, tc := range []struct {
			name, body string
			status     int
			code, says string
		}{
			{"bad line", createBody(bad, ""), 400, inkwell.EINVALID, "line 3"},
			{"another url", createBody(jobsURL, ""), 400, inkwell.EINVALID, `line 1: url must be "/v1/chat/completions", the batch's endpoint`},
			{"custom_id twice", createBody(twice, ""), 400, inkwell.EINVALID, "line 2: custom_id"},
			{"no lines", createBody(empty, ""), 400, inkwell.EINVALID, "no lines"},
			{"no such file", createBody("file-000000000000000000000000", ""), 404, inkwell.ENOTFOUND, "not found"},
			{"no file named", `{"endpoint":"/v1/chat/completions","completion_window":"24h"}`, 400, inkwell.EINVALID, "input_file_id is required"},
			{"endpoint", strings.Replace(createBody(good, ""), "/v1/chat/completions", "/v1/embeddings", 1), 400, inkwell.EINVALID, "endpoint"},
			{"window", strings.Replace(createBody(good, ""), "24h", "48h", 1), 400, inkwell.EINVALID, "completion_window"},
			{"metadata", createBody(good, `{"n":1}`), 400, inkwell.EINVALID, "metadata"},
			{"unknown member", strings.Replace(createBody(good, ""), "{", `{"model":"x",`, 1), 400, inkwell.EINVALID, "application/jsonl"},
			{"output file as input", createBody("file-batch_1-output", ""), 404, inkwell.ENOTFOUND, "not found"},
		} {
			got := assertError(t, e.createBatch("", tc.body), tc.status, tc.code)
			if !strings.Contains(got.Message, tc.says) {
				t.Errorf("%s: %q does not say %q", tc.name, got.Message, tc.says)
			}
		}
		e.assertUnchanged("refused creates", before)
	})
}

// TestOpenAIBatch_OverBudget: a file whose lines' worst cases together
// pass the account's budget is refused whole, 402, nothing written.
func TestOpenAIBatch_OverBudget(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		budget := int64(2_500)
		if _, err := st.CreateAccount(t.Context(), store.Account{Name: "acme", BudgetMicros: &budget}); err != nil {
			t.Fatal(err)
		}
		e := oaEnv(t, st, api.Config{WorstCase: func(inkwell.Work, inkwell.Model) int64 { return 1_000 }})
		line := func(id string) string {
			return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi"}],"account":"acme"}}`, id) + "\n"
		}
		two := e.upload("", "batch", "two.jsonl", line("a")+line("b")).file(t).ID
		three := e.upload("", "batch", "three.jsonl", line("a")+line("b")+line("c")).file(t).ID
		before := e.snapshot()
		assertError(t, e.createBatch("", createBody(three, "")), http.StatusPaymentRequired, inkwell.EBUDGET)
		e.assertUnchanged("a batch over the budget", before)
		if b := e.createBatch("", createBody(two, "")).openAIBatch(t); b.RequestCounts.Total != 2 {
			t.Errorf("2 lines of 1000 under 2500: %+v", b)
		}
		if a, err := st.Account(t.Context(), "acme"); err != nil || a.ReservedMicros != 2_000 {
			t.Errorf("acme reserves %d, %v; want 2000", a.ReservedMicros, err)
		}
	})
}

// TestOpenAIBatch_List: newest first, limit a page, after the cursor;
// a client token lists its own account's batches only.
func TestOpenAIBatch_List(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto) // acme has one batch (JSONL) already
	e := &cancelEnv{t: t, st: se.st, srv: se.srv}
	auth := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	var ids []string
	for i := range 4 {
		tok := se.acme
		if i == 2 {
			tok = se.globex
		}
		f := e.upload(tok, "batch", "in.jsonl", chatLine("a", fmt.Sprint(i))).file(t)
		h := auth(tok)
		h["Content-Type"] = "application/json"
		ids = append(ids, e.do(http.MethodPost, "/v1/batches", h, createBody(f.ID, "")).openAIBatch(t).ID)
	}
	list := func(tok, query string) api.BatchList {
		t.Helper()
		r := e.do(http.MethodGet, "/v1/batches"+query, auth(tok), "")
		var l api.BatchList
		dec := json.NewDecoder(bytes.NewReader(r.body))
		dec.DisallowUnknownFields()
		if r.status != http.StatusOK || dec.Decode(&l) != nil || l.Object != "list" {
			t.Fatalf("GET /v1/batches%s: %d %s", query, r.status, r.body)
		}
		return l
	}
	var got []string
	query := "?limit=2"
	for range 3 {
		l := list(se.acme, query)
		for _, b := range l.Data {
			got = append(got, b.ID)
		}
		if len(l.Data) > 0 && (*l.FirstID != l.Data[0].ID || *l.LastID != l.Data[len(l.Data)-1].ID) {
			t.Errorf("page %s: first_id %s, last_id %s, data %v", query, *l.FirstID, *l.LastID, l.Data)
		}
		if !l.HasMore {
			break
		}
		query = "?limit=2&after=" + *l.LastID
	}
	want := []string{ids[3], ids[1], ids[0], fmt.Sprintf("batch_%d", se.acmeBatch)}
	if !slices.Equal(got, want) {
		t.Errorf("acme's pages: %v, want %v (newest first, none of globex's)", got, want)
	}
	if l := list(se.operator, ""); len(l.Data) != 5 || l.HasMore || l.Data[1].ID != ids[2] {
		t.Errorf("the operator lists %d batches (has_more %v), want all 5", len(l.Data), l.HasMore)
	}
	if l := list(se.globex, "?after="+ids[2]); len(l.Data) != 0 || l.FirstID != nil || l.LastID != nil || l.HasMore {
		t.Errorf("globex after its only batch: %+v, want an empty page with null ids", l)
	}
	for _, q := range []string{"?limit=0", "?limit=101", "?limit=x", "?after=7", "?after=batch_x"} {
		assertError(t, e.do(http.MethodGet, "/v1/batches"+q, auth(se.acme), ""), http.StatusBadRequest, inkwell.EINVALID)
	}
}

// TestOpenAIBatch_Cancel: the queued line ends at once, the running one's
// call is aborted (OnCancelled with its attempt), the done one stays; the
// batch is cancelled; a re-sent cancel answers the same; a batch that
// ended first is 409, nothing written; another account's is 404.
func TestOpenAIBatch_Cancel(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		f := e.upload("", "batch", "in.jsonl", chatLine("a", "1")+chatLine("b", "2")+chatLine("c", "3")).file(t)
		b := e.createBatch("", createBody(f.ID, "")).openAIBatch(t)
		completeNext(t, st)
		running := storetest.ClaimAs(t, st, "lane-a")
		c := e.do(http.MethodPost, "/v1/batches/"+b.ID+"/cancel", nil, "").openAIBatch(t)
		if c.Status != "cancelled" || c.CancellingAt == nil || c.CancelledAt == nil || c.CompletedAt != nil ||
			c.RequestCounts != (api.BatchRequestCounts{Total: 3, Completed: 1, Failed: 2}) || c.ErrorFileID == nil || c.OutputFileID == nil {
			t.Errorf("cancel answered %+v; want cancelled, 1 completed, 2 failed", c)
		}
		if got := e.hooked(); !slices.Equal(got, []int64{running.Attempt.ID}) {
			t.Errorf("OnCancelled %v, want the running attempt %d", got, running.Attempt.ID)
		}
		for _, el := range outputLines(t, e.do(http.MethodGet, "/v1/files/"+*c.ErrorFileID+"/content", nil, "")) {
			if el.Error == nil || el.Error.Code != "cancelled" {
				t.Errorf("error line %+v, want cancelled", el)
			}
		}
		before := e.snapshot()
		if again := e.do(http.MethodPost, "/v1/batches/"+b.ID+"/cancel", nil, "").openAIBatch(t); again.Status != "cancelled" || *again.CancelledAt != *c.CancelledAt {
			t.Errorf("re-sent cancel: %+v", again)
		}
		e.assertUnchanged("a re-sent cancel", before)

		g := e.upload("", "batch", "in.jsonl", chatLine("z", "4")).file(t)
		ended := e.createBatch("", createBody(g.ID, "")).openAIBatch(t)
		completeNext(t, st)
		before = e.snapshot()
		assertError(t, e.do(http.MethodPost, "/v1/batches/"+ended.ID+"/cancel", nil, ""), http.StatusConflict, inkwell.ECONFLICT)
		assertError(t, e.do(http.MethodPost, "/v1/batches/batch_999/cancel", nil, ""), http.StatusNotFound, inkwell.ENOTFOUND)
		assertError(t, e.do(http.MethodPost, "/v1/batches/batch_x/cancel", nil, ""), http.StatusBadRequest, inkwell.EINVALID)
		e.assertUnchanged("refused cancels", before)
	})
}

// TestOpenAIBatch_Cancelling: a batch whose cancel was asked while a job
// is still queued or running (a cancel cut short by a crash) reads as
// cancelling, and a re-sent cancel finishes it.
func TestOpenAIBatch_Cancelling(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	e := oaEnv(t, st, api.Config{})
	f := e.upload("", "batch", "in.jsonl", chatLine("a", "1")+chatLine("b", "2")).file(t)
	b := e.createBatch("", createBody(f.ID, "")).openAIBatch(t)
	if _, err := st.WriteDB().Exec(`UPDATE batches SET cancelling_at = '2026-01-01T00:00:00.000000Z'`); err != nil {
		t.Fatal(err)
	}
	if got := e.do(http.MethodGet, "/v1/batches/"+b.ID, nil, "").openAIBatch(t); got.Status != "cancelling" || got.CancellingAt == nil || got.CancelledAt != nil {
		t.Errorf("batch %+v, want cancelling", got)
	}
	if got := e.do(http.MethodPost, "/v1/batches/"+b.ID+"/cancel", nil, "").openAIBatch(t); got.Status != "cancelled" || got.RequestCounts.Failed != 2 {
		t.Errorf("cancel again: %+v, want cancelled, 2 failed", got)
	}
}

// TestOpenAIBatch_OtherAccount: a client's batch is its own: another
// account's token gets 404 on every batch route, writing nothing.
func TestOpenAIBatch_OtherAccount(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	id := fmt.Sprintf("batch_%d", se.acmeBatch)
	before := se.snapshot()
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/batches/" + id}, {"POST", "/v1/batches/" + id + "/cancel"}, {"GET", "/v1/batches/" + id + "/errors"},
		{"GET", fmt.Sprintf("/v1/files/file-batch_%d-output", se.acmeBatch)},
	} {
		assertError(t, se.req(tc.method, tc.path, "Bearer "+se.globex, nil, nil), http.StatusNotFound, inkwell.ENOTFOUND)
	}
	se.assertUnchanged(before)
	if r := se.req("POST", "/v1/batches/"+id+"/cancel", "Bearer "+se.acme, nil, nil); r.status != http.StatusOK {
		t.Errorf("acme cancels its own batch: %d %s", r.status, r.body)
	}
}
