package api_test

// A reviewer's tests of the day's last changes (lastrev). Every bug they
// showed is fixed (see git log); where a comment below says what the code
// does wrong, it tells how it was when the test was written.

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

// TestLastrev_RefusedBodyDoesNotFailConcurrentAccepts: a body the catalog
// refuses (an unknown model) is now handed to the store as
// AcceptParams.Refuse (acceptJob, handlers.go) instead of being answered
// before the store. In the store's group commit that EINVALID is taken for
// a database failure (groupErr, internal/store/accept.go, knows only
// EKEYREUSED, ETOOMANY, EBUDGET as a member's own answer), so every good
// request that shares the refused one's transaction is answered 400 with
// the OTHER client's error ("model ... not in the catalog") and is not
// stored. Right behaviour: each good request gets 201 and its job; only
// the refused one gets 400.
func TestLastrev_RefusedBodyDoesNotFailConcurrentAccepts(t *testing.T) {
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
	if st, b := send("lastrev-lone-bad", `{"model":"no-such-model","messages":[{"role":"user","content":"hi"}]}`); st != http.StatusBadRequest {
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
					send(fmt.Sprintf("lastrev-bad-%d-%d", round, i), `{"model":"no-such-model","messages":[{"role":"user","content":"hi"}]}`)
					return
				}
				st, b := send(fmt.Sprintf("lastrev-good-%d-%d", round, i), fmt.Sprintf(`{"model":"gpt-mini","messages":[{"role":"user","content":"hi %d %d"}]}`, round, i))
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

// TestLastrev_BatchResendAfterCatalogChange: ce285c4 made a re-send of a
// stored JOB answered with it when today's catalog refuses its body
// (a model taken out of the config file, a check added since). The
// batch path was left out: acceptBatch (internal/api/batches.go) still
// returns the first line's catalog refusal before the store is asked, so
// the client's re-send of a stored (queued, perhaps running and paid)
// batch under its Idempotency-Key is answered 400 "model ... not served",
// as if nothing were stored. docs/api.md / docs/batches.md: a re-send
// with the same key and body is 200 with the stored batch. Right
// behaviour: as for jobs, hand the lines' refusal to the store as
// BatchParams.Refuse; 200 and the stored batch for a re-send, 400 and
// nothing written only for a new key.
func TestLastrev_BatchResendAfterCatalogChange(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	before := serveOn(t, st, testCatalog())
	body := []byte(fmt.Sprintf(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"claude","messages":[{"role":"user","content":"hi"}]}}`+"\n") +
		`{"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-mini","messages":[{"role":"user","content":"hi"}]}}` + "\n")
	h := map[string]string{"Idempotency-Key": "lastrev-batch", "Content-Type": "application/jsonl"}
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
	h["Idempotency-Key"] = "lastrev-batch-new"
	if r := after.do(http.MethodPost, "/v1/batches", h, body); r.status != http.StatusBadRequest {
		t.Errorf("new batch naming a model no longer served: %d %s; want 400", r.status, r.body)
	}
	after.assertUnchanged(contents)
}

// TestLastrev_JobResendAfterModelRemoved (passes): the job-level promise
// ce285c4 made, for a model taken out of the config file rather than a
// new mapping check, on POST /v1/jobs and /v1/chat/completions: the
// re-send under its key is 200 with the job; another body under that key
// is 422; a new key is 400; keyless chat completions are 400; none
// writes anything.
func TestLastrev_JobResendAfterModelRemoved(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	before := serveOn(t, st, testCatalog())
	const body = `{"model":"claude","messages":[{"role":"user","content":"hi"}]}`
	if r := before.post("lastrev-job", body); r.status != http.StatusCreated {
		t.Fatalf("before: %d %s", r.status, r.body)
	}
	after := serveOn(t, st, withoutClaude())
	contents := after.contents()
	if r := after.post("lastrev-job", body); r.status != http.StatusOK {
		t.Errorf("POST /v1/jobs re-send: %d %s; want 200", r.status, r.body)
	}
	chat := map[string]string{"Content-Type": "application/json", "Idempotency-Key": "lastrev-job"}
	if r := after.do(http.MethodPost, "/v1/chat/completions", chat, []byte(body)); r.status != http.StatusGatewayTimeout {
		t.Errorf("chat re-send of the queued job: %d %s; want 504 still_queued (the stored job answered)", r.status, r.body)
	}
	other := `{"model":"claude","messages":[{"role":"user","content":"something else"}]}`
	if r := after.post("lastrev-job", other); r.status != http.StatusUnprocessableEntity {
		t.Errorf("re-send with another body: %d %s; want 422", r.status, r.body)
	}
	if r := after.post("lastrev-job-new", body); r.status != http.StatusBadRequest {
		t.Errorf("new key: %d %s; want 400", r.status, r.body)
	}
	r := after.do(http.MethodPost, "/v1/chat/completions", map[string]string{"Content-Type": "application/json"}, []byte(body))
	if r.status != http.StatusBadRequest || r.header.Get("Idempotency-Key") != "" {
		t.Errorf("keyless chat completion: %d (Idempotency-Key %q) %s; want 400 and no key sent back", r.status, r.header.Get("Idempotency-Key"), r.body)
	}
	after.assertUnchanged(contents)
}
