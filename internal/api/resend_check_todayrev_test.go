package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestTodayrev_ResendOfStoredJobNotRefusedByNewMapping: today's change
// made accept run the Messages API mapping (catalog.Check ->
// provider.CheckMessages) and refuse a system message's image part, which
// the previous release accepted, sent (the image dropped), got answered
// and charged. The check runs in reserve(), BEFORE the store's idempotent
// look-up, so after the upgrade the client's re-send of that very request
// with its Idempotency-Key (an SDK's retry of the 504 still_running, or
// the documented "send the same request with the same key to wait on it
// again") is answered 400 "cannot send", as if nothing had been written,
// while its job exists, ran and was paid for. docs/api.md: "200 | this key
// was sent before with this body: nothing new is made or run, whatever
// the job's status" (the 402 row makes the same promise for the budget).
//
// Right behaviour: a re-send of a stored job is answered from the job
// (200 / the chat.completion), whatever today's catalog checks say of its
// body; only a new job is refused. Found in review, fixed: acceptJob hands
// the catalog's refusal to the store (AcceptParams.Refuse).
func TestTodayrev_ResendOfStoredJobNotRefusedByNewMapping(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	worst := func(w inkwell.Work, m inkwell.Model) int64 { return provider.WorstCaseMicros(nil, m, w) }
	serve := func(cat *catalog.Catalog) *env {
		e := &env{t: t, st: st}
		e.api = api.New(api.Config{Store: st, Logger: storetest.TestLogger(t), Catalog: cat, WorstCase: worst, SyncWait: 200 * time.Millisecond})
		e.api.SetReady(true)
		e.srv = httptest.NewServer(e.api)
		t.Cleanup(e.srv.Close)
		return e
	}
	// The release before: "claude" accepted whatever the mapping said
	// (stood in for here by the same model on a provider whose accept
	// does not run the mapping; the stored payload and hash are the
	// body's, whatever the provider).
	before := testCatalog()
	before.Providers[1].Kind = catalog.KindOpenAI
	old := serve(before)
	const body = `{"model":"claude","messages":[{"role":"system","content":[{"type":"text","text":"Judge against this chart:"},` +
		`{"type":"image_url","image_url":{"url":"https://example.com/chart.png"}}]},{"role":"user","content":"Is 40 above the line?"}]}`
	h := map[string]string{"Content-Type": "application/json", "Idempotency-Key": "k-todayrev-resend"}
	r := old.do(http.MethodPost, "/v1/chat/completions", h, []byte(body))
	if r.status != http.StatusGatewayTimeout {
		t.Fatalf("the release before: POST = %d %s; want 504 still_queued (stored, no lane)", r.status, r.body)
	}
	// Its lane ran it: answered and charged.
	lane, err := st.LockLane(t.Context(), "local")
	if err != nil {
		t.Fatal(err)
	}
	defer lane.Release()
	cs, err := st.ClaimUpTo(t.Context(), lane, 1)
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %v %v", cs, err)
	}
	if err := st.CompleteIfRunning(t.Context(), store.CompleteParams{JobID: cs[0].Job.ID, AttemptID: cs[0].Attempt.ID,
		Text: "Yes, 40 is above it.", Account: inkwell.DefaultAccount, AmountMicros: 900, ProviderRequestID: "msg_paid"}); err != nil {
		t.Fatal(err)
	}

	// After the upgrade, the client's re-send, same key, same body.
	now := serve(testCatalog())
	contents := now.contents()
	r = now.do(http.MethodPost, "/v1/chat/completions", h, []byte(body))
	if r.status != http.StatusOK {
		t.Errorf("re-send of job %d (done, charged) after the upgrade: %d %s\nwant 200 and its chat.completion: the key names a stored, "+
			"paid job; the catalog's new check must refuse new jobs only", cs[0].Job.ID, r.status, r.body)
	}
	// The native route's re-send too.
	if r := now.post("k-todayrev-resend", body); r.status != http.StatusOK {
		t.Errorf("POST /v1/jobs re-send: %d %s; want 200 with the job", r.status, r.body)
	}
	now.assertUnchanged(contents)
}

// TestTodayrev_AnthropicMappingAcceptsWhatTheLaneSends (passes): requests
// for a model served by Anthropic that the lane could send before today's
// change (accept now runs the mapping) are still accepted, 201: an
// assistant turn with content null and tool_calls, a system message whose
// content is an array of text parts, an empty system message, a final
// assistant turn of white space with tool_calls, and a prefill ending in
// white space. The prefill's white space is trimmed only in what is sent:
// the stored payload (and so the request hash) is the body as sent, and a
// re-send is 200 with the same job.
func TestTodayrev_AnthropicMappingAcceptsWhatTheLaneSends(t *testing.T) {
	t.Parallel()
	e := catalogEnv(t)
	const user = `{"role":"user","content":"hi"}`
	const tools = `"tools":[{"type":"function","function":{"name":"f"}}]`
	for _, tc := range []struct{ name, body string }{
		{"AssistantNullContentToolCalls", `{"model":"claude","messages":[` + user + `,
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"ok"}],` + tools + `}`},
		{"SystemTextPartsArray", `{"model":"claude","messages":[{"role":"system","content":[{"type":"text","text":"be brief"},{"type":"text","text":"in French"}]},` + user + `]}`},
		{"EmptySystemMessage", `{"model":"claude","messages":[{"role":"system","content":""},` + user + `]}`},
		{"FinalAssistantWhitespaceWithToolCalls", `{"model":"claude","messages":[` + user + `,
			{"role":"assistant","content":"  \n","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}],` + tools + `}`},
		{"PrefillTrailingWhitespace", `{"model":"claude","messages":[` + user + `,{"role":"assistant","content":"The answer is "}]}`},
		{"WhitespaceTurnBetween", `{"model":"claude","messages":[` + user + `,{"role":"assistant","content":" "},{"role":"user","content":"again"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "k-todayrev-ok-" + tc.name
			r := e.post(key, tc.body)
			if r.status != http.StatusCreated {
				t.Fatalf("POST %s\n= %d %s; want 201 (the mapping can send it)", tc.body, r.status, r.body)
			}
			job := e.storedJob(r.detail(t).Job.ID)
			if tc.name == "PrefillTrailingWhitespace" && !strings.Contains(string(job.Payload), `"The answer is "`) {
				t.Errorf("stored payload %s: want the prefill as sent (trimmed only when mapped)", job.Payload)
			}
			if again := e.post(key, tc.body); again.status != http.StatusOK || again.detail(t).Job.ID != job.ID {
				t.Errorf("re-send: %d %s; want 200 with job %d", again.status, again.body, job.ID)
			}
		})
	}
}

// TestTodayrev_EmptyFinalUserTurnRefusedAtAccept: the accept side of
// provider's TestAnthTodayrev_EmptyFinalUserTurnBecomesPrefill. A request
// for an Anthropic-served model whose last turn is a user turn with no
// content is accepted (201, a job and a reservation written) and would be
// sent as a prefill of the assistant's earlier reply: the model continues
// "Red." rather than answering. Right behaviour: 400 EINVALID naming the
// empty last turn, nothing written. Found in review, fixed.
func TestTodayrev_EmptyFinalUserTurnRefusedAtAccept(t *testing.T) {
	t.Parallel()
	e := catalogEnv(t)
	before := e.contents()
	body := `{"model":"claude","messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"Red."},{"role":"user","content":"  "}]}`
	r := e.post("k-todayrev-empty-last", body)
	if r.status != http.StatusBadRequest {
		t.Errorf("POST %s\n= %d %s\nwant 400 and nothing written: the mapping drops the empty last user turn and the request "+
			"becomes a prefill of the assistant's earlier reply", body, r.status, r.body)
		return
	}
	e.assertUnchanged(before)
}
