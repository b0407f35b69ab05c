package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/jobwait"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Edge cases of the OpenAI-compatible surface (POST /v1/files, the
// OpenAI form of /v1/batches, POST /v1/chat/completions) that no other
// test covers: odd line endings, metadata at its limits, re-sent and
// concurrent creates, multipart uploads, the virtual batch files. Real
// servers on loopback, real SQLite files (and PostgreSQL where
// INKWELL_TEST_POSTGRES_URL is set).

// send is one request from a goroutine other than the test's: its error
// is returned, not fatal.
func send(srv *httptest.Server, method, path string, header map[string]string, body string) (reply, error) {
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, err
}

// sendAtOnce sends the same request n times at once and returns each
// reply and error, in no particular order of arrival.
func sendAtOnce(n int, srv *httptest.Server, method, path string, header map[string]string, body string) ([]reply, []error) {
	replies, errs := make([]reply, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { replies[i], errs[i] = send(srv, method, path, header, body) })
	}
	wg.Wait()
	return replies, errs
}

// countRows is the number of rows of each table named.
func countRows(t *testing.T, st *store.Store, tables ...string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, tbl := range tables {
		var n int
		if err := st.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM `+tbl).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[tbl] = n
	}
	return out
}

// TestOpenAIBatch_LineEndingsKeepRequestsAndLineNumbers: a file with CRLF
// line endings, blank and white-space lines, and a last line without its
// newline is read as its requests: the upload counts them, the create
// makes one job per request in line order, and a bad line is named by the
// number an editor shows (blank lines counted, CRLF one line each).
func TestOpenAIBatch_LineEndingsKeepRequestsAndLineNumbers(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		crlf := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
		content := crlf(chatLine("a", "1")+"\n"+chatLine("b", "2")) + " \t\r\n" + strings.TrimSuffix(chatLine("c", "3"), "\n")
		f := e.upload("", "batch", "crlf.jsonl", content).file(t)
		if f.Bytes != int64(len(content)) {
			t.Errorf("file %+v; want %d bytes", f, len(content))
		}
		if stored, err := st.File(t.Context(), f.ID); err != nil || stored.Lines != 3 {
			t.Errorf("stored %+v, %v; want 3 lines", stored, err)
		}
		if r := e.do(http.MethodGet, "/v1/files/"+f.ID+"/content", nil, ""); string(r.body) != content {
			t.Errorf("content %q; want the bytes uploaded, CRs kept", r.body)
		}
		b := e.createBatch("", createBody(f.ID, "")).openAIBatch(t)
		if b.RequestCounts.Total != 3 {
			t.Fatalf("batch %+v; want 3 lines", b)
		}
		var n int64
		fmt.Sscanf(b.ID, "batch_%d", &n)
		for range 3 {
			completeNext(t, st)
		}
		lines := outputLines(t, e.do(http.MethodGet, fmt.Sprintf("/v1/files/file-batch_%d-output/content", n), nil, ""))
		if len(lines) != 3 || lines[0].CustomID != "a" || lines[2].CustomID != "c" {
			t.Errorf("output lines %+v; want a, b, c", lines)
		}

		bad := crlf(chatLine("a", "1")+"\n") + `{"custom_id":"b","method":"POST","url":"/v1/chat/completions"}` + "\r\n"
		g := e.upload("", "batch", "bad.jsonl", bad).file(t)
		before := e.snapshot()
		if got := assertError(t, e.createBatch("", createBody(g.ID, "")), http.StatusBadRequest, inkwell.EINVALID); !strings.Contains(got.Message, "line 3: body is required") {
			t.Errorf("bad third line of a CRLF file: %q; want it named line 3", got.Message)
		}
		e.assertUnchanged("a CRLF file with a bad line", before)
	})
}

// TestOpenAIBatch_MetadataLimitsAreInclusive: batch metadata at its limits
// (16 keys, a key of 64 bytes, a value of 512) is kept and answered back;
// one past any limit, a value that is not a string, or metadata that is
// not an object is 400 naming metadata, nothing written.
func TestOpenAIBatch_MetadataLimitsAreInclusive(t *testing.T) {
	t.Parallel()
	e := oaEnv(t, storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{}), api.Config{})
	f := e.upload("", "batch", "in.jsonl", chatLine("a", "x")).file(t)
	keys := func(n int) string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("k%02d", i)] = "v"
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	atLimit := map[string]string{
		"16 keys":           keys(16),
		"a 64-byte key":     `{"` + strings.Repeat("k", 64) + `":"v"}`,
		"a 512-byte value":  `{"k":"` + strings.Repeat("v", 512) + `"}`,
		"an empty object":   `{}`,
		"a multibyte value": `{"k":"` + strings.Repeat("é", 256) + `"}`, // 512 bytes
	}
	i := 0
	for name, meta := range atLimit {
		i++
		b := e.createBatch(fmt.Sprintf("meta-%d", i), createBody(f.ID, meta)).openAIBatch(t)
		if compact(b.Metadata) != compact(json.RawMessage(meta)) {
			t.Errorf("%s: metadata answered %s, want %s", name, b.Metadata, meta)
		}
		if again := e.do(http.MethodGet, "/v1/batches/"+b.ID, nil, "").openAIBatch(t); compact(again.Metadata) != compact(b.Metadata) {
			t.Errorf("%s: GET answers metadata %s, create %s", name, again.Metadata, b.Metadata)
		}
	}
	before := e.snapshot()
	for name, meta := range map[string]string{
		"17 keys":           keys(17),
		"a 65-byte key":     `{"` + strings.Repeat("k", 65) + `":"v"}`,
		"a 513-byte value":  `{"k":"` + strings.Repeat("v", 513) + `"}`,
		"a multibyte value": `{"k":"` + strings.Repeat("é", 257) + `"}`,
		"a number value":    `{"k":1}`,
		"an object value":   `{"k":{"a":"b"}}`,
		"an array":          `["k","v"]`,
		"a string":          `"k=v"`,
	} {
		got := assertError(t, e.createBatch("refused", createBody(f.ID, meta)), http.StatusBadRequest, inkwell.EINVALID)
		if !strings.Contains(got.Message, "metadata") {
			t.Errorf("%s: %q does not name metadata", name, got.Message)
		}
	}
	e.assertUnchanged("metadata past its limits", before)
}

// TestOpenAIBatch_ConcurrentCreatesOfOneFileAreOneBatch: an SDK that
// re-sends a create whose answer it lost, while the first is still being
// stored, gets the same batch: creates of one file without a key, at once,
// make one batch and one job per line; with one Idempotency-Key, the same.
func TestOpenAIBatch_ConcurrentCreatesOfOneFileAreOneBatch(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		var content strings.Builder
		for i := range 40 {
			content.WriteString(chatLine(fmt.Sprint("line-", i), "x"))
		}
		for _, key := range []string{"", "sdk-retry-1"} {
			f := e.upload("", "batch", "in.jsonl", content.String()).file(t)
			h := map[string]string{"Content-Type": "application/json"}
			if key != "" {
				h["Idempotency-Key"] = key
			}
			replies, errs := sendAtOnce(6, e.srv, http.MethodPost, "/v1/batches", h, createBody(f.ID, `{"run":"1"}`))
			ids := map[string]bool{}
			for i, r := range replies {
				if errs[i] != nil {
					t.Fatalf("key %q: %v", key, errs[i])
				}
				if r.status == http.StatusServiceUnavailable { // busy: the same request again is safe
					continue
				}
				ids[r.openAIBatch(t).ID] = true
			}
			if len(ids) != 1 {
				t.Errorf("key %q: concurrent creates answered batches %v; want one", key, ids)
			}
		}
		if got := countRows(t, st, "batches", "jobs"); got["batches"] != 2 || got["jobs"] != 80 {
			t.Errorf("rows %v; want 2 batches (one per file) of 40 jobs", got)
		}
	})
}

// TestOpenAIBatch_ResentCreatePastLimitsAnswersTheBatch: a re-sent create
// (an SDK's retry of a create whose answer was lost) is answered with the
// batch already made even when a new batch would be refused now: the
// budget spent by the batch itself (402), the account's rpm (429), the
// queue full with its own lines (--max-queued, 429). Refusing the re-send
// would leave the client retrying a batch that exists without ever
// learning its id.
func TestOpenAIBatch_ResentCreatePastLimitsAnswersTheBatch(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		budget := int64(2_000)
		if _, err := st.CreateAccount(t.Context(), store.Account{Name: "acme", BudgetMicros: &budget, RPM: 1}); err != nil {
			t.Fatal(err)
		}
		e := oaEnv(t, st, api.Config{MaxQueued: 2, WorstCase: func(inkwell.Work, inkwell.Model) int64 { return 1_000 }})
		line := func(id string) string {
			return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi"}],"account":"acme"}}`, id) + "\n"
		}
		f := e.upload("", "batch", "two.jsonl", line("a")+line("b")).file(t)
		b := e.createBatch("", createBody(f.ID, "")).openAIBatch(t)
		g := e.upload("", "batch", "one.jsonl", line("c")).file(t)
		r := e.createBatch("", createBody(g.ID, ""))
		if r.status < 400 {
			t.Fatalf("a new batch past the budget, rpm and queue: %d %s; want a refusal", r.status, r.body)
		}
		before := e.snapshot()
		again := e.createBatch("", createBody(f.ID, ""))
		if again.status != http.StatusOK {
			t.Errorf("re-sent create: %d %s; want 200 with %s", again.status, compact(again.body), b.ID)
		} else if got := again.openAIBatch(t); got.ID != b.ID {
			t.Errorf("re-sent create answered %s, want %s", got.ID, b.ID)
		}
		e.assertUnchanged("a re-sent create past the limits", before)
	})
}

// TestChatCompletions_ConcurrentResendIsOneJob: the same chat request
// with the same Idempotency-Key, sent several times at once (an SDK's
// retry racing its first try), is one job; every answer names it in
// Inkwell-Job-Id. The same key with another body, sent after them, is
// 422 and writes nothing.
func TestChatCompletions_ConcurrentResendIsOneJob(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{SyncWait: 50 * time.Millisecond})
		h := map[string]string{"Content-Type": "application/json", "Idempotency-Key": "chat-race"}
		replies, errs := sendAtOnce(6, e.srv, http.MethodPost, "/v1/chat/completions", h, syncBody)
		jobs := map[string]bool{}
		for i, r := range replies {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if r.status == http.StatusServiceUnavailable {
				continue
			}
			if r.status != http.StatusGatewayTimeout {
				t.Errorf("answer %d: %d %s; want 504 still_queued (no lane runs here)", i, r.status, r.body)
			}
			jobs[r.header.Get("Inkwell-Job-Id")] = true
		}
		if len(jobs) != 1 || jobs[""] {
			t.Errorf("Inkwell-Job-Id of the answers: %v; want one job", jobs)
		}
		if got := countRows(t, st, "jobs"); got["jobs"] != 1 {
			t.Errorf("%d jobs stored, want 1", got["jobs"])
		}
		before := e.snapshot()
		other := strings.Replace(syncBody, "ink", "paper", 1)
		r := e.do(http.MethodPost, "/v1/chat/completions", h, other)
		assertError(t, r, http.StatusUnprocessableEntity, inkwell.EKEYREUSED)
		e.assertUnchanged("the key re-sent with another body", before)
	})
}

// TestChatCompletions_RefusalsWriteNothingAndSayWhy: every refusal of
// POST /v1/chat/completions, with or without a key, writes nothing and
// answers the {"error": {code, message}} form naming what is wrong.
func TestChatCompletions_RefusalsWriteNothingAndSayWhy(t *testing.T) {
	t.Parallel()
	e := oaEnv(t, storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{}), api.Config{SyncWait: 50 * time.Millisecond})
	before := e.snapshot()
	msgs := `"messages":[{"role":"user","content":"x"}]`
	for _, tc := range []struct {
		name, key, ct, body string
		status              int
		code, says          string
	}{
		{"stream", "", "application/json", `{` + msgs + `,"stream":true}`, 400, inkwell.EINVALID, "stream"},
		{"n 2", "k1", "application/json", `{` + msgs + `,"n":2}`, 400, inkwell.EINVALID, "n must be 1"},
		{"no messages", "", "application/json", `{"messages":[]}`, 400, inkwell.EINVALID, "messages"},
		{"bad role", "k2", "application/json", `{"messages":[{"role":"robot","content":"x"}]}`, 400, inkwell.EINVALID, "role"},
		{"temperature", "", "application/json", `{` + msgs + `,"temperature":2.5}`, 400, inkwell.EINVALID, "temperature"},
		{"array", "", "application/json", `[{` + msgs + `}]`, 400, inkwell.EINVALID, "array"},
		{"twice", "", "application/json", `{` + msgs + `,"Messages":[]}`, 400, inkwell.EINVALID, "twice"},
		{"form", "", "application/x-www-form-urlencoded", `{` + msgs + `}`, 415, inkwell.EMEDIATYPE, "application/json"},
		{"key with a space", "a b", "application/json", `{` + msgs + `}`, 400, inkwell.EINVALID, "Idempotency-Key"},
		{"metadata 17 keys", "", "application/json", `{` + msgs + `,"metadata":{"1":"","2":"","3":"","4":"","5":"","6":"","7":"","8":"","9":"","10":"","11":"","12":"","13":"","14":"","15":"","16":"","17":""}}`, 400, inkwell.EINVALID, "metadata"},
	} {
		h := map[string]string{"Content-Type": tc.ct}
		if tc.key != "" {
			h["Idempotency-Key"] = tc.key
		}
		got := assertError(t, e.do(http.MethodPost, "/v1/chat/completions", h, tc.body), tc.status, tc.code)
		if !strings.Contains(got.Message, tc.says) {
			t.Errorf("%s: %q does not say %q", tc.name, got.Message, tc.says)
		}
	}
	e.assertUnchanged("refused chat completions", before)
}

// TestFiles_MultipartEdgesAreReadOrRefusedWritingNothing: the multipart
// edge cases of POST /v1/files. An empty file is kept (an upload is only
// counted) and refused at create as having no lines; two file parts, a
// control character in the file's name, and purpose after the file but
// wrong are 400; purpose sent after the file is read as well as before it;
// a non-JSONL file is kept and its first bad line named at create. Every
// refusal writes nothing.
func TestFiles_MultipartEdgesAreReadOrRefusedWritingNothing(t *testing.T) {
	t.Parallel()
	e := oaEnv(t, storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{}), api.Config{})
	empty := e.upload("", "batch", "empty.jsonl", "").file(t)
	if empty.Bytes != 0 || empty.Purpose != "batch" {
		t.Errorf("empty file %+v", empty)
	}
	text := e.upload("", "batch", "notes.txt", chatLine("a", "x")+"just some text\n").file(t)
	before := e.snapshot()
	assertError(t, e.createBatch("", createBody(empty.ID, "")), http.StatusBadRequest, inkwell.EINVALID)
	if got := assertError(t, e.createBatch("", createBody(text.ID, "")), http.StatusBadRequest, inkwell.EINVALID); !strings.Contains(got.Message, "line 2") {
		t.Errorf("a text line: %q, want line 2 named", got.Message)
	}

	form := func(parts ...[3]string) (string, string) { // name, filename, content
		var b bytes.Buffer
		for _, p := range parts {
			fmt.Fprintf(&b, "--XyZ\r\nContent-Disposition: form-data; name=%q", p[0])
			if p[1] != "" {
				b.WriteString(`; filename="` + p[1] + `"`)
			}
			fmt.Fprintf(&b, "\r\n\r\n%s\r\n", p[2])
		}
		b.WriteString("--XyZ--\r\n")
		return b.String(), "multipart/form-data; boundary=XyZ"
	}
	file := [3]string{"file", "in.jsonl", strings.TrimSuffix(chatLine("a", "x"), "\n")}
	for _, tc := range []struct {
		name  string
		parts [][3]string
		says  string
	}{
		{"two files", [][3]string{{"purpose", "", "batch"}, file, file}, `two "file" parts`},
		{"wrong purpose after the file", [][3]string{file, {"purpose", "", "fine-tune"}}, "purpose"},
		{"control character in the name", [][3]string{{"purpose", "", "batch"}, {"file", "in\x01.jsonl", "{}"}}, "name"},
		{"purpose with a space", [][3]string{{"purpose", "", "batch "}, file}, "purpose"},
		{"no purpose", [][3]string{file}, "purpose is required"},
		{"expires_after without seconds", [][3]string{{"purpose", "", "batch"}, file, {"expires_after[anchor]", "", "created_at"}}, "needs both anchor and seconds"},
		{"expires_after of another anchor", [][3]string{{"purpose", "", "batch"}, file, {"expires_after[anchor]", "", "now"}, {"expires_after[seconds]", "", "3600"}}, "must be created_at"},
		{"expires_after under an hour", [][3]string{{"purpose", "", "batch"}, file, {"expires_after[anchor]", "", "created_at"}, {"expires_after[seconds]", "", "3599"}}, "from 3600"},
		{"expires_after over 30 days", [][3]string{{"purpose", "", "batch"}, file, {"expires_after[anchor]", "", "created_at"}, {"expires_after[seconds]", "", "2592001"}}, "to 2592000"},
		{"expires_after not a number", [][3]string{{"purpose", "", "batch"}, file, {"expires_after[anchor]", "", "created_at"}, {"expires_after[seconds]", "", "1e4"}}, "whole number"},
	} {
		body, ct := form(tc.parts...)
		got := assertError(t, e.do(http.MethodPost, "/v1/files", map[string]string{"Content-Type": ct}, body), http.StatusBadRequest, inkwell.EINVALID)
		if !strings.Contains(got.Message, tc.says) {
			t.Errorf("%s: %q does not say %q", tc.name, got.Message, tc.says)
		}
	}
	e.assertUnchanged("refused uploads and creates", before)

	body, ct := form(file, [3]string{"purpose", "", "batch"}, [3]string{"expires_after[anchor]", "", "created_at"},
		[3]string{"expires_after[seconds]", "", "7200"}, [3]string{"expires_after[note]", "", "read and not used"})
	r := e.do(http.MethodPost, "/v1/files", map[string]string{"Content-Type": ct}, body)
	if f := r.file(t); f.Filename != "in.jsonl" || f.Bytes != int64(len(file[2])) || f.ExpiresAt == nil || *f.ExpiresAt != f.CreatedAt+7200 {
		t.Errorf("purpose after the file, expires_after 7200 s: %+v; want expires_at created_at+7200", f)
	}
}

// TestFiles_VirtualBatchFilesExistOnceTheyHaveALine: the virtual output
// and error files exist only once the batch has a line for them; a batch
// id with a sign, a zero or not a number is not a file. A batch created
// from JSONL has the same virtual files.
func TestFiles_VirtualBatchFilesExistOnceTheyHaveALine(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		b := e.postBatch("jsonl-1", batchLine("a", `{"prompt":"p"}`)+"\n"+batchLine("b", `{"prompt":"q"}`)+"\n").batch(t)
		out, errs := fmt.Sprintf("file-batch_%d-output", b.ID), fmt.Sprintf("file-batch_%d-errors", b.ID)
		for _, id := range []string{out, errs} {
			assertError(t, e.do(http.MethodGet, "/v1/files/"+id, nil, ""), http.StatusNotFound, inkwell.ENOTFOUND)
			assertError(t, e.do(http.MethodGet, "/v1/files/"+id+"/content", nil, ""), http.StatusNotFound, inkwell.ENOTFOUND)
		}
		completeNext(t, st)
		c := e.do(http.MethodPost, fmt.Sprintf("/v1/batches/batch_%d/cancel", b.ID), nil, "").openAIBatch(t)
		if c.Status != "cancelled" || c.RequestCounts != (api.BatchRequestCounts{Total: 2, Completed: 1, Failed: 1}) ||
			c.OutputFileID == nil || *c.OutputFileID != out || c.ErrorFileID == nil || *c.ErrorFileID != errs || c.InputFileID != "" {
			t.Errorf("cancelled JSONL batch %+v", c)
		}
		for id, purpose := range map[string]string{out: "batch_output", errs: "batch_output"} {
			f := e.do(http.MethodGet, "/v1/files/"+id, nil, "").file(t)
			content := e.do(http.MethodGet, "/v1/files/"+id+"/content", nil, "")
			if f.Purpose != purpose || f.Bytes != int64(len(content.body)) || content.header.Get("Content-Type") != "application/jsonl" {
				t.Errorf("%s: %+v, content %d bytes %q", id, f, len(content.body), content.header.Get("Content-Type"))
			}
		}
		for _, id := range []string{
			fmt.Sprintf("file-batch_+%d-output", b.ID), "file-batch_0-output", "file-batch_-1-errors", "file-batch_x-errors",
			fmt.Sprintf("file-batch_%d-input", b.ID), fmt.Sprintf("file-batch_%d", b.ID), "file-batch_99999999999999999999-output",
		} {
			assertError(t, e.do(http.MethodGet, "/v1/files/"+id, nil, ""), http.StatusNotFound, inkwell.ENOTFOUND)
		}
		before := e.snapshot()
		if again := e.do(http.MethodPost, fmt.Sprintf("/v1/batches/%d/cancel", b.ID), nil, "").openAIBatch(t); again.Status != "cancelled" || *again.CancelledAt != *c.CancelledAt {
			t.Errorf("cancel re-sent by the whole number: %+v", again)
		}
		e.assertUnchanged("a cancel re-sent by the whole number", before)
	})
}

// TestChatCompletions_ClientGoneThenResentAnswersTheOneJob: a client of POST
// /v1/chat/completions that hangs up while it waits leaves its job queued
// (stored, not cancelled, nothing else written); the same request re-sent
// under the same key waits on that job and answers its completion: one
// job, one result. The same key with another body is then 422, nothing
// written.
func TestChatCompletions_ClientGoneThenResentAnswersTheOneJob(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	hub := jobwait.New()
	e := oaEnv(t, st, api.Config{Waits: hub, SyncWait: 30 * time.Second})
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"a haiku"}],"max_tokens":20}`
	h := map[string]string{"Content-Type": "application/json", "Idempotency-Key": "client-gone"}

	// The client hangs up once its job is stored and it waits for the
	// answer (a fixed deadline raced the accept on a loaded machine).
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	for k, v := range h {
		req.Header.Set(k, v)
	}
	answered := make(chan int, 1)
	go func() {
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	storetest.WaitFor(t, 10*time.Second, "the first request's job stored, its client waiting", func() bool {
		return countRows(t, st, "jobs")["jobs"] == 1 && len(hub.IDs()) == 1
	})
	cancel()
	if status := <-answered; status != 0 {
		t.Fatalf("the first request was answered (%d) before the client hung up; want it still waiting", status)
	}
	storetest.WaitFor(t, 10*time.Second, "the hung-up wait gone", func() bool { return len(hub.IDs()) == 0 })
	if n := countRows(t, st, "jobs")["jobs"]; n != 1 {
		t.Fatalf("%d jobs after the client hung up, want its one job stored", n)
	}
	var status string
	if err := st.DB().QueryRowContext(t.Context(), `SELECT status FROM jobs`).Scan(&status); err != nil || status != inkwell.StatusQueued {
		t.Fatalf("job status %q (%v), want queued", status, err)
	}

	done := make(chan reply, 1)
	go func() { r, _ := send(e.srv, http.MethodPost, "/v1/chat/completions", h, body); done <- r }()
	storetest.WaitFor(t, 10*time.Second, "the re-send waiting on the job", func() bool { return len(hub.IDs()) == 1 })
	hub.Wake(completeNext(t, st)) // as the lane wakes it after the commit
	r := <-done
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "Ink dries slowly") {
		t.Errorf("re-send under the same key: %d %s, want 200 with the job's completion", r.status, r.body)
	}
	if c := countRows(t, st, "jobs", "results"); c["jobs"] != 1 || c["results"] != 1 {
		t.Errorf("rows %v, want one job and one result", c)
	}
	before := e.snapshot()
	assertError(t, e.do(http.MethodPost, "/v1/chat/completions", h, strings.Replace(body, "a haiku", "a limerick", 1)), http.StatusUnprocessableEntity, inkwell.EKEYREUSED)
	e.assertUnchanged("the key re-sent with another body", before)
}
