package api_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// A batch body cut off or over its limit while it is read, and an
// upload's expires_after at its edges.

// cutBody is a request body read as net/http reads a chunked body that
// the client cut off mid-chunk: full reads, and then the bytes it still
// had together with io.ErrUnexpectedEOF in one Read (chunkedReader.Read
// returns n > 0 and the error at once). With cut = len(b) and err nil it
// is a plain full-read body (bytes.Reader).
type cutBody struct {
	b   []byte
	pos int
	cut int
	err error
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.pos >= c.cut {
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	if rest := c.cut - c.pos; len(p) >= rest && c.err != nil {
		n := copy(p, c.b[c.pos:c.cut])
		c.pos += n
		return n, c.err
	}
	n := copy(p, c.b[c.pos:c.cut])
	c.pos += n
	return n, nil
}

func (c *cutBody) Close() error { return nil }

// linesOfSizes is a JSONL batch body of chat lines of exactly these sizes
// (newline included): the newlines' places are what decide how
// bufio.Scanner reads it.
func linesOfSizes(t *testing.T, sizes []int) []byte {
	t.Helper()
	var b bytes.Buffer
	for i, n := range sizes {
		b.WriteString(sizedChatLine(t, fmt.Sprintf("c%06d", i), n))
	}
	return b.Bytes()
}

// postChunkedJSONL sends body as POST /v1/batches (JSONL) without a
// Content-Length (chunked), straight to the handler so that the reads are
// exactly the body's.
func postChunkedJSONL(t *testing.T, st *store.Store, body io.ReadCloser) *httptest.ResponseRecorder {
	t.Helper()
	a := api.New(api.Config{Store: st, Logger: storetest.TestLogger(t)})
	a.SetReady(true)
	req := httptest.NewRequest(http.MethodPost, "/v1/batches", nil)
	req.Body, req.ContentLength = body, -1
	req.Header.Set("Content-Type", "application/jsonl")
	req.Header.Set("Idempotency-Key", "cut-body")
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	return rec
}

// TestBatchJSONL_ClientCutChunkedBodyMakesNoBatch: a chunked JSONL body
// the client cut off (its last Read gives bytes and io.ErrUnexpectedEOF
// together, as net/http's chunked reader does) must not make a batch of
// the lines read so far. The lines are laid out so that the Read with the
// error goes through skipBOM's bufio.Reader "one read" path (the scanner
// asks for less than 4096 bytes): the bytes reach the scanner without the
// error, so sc.Err() is nil and only the reader's own record
// (firstReadError) says the body failed; without it parseBatchLines
// returned the first 6 lines as the whole batch (201).
func TestBatchJSONL_ClientCutChunkedBodyMakesNoBatch(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	sizes := []int{16000, 16000, 4000, 4216, 15384, 2000, 15000, 16000, 16000}
	body := linesOfSizes(t, sizes)
	rec := postChunkedJSONL(t, st, &cutBody{b: body, cut: 16000*4 + 9600, err: io.ErrUnexpectedEOF})
	n := countRows(t, st, "batches", "jobs")
	if rec.Code/100 == 2 || n["batches"] != 0 || n["jobs"] != 0 {
		t.Errorf("a body cut by the client after 73,600 of its %d bytes: %d %.200s, and %v rows; want a refusal (4xx) and no batch: its lines past the cut were never read",
			len(body), rec.Code, rec.Body.String(), n)
	}
}

// TestBatchJSONL_ChunkedBodyOverLimitIs413: a chunked JSONL body over
// MaxBatchBytes is 413 and makes no batch, however its lines fall. Here
// the read that crosses the limit is http.MaxBytesReader's (n > 0,
// *MaxBytesError), through the same one-read path as above: the batch of
// the 6555 lines before the limit is made, 201.
func TestBatchJSONL_ChunkedBodyOverLimitIs413(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a 100 MiB body")
	}
	const limit = api.MaxBatchBytes // 104,857,600 = 16000*6553 + 9600
	var sizes []int
	tot := 0
	for tot < limit-41600 {
		sizes = append(sizes, 16000)
		tot += 16000
	}
	sizes = append(sizes, 4000, 4216, 15384, 2000, 15000)
	tot += 4000 + 4216 + 15384 + 2000 + 15000
	for tot < limit+40000 {
		sizes = append(sizes, 16000)
		tot += 16000
	}
	body := linesOfSizes(t, sizes)
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	rec := postChunkedJSONL(t, st, &cutBody{b: body, cut: len(body)})
	n := countRows(t, st, "batches", "jobs")
	if rec.Code != http.StatusRequestEntityTooLarge || n["batches"] != 0 || n["jobs"] != 0 {
		t.Errorf("a chunked body of %d bytes (%d lines), over the %d limit: %d %.200s, and %v rows; want 413 and no batch",
			len(body), len(sizes), limit, rec.Code, strings.TrimSpace(rec.Body.String()), n)
	}
}

// TestFileUpload_ExpiresAfterIsReadWhole: expires_after[seconds] is read
// whole or refused. A value longer than the 65 bytes readPart reads
// (io.LimitReader(part, 65)) is cut there and the rest dropped unseen:
// 61 zeros, 3600 and "garbage" is taken as 3600 (200, expires_at set)
// where it is no whole number (400, nothing stored).
func TestFileUpload_ExpiresAfterIsReadWhole(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	e := oaEnv(t, st, api.Config{})
	line := chatLine("a", "x")
	for _, c := range []struct {
		name    string
		seconds string
	}{
		{"junk past 65 bytes", strings.Repeat("0", 61) + "3600" + "garbage"},
		{"a number past 65 bytes", strings.Repeat("0", 61) + "3600" + "0"},
	} {
		body, ct := multipartForm(t, "in.jsonl", [][2]string{{"purpose", "batch"}, {"expires_after[anchor]", "created_at"}, {"expires_after[seconds]", c.seconds}, {"file", line}})
		r := e.do(http.MethodPost, "/v1/files", map[string]string{"Content-Type": ct}, body)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: expires_after[seconds]=%q: %d %s; want 400, nothing stored", c.name, c.seconds, r.status, r.body)
		}
	}
	if n := countRows(t, st, "files"); n["files"] != 0 {
		t.Errorf("%d files stored by refused uploads", n["files"])
	}
}

// TestFileUpload_ExpiresAfterEdges: what held (each a 400 writing
// nothing, or read as OpenAI does): the fields after the file part, half
// an expires_after, bounds, signs and spaces, NUL.
func TestFileUpload_ExpiresAfterEdges(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	e := oaEnv(t, st, api.Config{})
	line := chatLine("a", "x")
	for _, c := range []struct {
		name   string
		fields [][2]string
		status int
	}{
		{"after the file", [][2]string{{"file", line}, {"purpose", "batch"}, {"expires_after[anchor]", "created_at"}, {"expires_after[seconds]", "3599"}}, 400},
		{"anchor alone", [][2]string{{"file", line}, {"purpose", "batch"}, {"expires_after[anchor]", "created_at"}}, 400},
		{"seconds alone", [][2]string{{"file", line}, {"purpose", "batch"}, {"expires_after[seconds]", "3600"}}, 400},
		{"other anchor", [][2]string{{"file", line}, {"purpose", "batch"}, {"expires_after[anchor]", "last_active_at"}, {"expires_after[seconds]", "3600"}}, 400},
		{"over 30 days", [][2]string{{"file", line}, {"purpose", "batch"}, {"expires_after[anchor]", "created_at"}, {"expires_after[seconds]", "2592001"}}, 400},
		{"space", [][2]string{{"file", line}, {"purpose", "batch"}, {"expires_after[anchor]", "created_at"}, {"expires_after[seconds]", " 3600"}}, 400},
		{"NUL", [][2]string{{"file", line}, {"purpose", "batch"}, {"expires_after[anchor]", "created_at\x00"}, {"expires_after[seconds]", "3600"}}, 400},
		{"empty", [][2]string{{"file", line}, {"purpose", "batch"}, {"expires_after[anchor]", "created_at"}, {"expires_after[seconds]", ""}}, 400},
	} {
		body, ct := multipartForm(t, "in.jsonl", c.fields)
		if r := e.do(http.MethodPost, "/v1/files", map[string]string{"Content-Type": ct}, body); r.status != c.status {
			t.Errorf("%s: %d %s; want %d", c.name, r.status, r.body, c.status)
		}
	}
	if n := countRows(t, st, "files"); n["files"] != 0 {
		t.Errorf("%d files stored by refused uploads", n["files"])
	}
	body, ct := multipartForm(t, "in.jsonl", [][2]string{{"file", line}, {"expires_after[seconds]", "2592000"}, {"expires_after[anchor]", "created_at"}, {"purpose", "batch"}})
	f := e.do(http.MethodPost, "/v1/files", map[string]string{"Content-Type": ct}, body).file(t)
	if f.ExpiresAt == nil || *f.ExpiresAt != f.CreatedAt+2592000 {
		t.Errorf("30 days, fields after the file: %+v; want expires_at created_at+2592000", f)
	}
}
