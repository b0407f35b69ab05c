package api_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// TestRoutes_CompressedBodyIs415: a body sent with a Content-Encoding no
// route decodes is 415 naming the encoding, with Accept-Encoding: identity
// (RFC 7694), and writes nothing; it used to be a 400 about the gzip bytes
// read as JSON. identity is the body as it is. An unknown path is still
// 404, whatever its encoding.
func TestRoutes_CompressedBodyIs415(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"prompt":"a haiku about ink"}`))
	zw.Close()
	for _, c := range []struct{ path, ct, encoding string }{
		{"/v1/jobs", "application/json", "gzip"},
		{"/v1/jobs", "application/json", "GZIP"},
		{"/v1/jobs", "application/json", "br"},
		{"/v1/chat/completions", "application/json", "gzip"},
		{"/v1/batches", "application/json", "deflate"},
		{"/v1/files", "multipart/form-data; boundary=x", "gzip"},
	} {
		before := e.contents()
		r := e.do(http.MethodPost, c.path, map[string]string{"Content-Type": c.ct, "Content-Encoding": c.encoding, "Idempotency-Key": "gz-1"}, gz.Bytes())
		got := assertError(t, r, http.StatusUnsupportedMediaType, inkwell.EMEDIATYPE)
		if !strings.Contains(got.Message, `Content-Encoding "`+c.encoding+`"`) || !strings.Contains(got.Message, "uncompressed") {
			t.Errorf("POST %s with Content-Encoding %s: message %q; want the encoding named and what to send", c.path, c.encoding, got.Message)
		}
		if ae := r.header.Get("Accept-Encoding"); ae != "identity" {
			t.Errorf("POST %s with Content-Encoding %s: Accept-Encoding %q, want identity", c.path, c.encoding, ae)
		}
		e.assertUnchanged(before)
	}
	if r := e.do(http.MethodPost, "/v1/nosuch", map[string]string{"Content-Encoding": "gzip"}, gz.Bytes()); r.status != http.StatusNotFound {
		t.Errorf("POST /v1/nosuch with gzip: %d, want 404", r.status)
	}
	r := e.do(http.MethodPost, "/v1/jobs", map[string]string{"Content-Encoding": "identity", "Idempotency-Key": "id-1"}, []byte(`{"prompt":"x"}`))
	if r.status != http.StatusCreated {
		t.Errorf("Content-Encoding identity: %d %s, want 201", r.status, r.body)
	}
}

// TestContentEncoding_BodilessGETIsServed: a GET carries no body, so
// a Content-Encoding header on it names the coding of nothing; the 415
// (refusing a body that cannot be decoded) must not turn reads, health
// checks or the OpenAPI document away.
func TestContentEncoding_BodilessGETIsServed(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	r := e.post("ce-get-1", `{"prompt":"x"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /v1/jobs: %d %s", r.status, r.body)
	}
	for _, path := range []string{"/healthz", "/readyz", "/openapi.json", "/v1/jobs/1", "/v1/models"} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			got := e.do(method, path, map[string]string{"Content-Encoding": "gzip"}, nil)
			if got.status == http.StatusUnsupportedMediaType {
				t.Errorf("%s %s with Content-Encoding: gzip and no body: 415 %s; want it served as without the header", method, path, got.body)
			}
		}
	}
}

// TestContentEncoding_SecondHeaderLine: Content-Encoding may be sent
// as two header lines ("identity" then "gzip", which is the list
// "identity, gzip": the body is gzip). Only the first line is read, so the
// body is read as JSON and answered 400 about bytes the client never
// wrote, the very answer the 415 was to replace.
func TestContentEncoding_SecondHeaderLine(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"prompt":"a haiku about ink"}`))
	zw.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+"/v1/jobs", bytes.NewReader(gz.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "ce-two-lines")
	req.Header.Add("Content-Encoding", "identity")
	req.Header.Add("Content-Encoding", "gzip")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("POST /v1/jobs, gzip body, Content-Encoding: identity + Content-Encoding: gzip: %d %s; want 415 naming gzip", resp.StatusCode, b)
	}
}
