package api_test

import (
	"fmt"
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

// TestAccept_ManyKeysAreRefusedAsUnknown: a body of thousands of distinct
// keys is refused as holding an unknown field (the duplicate check stops
// after a few keys, where nothing is left for it to find), and one that
// repeats a field after many unknown ones is refused too.
func TestAccept_ManyKeysAreRefusedAsUnknown(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	var b strings.Builder
	b.WriteString(`{"prompt":"x"`)
	for i := range 5000 {
		fmt.Fprintf(&b, `,"k%d":1`, i)
	}
	b.WriteString(`,"prompt":"y"}`)
	before := e.contents()
	got := assertError(t, e.do(http.MethodPost, "/v1/jobs", map[string]string{"Idempotency-Key": "many"}, []byte(b.String())), http.StatusBadRequest, inkwell.EINVALID)
	if !strings.Contains(got.Message, `unknown field "k0"`) {
		t.Errorf("message %q does not name the first unknown field", got.Message)
	}
	e.assertUnchanged(before)
}
