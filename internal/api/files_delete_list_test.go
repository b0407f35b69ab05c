package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// DELETE /v1/files/{id} and GET /v1/files (docs/batches.md) over a real
// store and a real server on loopback. The store's side is in
// internal/store/files_test.go, the official SDK's in
// cmd/inkwell/openai_sdk_batches_test.go.

// TestFileDelete_TheBatchMadeOfItStaysWhole: DELETE /v1/files/{id} (the
// SDK's files.delete) of a file a batch was made of answers OpenAI's
// deleted object; the file is 404 from then on (show, content, a second
// delete, a new batch of it: nothing written), while the batch keeps its
// lines, and one of them cancelled ends in its error file as before. A
// batch's error file cannot be deleted apart from its jobs: 400, nothing
// changed.
func TestFileDelete_TheBatchMadeOfItStaysWhole(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	e := oaEnv(t, st, api.Config{})
	f := e.upload("", "batch", "in.jsonl", chatLine("a", "x")+chatLine("b", "y")).file(t)
	b := e.createBatch("", createBody(f.ID, "")).openAIBatch(t)
	jobsBefore := countRows(t, st, "jobs")["jobs"]

	r := e.do(http.MethodDelete, "/v1/files/"+f.ID, nil, "")
	var del api.FileDeleted
	if r.status != http.StatusOK || json.Unmarshal(r.body, &del) != nil || del != (api.FileDeleted{ID: f.ID, Object: "file", Deleted: true}) {
		t.Fatalf("DELETE /v1/files/%s: %d %s; want 200 {id, object file, deleted true}", f.ID, r.status, r.body)
	}
	var parts, marked int
	if err := st.DB().QueryRowContext(t.Context(), `SELECT (SELECT COUNT(*) FROM file_parts WHERE file_id = ?), (SELECT COUNT(*) FROM files WHERE id = ? AND deleted_at IS NOT NULL AND deleted_by = 'api')`, f.ID, f.ID).Scan(&parts, &marked); err != nil || parts != 0 || marked != 1 {
		t.Errorf("after DELETE: %d parts, %d rows marked deleted by api, %v; want 0 parts and the row kept, marked", parts, marked, err)
	}

	before := e.snapshot()
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/files/" + f.ID, ""},
		{http.MethodGet, "/v1/files/" + f.ID + "/content", ""},
		{http.MethodDelete, "/v1/files/" + f.ID, ""},
		{http.MethodPost, "/v1/batches", createBody(f.ID, `{"again":"1"}`)},
	} {
		h := map[string]string{}
		if c.body != "" {
			h["Content-Type"] = "application/json"
		}
		if r := e.do(c.method, c.path, h, c.body); r.status != http.StatusNotFound {
			t.Errorf("%s %s of the deleted file: %d %s; want 404", c.method, c.path, r.status, r.body)
		}
	}
	e.assertUnchanged("requests naming a deleted file", before)

	if got := e.do(http.MethodGet, "/v1/batches/"+b.ID, nil, "").openAIBatch(t); got.RequestCounts.Total != 2 || got.InputFileID != f.ID {
		t.Errorf("the batch after DELETE of its file: %+v; want its 2 lines, input_file_id %s", got, f.ID)
	}
	if n := countRows(t, st, "jobs")["jobs"]; n != jobsBefore {
		t.Errorf("%d jobs after the delete, want the batch's %d", n, jobsBefore)
	}
	var jobID int64
	if err := st.DB().QueryRowContext(t.Context(), `SELECT id FROM jobs WHERE batch_custom_id = 'a'`).Scan(&jobID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Cancel(t.Context(), jobID, "test"); err != nil {
		t.Fatal(err)
	}
	batchID := strings.TrimPrefix(b.ID, "batch_")
	errorsFile := "file-batch_" + batchID + "-errors"
	if r := e.do(http.MethodGet, "/v1/files/"+errorsFile+"/content", nil, ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"custom_id":"a"`) {
		t.Errorf("the batch's error file: %d %s; want line a", r.status, r.body)
	}
	before = e.snapshot()
	r = e.do(http.MethodDelete, "/v1/files/"+errorsFile, nil, "")
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "nothing was deleted") {
		t.Errorf("DELETE of the batch's error file: %d %s; want 400 saying nothing was deleted", r.status, r.body)
	}
	e.assertUnchanged("DELETE of a batch's error file", before)
	if r := e.do(http.MethodGet, "/v1/files/"+errorsFile+"/content", nil, ""); r.status != http.StatusOK {
		t.Errorf("the error file after its refused DELETE: %d", r.status)
	}
}

// TestFileList_PagesTheCallersUploads: GET /v1/files (the SDK's
// files.list) lists a client token's own uploads only, newest first, a
// page at a time through after, without the deleted ones; an operator
// lists every account's.
func TestFileList_PagesTheCallersUploads(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	up := func(token string) string {
		return (&cancelEnv{t: t, srv: se.srv}).upload(token, "batch", "in.jsonl", chatLine("a", "x")).file(t).ID
	}
	var acme []string // newest first, with setupSecurity's own upload last
	for range 4 {
		acme = append([]string{up(se.acme)}, acme...)
	}
	acme = append(acme, se.acmeFile)
	globex := up(se.globex)
	if r := se.req(http.MethodDelete, "/v1/files/"+acme[1], "Bearer "+se.acme, nil, nil); r.status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	acme = append(acme[:1], acme[2:]...)

	list := func(token, query string) api.FileList {
		t.Helper()
		r := se.req(http.MethodGet, "/v1/files"+query, token, nil, nil)
		var l api.FileList
		dec := json.NewDecoder(bytes.NewReader(r.body))
		dec.DisallowUnknownFields()
		if r.status != http.StatusOK || dec.Decode(&l) != nil || l.Object != "list" {
			t.Fatalf("GET /v1/files%s: %d %s", query, r.status, r.body)
		}
		return l
	}
	var got []string
	after := ""
	for page := 0; ; page++ {
		q := "?limit=2"
		if after != "" {
			q += "&after=" + after
		}
		l := list("Bearer "+se.acme, q)
		for _, f := range l.Data {
			got = append(got, f.ID)
		}
		if len(l.Data) > 0 && (*l.FirstID != l.Data[0].ID || *l.LastID != l.Data[len(l.Data)-1].ID) {
			t.Errorf("page %d: first_id %s, last_id %s, data %v", page, *l.FirstID, *l.LastID, l.Data)
		}
		if !l.HasMore {
			break
		}
		if page > 5 {
			t.Fatalf("pages do not end: %v", got)
		}
		after = *l.LastID
	}
	if !slices.Equal(got, acme) {
		t.Errorf("acme's pages list %v, want %v (newest first, the deleted one left out, no globex file)", got, acme)
	}
	all := list("Bearer "+se.operator, "?order=asc")
	if n := len(all.Data); n != len(acme)+1 || all.Data[n-1].ID != globex || all.HasMore {
		t.Errorf("the operator's list, oldest first: %+v; want acme's %d and globex's last", all.Data, len(acme))
	}
}
