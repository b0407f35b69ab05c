package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestAccept_AdmissionRefusesPastMaxQueued: serve --max-queued over real
// HTTP. Past the limit a new request gets 429 with Retry-After and writes
// nothing (every table compared); a re-send of a stored key is still
// answered 200; a reused key with another body is still 422.
func TestAccept_AdmissionRefusesPastMaxQueued(t *testing.T) {
	t.Parallel()
	e := &env{t: t}
	e.st = storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	e.api = api.New(api.Config{Store: e.st, Logger: storetest.TestLogger(t), OnAccepted: func() { e.accepted.Add(1) }, MaxQueued: 2})
	e.api.SetReady(true)
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)

	for _, k := range []string{"a", "b"} {
		if r := e.post(k, `{"prompt":"p"}`); r.status != http.StatusCreated {
			t.Fatalf("accept %s under the limit: %d %s", k, r.status, r.body)
		}
	}
	before := e.contents()
	r := e.post("c", `{"prompt":"p"}`)
	assertError(t, r, http.StatusTooManyRequests, inkwell.ETOOMANY)
	if r.header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After: %v", r.header)
	}
	e.assertUnchanged(before)
	if r := e.post("a", `{"prompt":"p"}`); r.status != http.StatusOK || r.detail(t).Job.IdempotencyKey != "a" {
		t.Errorf("re-send past the limit: %d %s; want 200 with the stored job", r.status, r.body)
	}
	assertError(t, e.post("a", `{"prompt":"other"}`), http.StatusUnprocessableEntity, inkwell.EKEYREUSED)
	e.assertUnchanged(before)
	if n := e.accepted.Load(); n != 2 {
		t.Errorf("OnAccepted called %d times, want 2 (refusals and re-sends wake nobody)", n)
	}
}
