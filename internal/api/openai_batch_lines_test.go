package api_test

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// The lines of a batch input file: what the upload counts and the create
// reads as a request, how long one line may be, and which custom_ids are
// one id. The first two tests each guard a bug, fixed with them; the
// third a case no other test covers.

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
		n := batchNum(t, b.ID)
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
