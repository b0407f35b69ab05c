package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// POST /v1/files, GET /v1/files/{id} and …/content (docs/batches.md) over
// a real store and a real server on loopback: an upload read back byte for
// byte, the limits (413, nothing written), and another account's file.

// oaEnv is a server for the OpenAI surface: cancelEnv's (OnCancelled
// recorded, snapshots on either dialect) with cfg's WorstCase and Auth.
func oaEnv(t *testing.T, st *store.Store, cfg api.Config) *cancelEnv {
	t.Helper()
	e := &cancelEnv{t: t, st: st}
	cfg.Store, cfg.Logger = st, storetest.TestLogger(t)
	cfg.OnCancelled = func(id int64) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.cancelled = append(e.cancelled, id)
	}
	a := api.New(cfg)
	a.SetReady(true)
	e.srv = httptest.NewServer(a)
	t.Cleanup(e.srv.Close)
	return e
}

// uploadForm is a multipart form as the OpenAI SDKs send one: the file
// part, then purpose (when not empty).
func uploadForm(t *testing.T, purpose, filename, content string) (body, contentType string) {
	t.Helper()
	fields := [][2]string{{"file", content}}
	if purpose != "" {
		fields = append(fields, [2]string{"purpose", purpose})
	}
	return multipartForm(t, filename, fields)
}

// multipartForm is a multipart form of fields in order: a field named
// "file" is a file part named filename, any other a plain field.
func multipartForm(t *testing.T, filename string, fields [][2]string) (body, contentType string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, f := range fields {
		if f[0] == "file" {
			fw, err := mw.CreateFormFile("file", filename)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.WriteString(fw, f[1])
			continue
		}
		if err := mw.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String(), mw.FormDataContentType()
}

// upload is POST /v1/files with token ("" for none).
func (e *cancelEnv) upload(token, purpose, filename, content string) reply {
	e.t.Helper()
	body, ct := uploadForm(e.t, purpose, filename, content)
	h := map[string]string{"Content-Type": ct}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return e.do(http.MethodPost, "/v1/files", h, body)
}

func (r reply) file(t *testing.T) api.FileObject {
	t.Helper()
	var f api.FileObject
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if r.status != http.StatusOK || dec.Decode(&f) != nil {
		t.Fatalf("status %d body %s, want 200 with a file object", r.status, r.body)
	}
	return f
}

// chatLine is a batch input line of a chat request.
func chatLine(customID, content string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":%q}],"max_tokens":50}}`, customID, content) + "\n"
}

func TestFiles_UploadShowContent(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		content := chatLine("a", "a haiku") + "\n" + chatLine("b", "a limerick") + "  \n" + chatLine("c", "an ode")
		f := e.upload("", "batch", "requests.jsonl", content).file(t)
		if !strings.HasPrefix(f.ID, "file-") || f.Object != "file" || f.Bytes != int64(len(content)) || f.Filename != "requests.jsonl" ||
			f.Purpose != "batch" || f.Status != "processed" || f.CreatedAt == 0 {
			t.Errorf("file object %+v; want file-…, %d bytes, requests.jsonl, batch, processed", f, len(content))
		}
		if got := e.do(http.MethodGet, "/v1/files/"+f.ID, nil, "").file(t); got != f {
			t.Errorf("GET file = %+v, want %+v", got, f)
		}
		if stored, err := st.File(t.Context(), f.ID); err != nil || stored.Lines != 3 || stored.Account != inkwell.DefaultAccount {
			t.Errorf("stored %+v, %v; want 3 lines (blank ones not counted) of account default", stored, err)
		}
		r := e.do(http.MethodGet, "/v1/files/"+f.ID+"/content", nil, "")
		if r.status != http.StatusOK || string(r.body) != content || r.header.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("content: %d %q %q; want 200, the bytes uploaded", r.status, r.header.Get("Content-Type"), r.body)
		}
		for _, p := range []string{"/v1/files/file-0", "/v1/files/file-0/content", "/v1/files/file-batch_1-output", "/v1/files/file-batch_x-output/content"} {
			assertError(t, e.do(http.MethodGet, p, nil, ""), http.StatusNotFound, inkwell.ENOTFOUND)
		}
	})
}

// TestFiles_Refused: every refused upload writes nothing and says what to
// send instead.
func TestFiles_Refused(t *testing.T) {
	t.Parallel()
	e := oaEnv(t, storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{}), api.Config{})
	form, ct := uploadForm(t, "batch", "x.jsonl", "{}\n")
	noFile := "--b\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--b--\r\n"
	before := e.snapshot()
	for _, tc := range []struct {
		name, ct, body string
		status         int
		code, says     string
	}{
		{"another purpose", "", "fine-tune", 400, inkwell.EINVALID, "only purpose=batch"},
		{"no purpose", "", "", 400, inkwell.EINVALID, "purpose is required"},
		{"no file", "multipart/form-data; boundary=b", noFile, 400, inkwell.EINVALID, `no "file" part`},
		{"JSON", "application/json", `{"purpose":"batch"}`, 415, inkwell.EMEDIATYPE, "multipart/form-data"},
		{"cut short", ct, form[:len(form)-10], 400, inkwell.EINVALID, "multipart"},
	} {
		body, contentType := tc.body, tc.ct
		if contentType == "" {
			body, contentType = uploadForm(t, tc.body, "x.jsonl", "{}\n")
		}
		got := assertError(t, e.do(http.MethodPost, "/v1/files", map[string]string{"Content-Type": contentType}, body), tc.status, tc.code)
		if !strings.Contains(got.Message, tc.says) {
			t.Errorf("%s: %q does not say %q", tc.name, got.Message, tc.says)
		}
	}
	e.assertUnchanged("refused uploads", before)
}

// TestFiles_LineLimit: a file of MaxBatchLines lines is kept; one more
// line is 413, nothing written.
func TestFiles_LineLimit(t *testing.T) {
	t.Parallel()
	e := oaEnv(t, storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{}), api.Config{})
	lines := strings.Repeat("{}\n", api.MaxBatchLines)
	if f := e.upload("", "batch", "max.jsonl", lines).file(t); f.Bytes != int64(len(lines)) {
		t.Errorf("file of %d lines: %+v", api.MaxBatchLines, f)
	}
	before := e.snapshot()
	for _, over := range []string{lines + "{}", lines + "{}\n"} { // the last line with or without its newline
		got := assertError(t, e.upload("", "batch", "over.jsonl", over), http.StatusRequestEntityTooLarge, inkwell.ETOOLARGE)
		if !strings.Contains(got.Message, fmt.Sprint(api.MaxBatchLines)) || !strings.Contains(got.Message, "nothing was stored") {
			t.Errorf("over the line limit: %q; want it to name the limit and say nothing was stored", got.Message)
		}
	}
	e.assertUnchanged("files over the line limit", before)
}

// TestFiles_SizeLimit: a file over MaxBatchBytes is 413 and nothing
// written, whether its length is announced (refused before it is read) or
// streamed without one (refused at the byte past the limit).
func TestFiles_SizeLimit(t *testing.T) {
	t.Parallel()
	e := oaEnv(t, storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{}), api.Config{})
	before := e.snapshot()
	head, ct := uploadForm(t, "", "big.jsonl", "")
	head = strings.TrimSuffix(head, "\r\n--"+strings.TrimPrefix(ct, "multipart/form-data; boundary=")+"--\r\n")
	tail := "\r\n--" + strings.TrimPrefix(ct, "multipart/form-data; boundary=") + "--\r\n"
	for _, announced := range []bool{true, false} {
		big := io.LimitReader(repeatReader('x'), api.MaxBatchBytes+1) // one line, one byte too many
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+"/v1/files",
			io.MultiReader(strings.NewReader(head), big, strings.NewReader(tail)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ct)
		req.ContentLength = -1 // streamed, chunked
		if announced {
			req.ContentLength = int64(len(head)+len(tail)) + api.MaxBatchBytes + 1
		}
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatalf("announced %v: %v", announced, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := assertError(t, reply{status: resp.StatusCode, header: resp.Header, body: b}, http.StatusRequestEntityTooLarge, inkwell.ETOOLARGE)
		if !strings.Contains(got.Message, fmt.Sprint(api.MaxBatchBytes)) {
			t.Errorf("announced %v: %q does not name the limit", announced, got.Message)
		}
	}
	e.assertUnchanged("files over the size limit", before)
}

// repeatReader reads as b, endlessly.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// TestFiles_OtherAccount: with tokens in force a file belongs to its
// uploader's account: another account's client token reads it as no such
// file (404, the same words), cannot make a batch of it, and the operator
// reads it.
func TestFiles_OtherAccount(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	e := &cancelEnv{t: t, st: se.st, srv: se.srv}
	f := e.upload(se.acme, "batch", "acme.jsonl", chatLine("a", "x")).file(t)
	if stored, err := se.st.File(t.Context(), f.ID); err != nil || stored.Account != "acme" {
		t.Fatalf("stored %+v, %v; want acme's", stored, err)
	}
	before := se.snapshot()
	for _, p := range []string{"/v1/files/" + f.ID, "/v1/files/" + f.ID + "/content"} {
		other := se.req(http.MethodGet, p, "Bearer "+se.globex, nil, nil)
		none := se.req(http.MethodGet, strings.Replace(p, f.ID, "file-000000000000000000000000", 1), "Bearer "+se.globex, nil, nil)
		if got, want := assertError(t, other, http.StatusNotFound, inkwell.ENOTFOUND).Message, strings.Replace(assertError(t, none, http.StatusNotFound, inkwell.ENOTFOUND).Message, "file-000000000000000000000000", f.ID, 1); got != want {
			t.Errorf("another account's file is worded %q, a missing one %q", got, want)
		}
		if r := se.req(http.MethodGet, p, "Bearer "+se.operator, nil, nil); r.status != http.StatusOK {
			t.Errorf("operator GET %s: %d %s", p, r.status, r.body)
		}
	}
	create := fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/chat/completions","completion_window":"24h"}`, f.ID)
	r := se.req(http.MethodPost, "/v1/batches", "Bearer "+se.globex, map[string]string{"Content-Type": "application/json"}, []byte(create))
	assertError(t, r, http.StatusNotFound, inkwell.ENOTFOUND)
	se.assertUnchanged(before)
}
