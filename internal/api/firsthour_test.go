package api_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestAccept_ContentTypeMustBeJSON: a body labelled as anything but JSON
// is 415 in the JSON error form and writes nothing; JSON with parameters,
// a +json type, and no Content-Type at all are read as JSON.
func TestAccept_ContentTypeMustBeJSON(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	for i, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonl", "not a type"} {
		before := e.contents()
		r := e.do(http.MethodPost, "/v1/jobs", map[string]string{"Content-Type": ct, "Idempotency-Key": "ct-" + string(rune('a'+i))}, []byte(`{"prompt":"x"}`))
		got := assertError(t, r, http.StatusUnsupportedMediaType, inkwell.EMEDIATYPE)
		if !strings.Contains(got.Message, "application/json") {
			t.Errorf("Content-Type %q: message %q does not say what to send", ct, got.Message)
		}
		e.assertUnchanged(before)
	}
	for i, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON", "application/vnd.inkwell+json", ""} {
		h := map[string]string{"Idempotency-Key": "ok-" + string(rune('a'+i))}
		if ct != "" {
			h["Content-Type"] = ct
		}
		if r := e.do(http.MethodPost, "/v1/jobs", h, []byte(`{"prompt":"x"}`)); r.status != http.StatusCreated {
			t.Errorf("Content-Type %q: %d %s, want 201", ct, r.status, r.body)
		}
	}
}

// TestAccept_NotAnObjectSaysWhatWasExpected: a JSON array, string, number
// or boolean body is told, in words, what it is and what was expected.
func TestAccept_NotAnObjectSaysWhatWasExpected(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	for body, kind := range map[string]string{
		`[{"prompt":"a haiku"}]`: "a JSON array",
		`"a haiku"`:              "a JSON string",
		`42`:                     "a JSON number",
		` true `:                 "a JSON boolean",
	} {
		got := assertError(t, e.post("k", body), http.StatusBadRequest, inkwell.EINVALID)
		for _, want := range []string{"body is " + kind, `expected one JSON object: the chat form`, `the short form {"prompt": "...", "account": "...", "max_words": N}`} {
			if !strings.Contains(got.Message, want) {
				t.Errorf("body %s: message %q lacks %q", body, got.Message, want)
			}
		}
	}
	got := assertError(t, e.post("k", `{"prompt":"x","max_words":"ten"}`), http.StatusBadRequest, inkwell.EINVALID)
	if !strings.Contains(got.Message, "field max_words must be a whole number") {
		t.Errorf("max_words as a string: message %q does not say it must be a whole number", got.Message)
	}
}

// TestRefusals_AreLogged: every refusal is logged at info with its
// method, path, status and code; never the request's body.
func TestRefusals_AreLogged(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	logs := &syncBuffer{}
	s := api.New(api.Config{Store: st, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	s.SetReady(true)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, api: s, srv: srv}
	const secret = "the-prompt-words-never-logged"
	e.post("", `{"prompt":"`+secret+`"}`)                                                                                       // 400: no key
	e.post("k", `{"prompt":"`+secret+`","temperature":1}`)                                                                      // 400: unknown field
	e.do(http.MethodGet, "/v1/jobs/424242", nil, nil)                                                                           // 404
	e.do(http.MethodDelete, "/v1/jobs/1", nil, nil)                                                                             // 405
	e.do(http.MethodPost, "/v1/jobs", map[string]string{"Idempotency-Key": "k2", "Content-Type": "text/plain"}, []byte(secret)) // 415
	out := logs.String()
	for _, want := range []string{
		`level=INFO msg="request refused" component=api method=POST path=/v1/jobs status=400 code=invalid`,
		`level=INFO msg="request refused" component=api method=GET path=/v1/jobs/424242 status=404 code=not_found`,
		`level=INFO msg="request refused" component=api method=DELETE path=/v1/jobs/1 status=405 code=method_not_allowed`,
		`level=INFO msg="request refused" component=api method=POST path=/v1/jobs status=415 code=unsupported_media_type`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if n := strings.Count(out, `msg="request refused"`); n != 5 {
		t.Errorf("%d refusals logged, want 5 (one each):\n%s", n, out)
	}
	if strings.Contains(out, secret) {
		t.Errorf("a request body is in the log:\n%s", out)
	}
}
