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

// Fixes from an adversary pass of the OpenAI-compatible surface, each
// test failing on the code before its fix. Real servers on loopback, real
// SQLite files, and PostgreSQL where INKWELL_TEST_POSTGRES_URL is set.

// TestAdversaryFix_MalformedFileID: a file id that is no id Inkwell makes
// (a NUL byte, invalid UTF-8) is 404 not_found, as an unknown id is, on
// both dialects: GET /v1/files/{id}, …/content, and a batch created from
// it. PostgreSQL refuses such a string in a query (SQLSTATE 22021), which
// answered 500.
func TestAdversaryFix_MalformedFileID(t *testing.T) {
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

// TestAdversaryFix_BatchCreateWithoutContentType: POST /v1/batches
// without Content-Type is JSON (docs/api.md: a request without
// Content-Type is read as JSON), so the OpenAI create body works and a
// bad one is refused for what it is, not for a missing Idempotency-Key;
// a body of another type is refused for its Content-Type first.
func TestAdversaryFix_BatchCreateWithoutContentType(t *testing.T) {
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
