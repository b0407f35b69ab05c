package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
)

// TestSecurity_CrossAccountEdges walks the cross-account edges the
// security battery does not: a long-poll on another account's job answers 404 at
// once (it never waits, and says what a missing job says); a list cursor
// naming another account's batch lists only the caller's own; the same
// batch key, chat key and file-derived batch key under two accounts are
// independent; another account's virtual error file is 404.
func TestSecurity_CrossAccountEdges(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	globexBatch := se.submitBatch(se.globex, "globex-batch", batchBody(2), http.StatusCreated).ID

	// A long-poll on globex's job by acme: 404 at once, worded as a missing job.
	start := time.Now()
	other := se.req(http.MethodGet, fmt.Sprintf("/v1/jobs/%d?wait=5s", se.globexJob), "Bearer "+se.acme, nil, nil)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a long-poll on another account's job waited %s; want an answer at once", took)
	}
	none := se.req(http.MethodGet, "/v1/jobs/987654?wait=5s", "Bearer "+se.acme, nil, nil)
	if got, want := assertError(t, other, http.StatusNotFound, inkwell.ENOTFOUND).Message,
		strings.Replace(assertError(t, none, http.StatusNotFound, inkwell.ENOTFOUND).Message, "987654", fmt.Sprint(se.globexJob), 1); got != want {
		t.Errorf("another's job on a long-poll: %q; a missing one: %q", got, want)
	}

	// A cursor naming globex's batch: acme's own batches only.
	r := se.req(http.MethodGet, fmt.Sprintf("/v1/batches?after=batch_%d", globexBatch+1), "Bearer "+se.acme, nil, nil)
	var list api.BatchList
	if r.status != http.StatusOK || json.Unmarshal(r.body, &list) != nil {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	for _, b := range list.Data {
		if b.ID == fmt.Sprintf("batch_%d", globexBatch) {
			t.Errorf("acme's list holds globex's batch %s", b.ID)
		}
	}
	if len(list.Data) != 1 || list.Data[0].ID != fmt.Sprintf("batch_%d", se.acmeBatch) {
		t.Errorf("acme's list after globex's cursor: %s; want acme's one batch", r.body)
	}

	// The same JSONL batch key as globex's: a new batch of acme.
	b := se.submitBatch(se.acme, "globex-batch", batchBody(2), http.StatusCreated)
	if b.ID == globexBatch || b.Account != "acme" {
		t.Errorf("acme sent globex's batch key: batch %d of %q; want a new batch of acme", b.ID, b.Account)
	}

	// The same chat key as globex: a new job of acme (504: no lane here).
	g := se.req(http.MethodPost, "/v1/chat/completions", "Bearer "+se.globex, map[string]string{"Idempotency-Key": "chat-shared"},
		[]byte(`{"messages":[{"role":"user","content":"a poem"}]}`))
	a := se.req(http.MethodPost, "/v1/chat/completions", "Bearer "+se.acme, map[string]string{"Idempotency-Key": "chat-shared"},
		[]byte(`{"messages":[{"role":"user","content":"a poem"}]}`))
	gid, aid := g.header.Get("Inkwell-Job-Id"), a.header.Get("Inkwell-Job-Id")
	if gid == "" || aid == "" || gid == aid || a.status == http.StatusUnprocessableEntity {
		t.Errorf("the same chat key under two accounts: globex job %q (%d), acme job %q (%d %s); want two jobs", gid, g.status, aid, a.status, a.body)
	}

	// The file-derived batch key (no Idempotency-Key): each account's own.
	e := &cancelEnv{t: t, srv: se.srv}
	gf := e.upload(se.globex, "batch", "g.jsonl", chatLine("a", "x")).file(t)
	create := func(token, file string) reply {
		return se.req(http.MethodPost, "/v1/batches", "Bearer "+token, map[string]string{"Content-Type": "application/json"},
			[]byte(fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/chat/completions","completion_window":"24h"}`, file)))
	}
	if r := create(se.globex, gf.ID); r.status != http.StatusOK {
		t.Fatalf("globex creates from its file: %d %s", r.status, r.body)
	}
	if r := create(se.acme, se.acmeFile); r.status != http.StatusOK {
		t.Errorf("acme creates from its file: %d %s", r.status, r.body)
	}

	// Another account's virtual error file, once it has a line.
	if _, err := se.st.CancelBatch(t.Context(), globexBatch, "test"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fmt.Sprintf("/v1/files/file-batch_%d-errors", globexBatch), fmt.Sprintf("/v1/files/file-batch_%d-errors/content", globexBatch),
		fmt.Sprintf("/v1/batches/%d/errors", globexBatch)} {
		assertError(t, se.req(http.MethodGet, p, "Bearer "+se.acme, nil, nil), http.StatusNotFound, inkwell.ENOTFOUND)
		if r := se.req(http.MethodGet, p, "Bearer "+se.globex, nil, nil); r.status != http.StatusOK {
			t.Errorf("globex reads its own %s: %d %s", p, r.status, r.body)
		}
	}
}
