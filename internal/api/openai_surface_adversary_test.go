package api_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/jobwait"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Attacks on the OpenAI-compatible surface found by a review on
// 2026-12-05: the first two were bugs (fixed with them), the others
// attacks the surface withstood that no other test covered.

// TestBatchLines_UploadAndCreateCountTheSameLines: the upload's count
// (files.go lineCounter) and the create (batches_parse.go
// parseBatchLines) agree on what a blank line is: ASCII white space only
// (blankByte). The create used to skip a line that bytes.TrimSpace
// emptied, Unicode spaces too (U+00A0…, which editors and spreadsheet
// exports leave behind), so a file's stored line count was not its
// batch's, and a file of exactly MaxBatchLines requests and such a line
// was refused at upload although its batch held 50,000 lines. Now such a
// line is a request that is not JSON: counted at upload, refused by name
// at create.
func TestBatchLines_UploadAndCreateCountTheSameLines(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	e := oaEnv(t, st, api.Config{})

	// Three lines, one of them a no-break space only: three requests to
	// the upload, and the create names the third as not JSON.
	content := chatLine("a", "x") + "\u00a0\n" + chatLine("b", "y")
	f := e.upload("", "batch", "nbsp.jsonl", content).file(t)
	stored, err := st.File(t.Context(), f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Lines != 3 {
		t.Errorf("file %s: the upload counted %d requests, want 3 (a line of U+00A0 is not blank)", f.ID, stored.Lines)
	}
	before := e.snapshot()
	if got := assertError(t, e.createBatch("", createBody(f.ID, "")), http.StatusBadRequest, inkwell.EINVALID); !strings.Contains(got.Message, "line 2") {
		t.Errorf("a line of U+00A0: %q; want it refused by its number, line 2", got.Message)
	}
	e.assertUnchanged("a batch with a line of U+00A0", before)

	// ASCII white space is blank to both: the same file with a line of
	// spaces and tabs has two requests, stored and made a batch.
	g := e.upload("", "batch", "blank.jsonl", chatLine("a", "x")+" \t\r\n"+chatLine("b", "y")).file(t)
	if stored, err = st.File(t.Context(), g.ID); err != nil {
		t.Fatal(err)
	}
	if b := e.createBatch("", createBody(g.ID, "")).openAIBatch(t); stored.Lines != 2 || b.RequestCounts.Total != 2 {
		t.Errorf("a file with a line of ASCII white space: upload counted %d, batch has %d; want 2 and 2", stored.Lines, b.RequestCounts.Total)
	}
}

// TestDocs_BatchLineLimitIsTheCodes: docs/batches.md's limits table
// gives one line's limit as MaxBatchLineBytes is (it said "about 55 KB"
// long after a request body's limit became 1 MiB), and a line of 200 KB,
// far past the old figure, is taken.
func TestDocs_BatchLineLimitIsTheCodes(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/batches.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\| one line \| ([0-9,]+) bytes`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/batches.md's limits table has no row \"| one line | N bytes\"")
	}
	if n, _ := strconv.Atoi(strings.ReplaceAll(string(m[1]), ",", "")); n != api.MaxBatchLineBytes {
		t.Errorf("docs/batches.md says one line is %s bytes; MaxBatchLineBytes is %d (inkwell.MaxBodyBytes %d, custom_id and room)",
			m[1], api.MaxBatchLineBytes, inkwell.MaxBodyBytes)
	}

	e := oaEnv(t, storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{}), api.Config{})
	big := chatLine("big", strings.Repeat("ink ", 50_000)) // ~200 KB
	f := e.upload("", "batch", "big.jsonl", big).file(t)
	if b := e.createBatch("", createBody(f.ID, "")).openAIBatch(t); b.RequestCounts.Total != 1 {
		t.Errorf("a %d-byte line: batch %+v, want it taken as one request", len(big), b)
	}
}

// TestBatches_CustomIDsDifferingInCaseOrFormAreDistinct: custom_ids that
// differ only in case ("Q1", "q1") or in Unicode normalization (é as
// U+00E9 and as e U+0301) are different lines, as OpenAI treats them: one
// job each, each output line under its own custom_id, on both dialects
// (PostgreSQL's unique index on the line compares bytes). The same id
// spelled once plainly and once with a JSON escape ("a", "\u0061") is one
// id and refused as repeated, nothing written.
func TestBatches_CustomIDsDifferingInCaseOrFormAreDistinct(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		ids := []string{"Q1", "q1", "caf\u00e9", "cafe\u0301", "ß", "SS"}
		var content strings.Builder
		for i, id := range ids {
			content.WriteString(chatLine(id, fmt.Sprint("line ", i)))
		}
		f := e.upload("", "batch", "ids.jsonl", content.String()).file(t)
		b := e.createBatch("", createBody(f.ID, "")).openAIBatch(t)
		if b.RequestCounts.Total != int64(len(ids)) {
			t.Fatalf("batch %+v; want %d lines", b, len(ids))
		}
		n := saBatchNum(t, b.ID)
		for range ids {
			completeNext(t, st)
		}
		lines := outputLines(t, e.do(http.MethodGet, fmt.Sprintf("/v1/files/file-batch_%d-output/content", n), nil, ""))
		if len(lines) != len(ids) {
			t.Fatalf("output has %d lines, want %d", len(lines), len(ids))
		}
		for i, l := range lines {
			if l.CustomID != ids[i] {
				t.Errorf("output line %d: custom_id %q, want %q", i, l.CustomID, ids[i])
			}
		}

		escaped := chatLine("a", "x") + strings.Replace(chatLine("a", "y"), `"custom_id":"a"`, `"custom_id":"\u0061"`, 1)
		g := e.upload("", "batch", "escaped.jsonl", escaped).file(t)
		before := e.snapshot()
		if got := assertError(t, e.createBatch("", createBody(g.ID, "")), http.StatusBadRequest, inkwell.EINVALID); !strings.Contains(got.Message, "repeats line 1") {
			t.Errorf("an escaped repeat of a custom_id: %q; want it refused as repeating line 1", got.Message)
		}
		e.assertUnchanged("an escaped repeat of a custom_id", before)
	})
}

// TestChatCompletions_ClientGoneThenResentAnswersTheOneJob: a client of POST
// /v1/chat/completions that hangs up while it waits leaves its job queued
// (stored, not cancelled, nothing else written); the same request re-sent
// under the same key waits on that job and answers its completion: one
// job, one result. The same key with another body is then 422, nothing
// written.
func TestChatCompletions_ClientGoneThenResentAnswersTheOneJob(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	hub := jobwait.New()
	e := oaEnv(t, st, api.Config{Waits: hub, SyncWait: 30 * time.Second})
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"a haiku"}],"max_tokens":20}`
	h := map[string]string{"Content-Type": "application/json", "Idempotency-Key": "r14-gone"}

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	for k, v := range h {
		req.Header.Set(k, v)
	}
	if resp, err := e.srv.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the first request was answered (%d) before the client hung up; want it still waiting", resp.StatusCode)
	}
	cancel()
	if n := countRows(t, st, "jobs")["jobs"]; n != 1 {
		t.Fatalf("%d jobs after the client hung up, want its one job stored", n)
	}
	var status string
	if err := st.DB().QueryRowContext(t.Context(), `SELECT status FROM jobs`).Scan(&status); err != nil || status != inkwell.StatusQueued {
		t.Fatalf("job status %q (%v), want queued", status, err)
	}

	done := make(chan reply, 1)
	go func() { r, _ := send(e.srv, http.MethodPost, "/v1/chat/completions", h, body); done <- r }()
	storetest.WaitFor(t, 10*time.Second, "the re-send waiting on the job", func() bool { return len(hub.IDs()) == 1 })
	hub.Wake(completeNext(t, st)) // as the lane wakes it after the commit
	r := <-done
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "Ink dries slowly") {
		t.Errorf("re-send under the same key: %d %s, want 200 with the job's completion", r.status, r.body)
	}
	if c := countRows(t, st, "jobs", "results"); c["jobs"] != 1 || c["results"] != 1 {
		t.Errorf("rows %v, want one job and one result", c)
	}
	before := e.snapshot()
	assertError(t, e.do(http.MethodPost, "/v1/chat/completions", h, strings.Replace(body, "a haiku", "a limerick", 1)), http.StatusUnprocessableEntity, inkwell.EKEYREUSED)
	e.assertUnchanged("the key re-sent with another body", before)
}
