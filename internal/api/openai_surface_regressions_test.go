package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Bugs of the OpenAI-compatible surface (the Files API, the OpenAI form
// of /v1/batches, the chat form), each test failing on the code before
// its fix. Real servers on loopback, real SQLite files, and PostgreSQL
// where INKWELL_TEST_POSTGRES_URL is set.

// TestFiles_MalformedIDIsNotFound: a file id that is no id Inkwell makes
// (a NUL byte, invalid UTF-8) is 404 not_found, as an unknown id is, on
// both dialects: GET /v1/files/{id}, …/content, and a batch created from
// it. PostgreSQL refuses such a string in a query (SQLSTATE 22021), which
// used to answer 500.
func TestFiles_MalformedIDIsNotFound(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		f := e.upload("", "batch", "in.jsonl", chatLine("a", "x")).file(t)
		before := e.snapshot()
		for _, escaped := range []string{"file-%00", "file-%FF", f.ID + "%00", "%00", "file-%C3%28", strings.Replace(f.ID, "file-", "file-%00", 1)[:29]} {
			for _, path := range []string{"/v1/files/" + escaped, "/v1/files/" + escaped + "/content"} {
				got := assertError(t, e.do(http.MethodGet, path, nil, ""), http.StatusNotFound, inkwell.ENOTFOUND)
				if !strings.Contains(got.Message, "not found") {
					t.Errorf("GET %s: %q; want it said the file is not found", path, got.Message)
				}
			}
		}
		for _, id := range []string{`file-\u0000`, `file-\u0000` + strings.TrimPrefix(f.ID, "file-"), f.ID + `\u0000`, `\u0000`} {
			body := fmt.Sprintf(`{"input_file_id":"%s","endpoint":"/v1/chat/completions","completion_window":"24h"}`, id)
			got := assertError(t, e.createBatch("", body), http.StatusNotFound, inkwell.ENOTFOUND)
			if !strings.Contains(got.Message, "not found") {
				t.Errorf("create from %s: %q; want it said the file is not found", id, got.Message)
			}
			assertError(t, e.createBatch("malformed-file", body), http.StatusNotFound, inkwell.ENOTFOUND)
		}
		e.assertUnchanged("malformed file ids", before)
	})
}

// TestBatch_ChatCompletionsLineRefusesTheShortForm: a batch line naming url
// /v1/chat/completions must carry a chat request; Inkwell's short form
// there is refused, naming the line, in both forms of create (an uploaded
// file, JSONL in the body), nothing written. The short form stays valid
// on a /v1/jobs line.
func TestBatch_ChatCompletionsLineRefusesTheShortForm(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		shortLine := func(id, body string) string {
			return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":%s}`, id, body) + "\n"
		}
		bodies := []string{`{"prompt":"a haiku","max_words":20}`, `{"prompt":"a haiku"}`, `{"max_words":20}`, `{}`}
		before := e.snapshot()
		for i, body := range bodies {
			content := chatLine("a", "x") + shortLine("b", body)
			f := e.upload("", "batch", "short.jsonl", content).file(t)
			before = e.snapshot()
			got := assertError(t, e.createBatch("", createBody(f.ID, "")), http.StatusBadRequest, inkwell.EINVALID)
			if !strings.Contains(got.Message, "line 2") || !strings.Contains(got.Message, "chat request") {
				t.Errorf("file with body %s: %q; want line 2 named and a chat request asked for", body, got.Message)
			}
			got = assertError(t, e.postBatch(fmt.Sprint("short-", i), content), http.StatusBadRequest, inkwell.EINVALID)
			if !strings.Contains(got.Message, "line 2") || !strings.Contains(got.Message, "chat request") {
				t.Errorf("JSONL with body %s: %q; want line 2 named and a chat request asked for", body, got.Message)
			}
			e.assertUnchanged("a chat line with a short-form body "+body, before)
		}
		if got := countRows(t, st, "batches", "jobs"); got["batches"] != 0 || got["jobs"] != 0 {
			t.Errorf("rows %v; want none", got)
		}
		// The short form on a /v1/jobs line is still a job request.
		b := e.postBatch("jobs-short", batchLine("a", `{"prompt":"a haiku","max_words":20}`)+"\n").batch(t)
		if b.Lines != 1 {
			t.Errorf("a /v1/jobs line in the short form: %+v; want a batch of 1 line", b)
		}
	})
}

// TestOpenAIBatch_CreateWithoutContentTypeIsJSON: POST /v1/batches
// without Content-Type is JSON (docs/api.md: a request without
// Content-Type is read as JSON), so the OpenAI create body works and a
// bad one is refused for what it is, not for a missing Idempotency-Key;
// a body of another type is refused for its Content-Type first.
func TestOpenAIBatch_CreateWithoutContentTypeIsJSON(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		f := e.upload("", "batch", "in.jsonl", chatLine("a", "x")+chatLine("b", "y")).file(t)
		before := e.snapshot()
		got := assertError(t, e.do(http.MethodPost, "/v1/batches", nil, `{"endpoint":"/v1/chat/completions","completion_window":"24h"}`), http.StatusBadRequest, inkwell.EINVALID)
		if !strings.Contains(got.Message, "input_file_id is required") || strings.Contains(got.Message, "Idempotency-Key") {
			t.Errorf("a create without input_file_id and without Content-Type: %q; want input_file_id named", got.Message)
		}
		got = assertError(t, e.do(http.MethodPost, "/v1/batches", map[string]string{"Content-Type": "text/plain"}, createBody(f.ID, "")), http.StatusBadRequest, inkwell.EINVALID)
		if !strings.Contains(got.Message, `"text/plain"`) || strings.Contains(got.Message, "Idempotency-Key") {
			t.Errorf("a create labelled text/plain, without a key: %q; want the Content-Type named", got.Message)
		}
		e.assertUnchanged("a refused create without Content-Type", before)
		b := e.do(http.MethodPost, "/v1/batches", nil, createBody(f.ID, "")).openAIBatch(t)
		if b.InputFileID != f.ID || b.RequestCounts.Total != 2 {
			t.Errorf("create without Content-Type: %+v; want a batch of %s's 2 lines", b, f.ID)
		}
		if again := e.createBatch("", createBody(f.ID, "")).openAIBatch(t); again.ID != b.ID {
			t.Errorf("the same create with Content-Type: %s; want the same batch %s", again.ID, b.ID)
		}
	})
}

// TestMetadata_ValueThatIsNotAStringIsRefused: OpenAI's metadata values are
// strings; a null value is refused, naming metadata, not stored as "".
// In the chat form of a job too. Nothing written.
func TestMetadata_ValueThatIsNotAStringIsRefused(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		f := e.upload("", "batch", "in.jsonl", chatLine("a", "x")).file(t)
		before := e.snapshot()
		for _, meta := range []string{`{"k":null}`, `{"a":"b","k":null}`, `{"k":true}`} {
			got := assertError(t, e.createBatch("", createBody(f.ID, meta)), http.StatusBadRequest, inkwell.EINVALID)
			if !strings.Contains(got.Message, "metadata") || !strings.Contains(got.Message, "string") {
				t.Errorf("metadata %s: %q; want it said metadata values must be strings", meta, got.Message)
			}
			job := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}],"metadata":` + meta + `}`
			h := map[string]string{"Content-Type": "application/json", "Idempotency-Key": "meta-null"}
			got = assertError(t, e.do(http.MethodPost, "/v1/jobs", h, job), http.StatusBadRequest, inkwell.EINVALID)
			if !strings.Contains(got.Message, "metadata") || !strings.Contains(got.Message, "string") {
				t.Errorf("job metadata %s: %q; want it said metadata values must be strings", meta, got.Message)
			}
			line := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":` + job + "}\n"
			got = assertError(t, e.postBatch("meta-null", line), http.StatusBadRequest, inkwell.EINVALID)
			if !strings.Contains(got.Message, "line 1") || !strings.Contains(got.Message, "metadata") {
				t.Errorf("batch line metadata %s: %q; want line 1 and metadata named", meta, got.Message)
			}
		}
		e.assertUnchanged("metadata with a value that is not a string", before)
		if b := e.createBatch("", createBody(f.ID, `{"k":""}`)).openAIBatch(t); compact(b.Metadata) != `{"k":""}` {
			t.Errorf("metadata with an empty string: %s; want it kept", b.Metadata)
		}
	})
}

// TestBatch_NotAnObjectSaysWhatWasExpected: a body, a batch line or a
// line's body that is valid JSON but not an object is refused in words (it
// must be a JSON object), not as "field  must be struct". Nothing written.
func TestBatch_NotAnObjectSaysWhatWasExpected(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		before := e.snapshot()
		for _, v := range []string{`[]`, `"x"`, `3`, `true`, `[{"input_file_id":"file-0"}]`} {
			check := func(what string, r reply, status int, code string, says ...string) {
				t.Helper()
				got := assertError(t, r, status, code)
				if strings.Contains(got.Message, "struct") || !strings.Contains(got.Message, "JSON object") {
					t.Errorf("%s %s: %q; want it said a JSON object is needed", what, v, got.Message)
				}
				for _, s := range says {
					if !strings.Contains(got.Message, s) {
						t.Errorf("%s %s: %q does not say %q", what, v, got.Message, s)
					}
				}
			}
			check("create body", e.createBatch("", v), http.StatusBadRequest, inkwell.EINVALID)
			check("JSONL line", e.postBatch("not-object", v+"\n"), http.StatusBadRequest, inkwell.EINVALID, "line 1")
			f := e.upload("", "batch", "in.jsonl", chatLine("a", "x")+v+"\n").file(t)
			before = e.snapshot()
			check("file line", e.createBatch("", createBody(f.ID, "")), http.StatusBadRequest, inkwell.EINVALID, "line 2")
			for _, url := range []string{"/v1/chat/completions", "/v1/jobs"} {
				line := fmt.Sprintf(`{"custom_id":"a","method":"POST","url":%q,"body":%s}`, url, v) + "\n"
				check("line body ("+url+")", e.postBatch("not-object-body", line), http.StatusBadRequest, inkwell.EINVALID, "line 1")
			}
			e.assertUnchanged("a value that is not an object", before)
		}
		if got := countRows(t, st, "batches", "jobs"); got["batches"] != 0 || got["jobs"] != 0 {
			t.Errorf("rows %v; want none", got)
		}
	})
}

// TestBatch_LeadingByteOrderMarkIsSkipped: a batch input file that starts
// with a UTF-8 byte order mark (Windows tools write one) is read without
// it: the upload counts its lines, the create makes one job per line,
// and the first line's custom_id has no BOM in it. The JSONL form reads
// it too.
func TestBatch_LeadingByteOrderMarkIsSkipped(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		const bom = "\xEF\xBB\xBF"
		content := bom + chatLine("first", "1") + chatLine("second", "2") + chatLine("third", "3")
		f := e.upload("", "batch", "windows.jsonl", content).file(t)
		if stored, err := st.File(t.Context(), f.ID); err != nil || stored.Lines != 3 || stored.Bytes != int64(len(content)) {
			t.Errorf("stored %+v, %v; want 3 lines, %d bytes", stored, err, len(content))
		}
		b := e.createBatch("", createBody(f.ID, "")).openAIBatch(t)
		if b.RequestCounts.Total != 3 {
			t.Fatalf("batch %+v; want 3 lines", b)
		}
		var n int64
		fmt.Sscanf(b.ID, "batch_%d", &n)
		completeNext(t, st)
		lines := outputLines(t, e.do(http.MethodGet, fmt.Sprintf("/v1/files/file-batch_%d-output/content", n), nil, ""))
		if len(lines) != 1 || lines[0].CustomID != "first" {
			t.Errorf("output lines %+v; want the first line's, custom_id \"first\"", lines)
		}
		// A BOM and then a blank line: the upload and the create agree.
		g := e.upload("", "batch", "blank.jsonl", bom+"\r\n"+chatLine("a", "1")).file(t)
		if stored, err := st.File(t.Context(), g.ID); err != nil || stored.Lines != 1 {
			t.Errorf("stored %+v, %v; want 1 line", stored, err)
		}
		if c := e.createBatch("", createBody(g.ID, "")).openAIBatch(t); c.RequestCounts.Total != 1 {
			t.Errorf("batch %+v; want 1 line", c)
		}
		j := e.postBatch("bom-jsonl", bom+batchLine("a", `{"prompt":"p"}`)+"\n"+batchLine("b", `{"prompt":"q"}`)+"\n").batch(t)
		if j.Lines != 2 {
			t.Errorf("JSONL batch with a BOM: %+v; want 2 lines", j)
		}
		// Only a leading BOM is white space: one inside a line is refused.
		h := e.upload("", "batch", "inner.jsonl", chatLine("a", "1")+bom+chatLine("b", "2")).file(t)
		before := e.snapshot()
		if got := assertError(t, e.createBatch("", createBody(h.ID, "")), http.StatusBadRequest, inkwell.EINVALID); !strings.Contains(got.Message, "line 2") {
			t.Errorf("a BOM starting line 2: %q; want line 2 named", got.Message)
		}
		e.assertUnchanged("a BOM inside the file", before)
	})
}

// TestOpenAIBatch_ResentCreateWithAnotherEndpointIsKeyReused: a create
// re-sent under the same key (the Idempotency-Key, or without one the
// file) with another endpoint is 422 key_reused, as a re-send with other
// metadata is and as POST /v1/jobs answers a key reused with another body;
// nothing written. The same endpoint mismatch under a new key stays 400,
// naming the line.
func TestOpenAIBatch_ResentCreateWithAnotherEndpointIsKeyReused(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		f := e.upload("", "batch", "in.jsonl", chatLine("a", "x")).file(t)
		other := strings.Replace(createBody(f.ID, ""), `"endpoint":"/v1/chat/completions"`, `"endpoint":"/v1/jobs"`, 1)
		for _, key := range []string{"", "nightly-1"} {
			b := e.createBatch(key, createBody(f.ID, "")).openAIBatch(t)
			before := e.snapshot()
			got := assertError(t, e.createBatch(key, other), http.StatusUnprocessableEntity, inkwell.EKEYREUSED)
			if !strings.Contains(got.Message, "different batch") {
				t.Errorf("key %q: %q; want it said the key is of another batch", key, got.Message)
			}
			e.assertUnchanged("a re-send with another endpoint", before)
			if again := e.createBatch(key, createBody(f.ID, "")).openAIBatch(t); again.ID != b.ID {
				t.Errorf("key %q: the first create re-sent answered %s, want %s", key, again.ID, b.ID)
			}
		}
		before := e.snapshot()
		got := assertError(t, e.createBatch("nightly-2", other), http.StatusBadRequest, inkwell.EINVALID)
		if !strings.Contains(got.Message, `line 1: url must be "/v1/jobs"`) {
			t.Errorf("a new key with lines of another url: %q; want line 1's url named", got.Message)
		}
		e.assertUnchanged("a new create with lines of another url", before)
	})
}
