package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// TestAccept_DuplicateFieldIsRefused: a body naming one field twice
// (exactly, or in another case, which Go's decoder matches too) is 400
// and writes nothing: Go would keep the last value, a proxy or a log
// reader the first, and who pays is read from the body. The same fields
// once each, in any case, are accepted.
func TestAccept_DuplicateFieldIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	for i, tc := range []struct{ body, field string }{
		{`{"prompt":"a haiku","prompt":"a sonnet"}`, `"prompt"`},
		{`{"prompt":"x","account":"default","Account":"acme"}`, `"Account"`},
		{`{"prompt":"x","max_words":5,"MAX_WORDS":2000}`, `"MAX_WORDS"`},
		{` { "account" : "a" , "prompt" : "x" , "account" : "a" } `, `"account"`},
	} {
		before := e.contents()
		got := assertError(t, e.do(http.MethodPost, "/v1/jobs", map[string]string{"Idempotency-Key": "dup-" + string(rune('a'+i))}, []byte(tc.body)),
			http.StatusBadRequest, inkwell.EINVALID)
		for _, want := range []string{tc.field + " appears twice", "send each field once"} {
			if !strings.Contains(got.Message, want) {
				t.Errorf("body %s: message %q lacks %q", tc.body, got.Message, want)
			}
		}
		e.assertUnchanged(before)
	}
	for i, body := range []string{`{"prompt":"x","account":"acme","max_words":5}`, `{"Prompt":"y","ACCOUNT":"acme"}`} {
		if r := e.do(http.MethodPost, "/v1/jobs", map[string]string{"Idempotency-Key": "once-" + string(rune('a'+i))}, []byte(body)); r.status != http.StatusCreated {
			t.Errorf("body %s: %d %s, want 201", body, r.status, r.body)
		}
	}
}
