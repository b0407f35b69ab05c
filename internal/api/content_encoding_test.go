package api_test

import (
	"bytes"
	"compress/gzip"
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
