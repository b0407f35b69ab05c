package api_test

// A body today's catalog refuses (an unknown model, a model taken out of
// the config file, a check added since) is handed to the store as
// AcceptParams.Refuse or BatchParams.Refuse, not answered before it: a
// re-send of a stored job or batch under its key is answered from the
// store, and the refusal is that one request's own answer.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestAccept_CatalogRefusalDoesNotFailConcurrentAccepts: a body the
// catalog refuses (an unknown model) is handed to the store as
// AcceptParams.Refuse (acceptJob, handlers.go), and so joins the store's
// group commit. Were that EINVALID taken there for a database failure (as
// it was when groupErr, internal/store/accept.go, knew only EKEYREUSED,
// ETOOMANY, EBUDGET as a member's own answer), every good request sharing
// the refused one's transaction would be answered 400 with the OTHER
// client's error ("model ... not in the catalog") and not be stored.
// Each good request must get 201 and its job; only the refused one 400.
func TestAccept_CatalogRefusalDoesNotFailConcurrentAccepts(t *testing.T) {
	t.Parallel()
	e := catalogEnv(t)
	send := func(key, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/jobs", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			return -1, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, b := send("catalog-lone-bad", `{"model":"no-such-model","messages":[{"role":"user","content":"hi"}]}`); st != http.StatusBadRequest {
		t.Fatalf("lone refused body: %d %s; want 400", st, b)
	}
	var mu sync.Mutex
	var wrong []string
	for round := range 30 {
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%4 == 0 {
					send(fmt.Sprintf("catalog-bad-%d-%d", round, i), `{"model":"no-such-model","messages":[{"role":"user","content":"hi"}]}`)
					return
				}
				st, b := send(fmt.Sprintf("catalog-good-%d-%d", round, i), fmt.Sprintf(`{"model":"gpt-mini","messages":[{"role":"user","content":"hi %d %d"}]}`, round, i))
				if st != http.StatusCreated {
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("%d %s", st, b))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	if len(wrong) > 0 {
		t.Errorf("%d good requests sent beside refused ones were not stored; want 201 for each, e.g.\n%s", len(wrong), wrong[0])
	}
}

// serveOn serves st with cat (as serve does, reserving the worst case).
func serveOn(t *testing.T, st *store.Store, cat *catalog.Catalog) *env {
	e := &env{t: t, st: st}
	e.api = api.New(api.Config{Store: st, Logger: storetest.TestLogger(t), Catalog: cat,
		WorstCase: func(w inkwell.Work, m inkwell.Model) int64 { return provider.WorstCaseMicros(nil, m, w) }, SyncWait: 100 * time.Millisecond})
	e.api.SetReady(true)
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	return e
}

// withoutClaude is testCatalog after the operator took "claude" out of
// the config file.
func withoutClaude() *catalog.Catalog {
	c := testCatalog()
	c.Models = []inkwell.Model{gptMini}
	return c
}

// TestBatch_ResendAfterCatalogChangeAnswersTheStoredBatch: as for a job
// (ce285c4), a re-send of a stored batch is answered with it when today's
// catalog refuses its lines (a model taken out of the config file, a check
// added since). Were acceptBatch (internal/api/batches.go) to return the
// first line's catalog refusal before the store is asked (as it did when
// ce285c4 fixed only the job path), the client's re-send of a stored
// (queued, perhaps running and paid) batch under its Idempotency-Key would
// be answered 400 "model ... not served", as if nothing were stored.
// docs/api.md / docs/batches.md: a re-send with the same key and body is
// 200 with the stored batch. So the lines' refusal is handed to the store
// as BatchParams.Refuse: 200 and the stored batch for a re-send, 400 and
// nothing written only for a new key.
func TestBatch_ResendAfterCatalogChangeAnswersTheStoredBatch(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	before := serveOn(t, st, testCatalog())
	body := []byte(fmt.Sprintf(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"claude","messages":[{"role":"user","content":"hi"}]}}`+"\n") +
		`{"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-mini","messages":[{"role":"user","content":"hi"}]}}` + "\n")
	h := map[string]string{"Idempotency-Key": "catalog-batch", "Content-Type": "application/jsonl"}
	r := before.do(http.MethodPost, "/v1/batches", h, body)
	if r.status != http.StatusCreated {
		t.Fatalf("batch before the change: %d %s; want 201", r.status, r.body)
	}
	id := r.batch(t).ID
	after := serveOn(t, st, withoutClaude())
	contents := after.contents()
	r = after.do(http.MethodPost, "/v1/batches", h, body)
	if r.status != http.StatusOK {
		t.Errorf("re-send of stored batch %d after 'claude' left the config: %d %s\nwant 200 with the stored batch (as a job's re-send is answered since ce285c4)", id, r.status, r.body)
	}
	// A new key with the same lines is refused, writing nothing.
	h["Idempotency-Key"] = "catalog-batch-new"
	if r := after.do(http.MethodPost, "/v1/batches", h, body); r.status != http.StatusBadRequest {
		t.Errorf("new batch naming a model no longer served: %d %s; want 400", r.status, r.body)
	}
	after.assertUnchanged(contents)
}

// TestAccept_ResendAfterModelRemovedAnswersTheStoredJob: the job-level
// promise ce285c4 made, for a model taken out of the config file rather
// than a new mapping check, on POST /v1/jobs and /v1/chat/completions: the
// re-send under its key is 200 with the job; another body under that key
// is 422; a new key is 400; keyless chat completions are 400; none
// writes anything.
func TestAccept_ResendAfterModelRemovedAnswersTheStoredJob(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	before := serveOn(t, st, testCatalog())
	const body = `{"model":"claude","messages":[{"role":"user","content":"hi"}]}`
	if r := before.post("catalog-job", body); r.status != http.StatusCreated {
		t.Fatalf("before: %d %s", r.status, r.body)
	}
	after := serveOn(t, st, withoutClaude())
	contents := after.contents()
	if r := after.post("catalog-job", body); r.status != http.StatusOK {
		t.Errorf("POST /v1/jobs re-send: %d %s; want 200", r.status, r.body)
	}
	chat := map[string]string{"Content-Type": "application/json", "Idempotency-Key": "catalog-job"}
	if r := after.do(http.MethodPost, "/v1/chat/completions", chat, []byte(body)); r.status != http.StatusGatewayTimeout {
		t.Errorf("chat re-send of the queued job: %d %s; want 504 still_queued (the stored job answered)", r.status, r.body)
	}
	other := `{"model":"claude","messages":[{"role":"user","content":"something else"}]}`
	if r := after.post("catalog-job", other); r.status != http.StatusUnprocessableEntity {
		t.Errorf("re-send with another body: %d %s; want 422", r.status, r.body)
	}
	if r := after.post("catalog-job-new", body); r.status != http.StatusBadRequest {
		t.Errorf("new key: %d %s; want 400", r.status, r.body)
	}
	r := after.do(http.MethodPost, "/v1/chat/completions", map[string]string{"Content-Type": "application/json"}, []byte(body))
	if r.status != http.StatusBadRequest || r.header.Get("Idempotency-Key") != "" {
		t.Errorf("keyless chat completion: %d (Idempotency-Key %q) %s; want 400 and no key sent back", r.status, r.header.Get("Idempotency-Key"), r.body)
	}
	after.assertUnchanged(contents)
}

// TestAccept_ResendOfStoredJobNotRefusedByNewMapping: accept runs the
// Messages API mapping (catalog.Check -> provider.CheckMessages) and
// refuses a system message's image part, which an earlier release
// accepted, sent (the image dropped), got answered and charged. Were the
// check to answer BEFORE the store's idempotent look-up (as it did in
// reserve() when it was added), the client's re-send of that very request
// with its Idempotency-Key after the upgrade (an SDK's retry of the 504
// still_running, or the documented "send the same request with the same
// key to wait on it again") would be answered 400 "cannot send", as if
// nothing had been written, while its job exists, ran and was paid for.
// docs/api.md: "200 | this key was sent before with this body: nothing
// new is made or run, whatever the job's status" (the 402 row makes the
// same promise for the budget).
//
// So a re-send of a stored job is answered from the job (200 / the
// chat.completion), whatever today's catalog checks say of its body; only
// a new job is refused: acceptJob hands the catalog's refusal to the store
// (AcceptParams.Refuse).
func TestAccept_ResendOfStoredJobNotRefusedByNewMapping(t *testing.T) {
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
	h := map[string]string{"Content-Type": "application/json", "Idempotency-Key": "k-resend-after-upgrade"}
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
	if r := now.post("k-resend-after-upgrade", body); r.status != http.StatusOK {
		t.Errorf("POST /v1/jobs re-send: %d %s; want 200 with the job", r.status, r.body)
	}
	now.assertUnchanged(contents)
}
