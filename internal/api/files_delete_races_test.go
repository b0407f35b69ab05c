package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// DELETE /v1/files/{id} and GET /v1/files under attack: deletes racing
// a batch made of the file and each other, the SDK deleting as it pages,
// another account's files, malformed queries.

// deleteMidRead is the store, but the reader FileContent returns deletes
// the file (store.DeleteFile) once its first part was read and before the
// second is: the race of a DELETE with a batch being made of the file,
// made deterministic.
type deleteMidRead struct {
	*store.Store
	mu      sync.Mutex
	deleted []string
}

func (d *deleteMidRead) FileContent(ctx context.Context, id string) (io.Reader, error) {
	r, err := d.Store.FileContent(ctx, id)
	if err != nil {
		return nil, err
	}
	return &cutReader{r: r, cut: func() {
		if _, err := d.Store.DeleteFile(context.Background(), id, "test"); err == nil {
			d.mu.Lock()
			d.deleted = append(d.deleted, id)
			d.mu.Unlock()
		}
	}}, nil
}

type cutReader struct {
	r    io.Reader
	n    int
	cut  func()
	done bool
}

func (c *cutReader) Read(p []byte) (int, error) {
	if !c.done && c.n >= store.FilePartBytes {
		c.done = true
		c.cut()
	}
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// sizedChatLine is a chat line of exactly size bytes, newline included.
func sizedChatLine(t *testing.T, customID string, size int) string {
	t.Helper()
	base := len(chatLine(customID, ""))
	if size < base {
		t.Fatalf("a line of %d bytes is shorter than %d", size, base)
	}
	l := chatLine(customID, strings.Repeat("x", size-base))
	if len(l) != size {
		t.Fatalf("line of %d bytes, want %d", len(l), size)
	}
	return l
}

// TestFileDelete_MidReadBatchIs404: a file deleted while POST
// /v1/batches reads it makes no batch (the invariant), and the answer is
// the 404 of a deleted file (docs/batches.md "Deleting an upload": the
// read ends with an error; a batch of a deleted file is 404), not a 400
// that blames line N of the file for a cut the server made.
func TestFileDelete_MidReadBatchIs404(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		line int // bytes of each line
	}{
		{"cut inside a line", 333},     // 1 MiB is no multiple of 333
		{"cut between two lines", 512}, // 1 MiB is 2048 lines of 512 bytes
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
			d := &deleteMidRead{Store: st}
			a := api.New(api.Config{Store: d, Logger: storetest.TestLogger(t)})
			a.SetReady(true)
			srv := httptest.NewServer(a)
			t.Cleanup(srv.Close)
			e := &cancelEnv{t: t, st: st, srv: srv}
			var b strings.Builder
			for i := 0; b.Len() < store.FilePartBytes+store.FilePartBytes/2; i++ {
				b.WriteString(sizedChatLine(t, fmt.Sprintf("c%05d", i), c.line))
			}
			f := e.upload("", "batch", "in.jsonl", b.String()).file(t)

			r := e.createBatch("", createBody(f.ID, ""))
			if len(d.deleted) != 1 {
				t.Fatalf("the file was not deleted mid-read: %v", d.deleted)
			}
			if n := countRows(t, st, "batches", "jobs"); n["batches"] != 0 || n["jobs"] != 0 {
				t.Errorf("a batch was made of part of a deleted file: %v", n)
			}
			if r.status != http.StatusNotFound {
				t.Errorf("POST /v1/batches of a file deleted while it was read: %d %s; want 404 (the file is deleted), not a refusal of its lines", r.status, r.body)
			}
		})
	}
}

// TestFileList_SDKDeletesEachFileAsItLists: the cleanup idiom of the
// official SDK, deleting each upload as the auto-pager yields it: the
// pager asks the next page after the last id it saw, which is deleted by
// then. Every upload must be listed and deleted, and the pager end
// without an error.
func TestFileList_SDKDeletesEachFileAsItLists(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	e := oaEnv(t, st, api.Config{})
	var uploaded []string
	for i := range 3 {
		uploaded = append(uploaded, e.upload("", "batch", "in.jsonl", chatLine(fmt.Sprint(i), "x")).file(t).ID)
	}
	client := openai.NewClient(option.WithBaseURL(e.srv.URL+"/v1/"), option.WithAPIKey("none"), option.WithMaxRetries(0))
	ctx := t.Context()
	var deleted []string
	iter := client.Files.ListAutoPaging(ctx, openai.FileListParams{Limit: openai.Int(1)})
	for iter.Next() {
		if _, err := client.Files.Delete(ctx, iter.Current().ID); err != nil {
			t.Fatalf("Files.Delete(%s): %v", iter.Current().ID, err)
		}
		deleted = append(deleted, iter.Current().ID)
	}
	if err := iter.Err(); err != nil || len(deleted) != len(uploaded) {
		t.Errorf("list-and-delete: deleted %v of %v, then %v; want every upload deleted and no error (the next page after a file just deleted)", deleted, uploaded, err)
	}

	// The same over plain HTTP: after= naming the caller's own file that
	// was deleted since the page was read.
	a := e.upload("", "batch", "a.jsonl", chatLine("a", "x")).file(t).ID
	b := e.upload("", "batch", "b.jsonl", chatLine("b", "x")).file(t).ID
	if r := e.do(http.MethodDelete, "/v1/files/"+b, nil, ""); r.status != http.StatusOK {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, "/v1/files?limit=1&after="+b, nil, ""); r.status != http.StatusOK || !strings.Contains(string(r.body), a) {
		t.Errorf("GET /v1/files?after=<a file deleted since>: %d %s; want 200 and the page after it (%s)", r.status, r.body, a)
	}
}

// TestFiles_AnotherAccountsFileIsNoFile: for a client token, another
// account's upload (DELETE, after=) and another account's batch file
// (DELETE) answer exactly as an id that names nothing, and change nothing;
// its own batch's error file is 400.
func TestFiles_AnotherAccountsFileIsNoFile(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	var job int64
	if err := se.st.DB().QueryRowContext(t.Context(), `SELECT id FROM jobs WHERE batch_id = ? ORDER BY id LIMIT 1`, se.acmeBatch).Scan(&job); err != nil {
		t.Fatal(err)
	}
	if _, err := se.st.Cancel(t.Context(), job, "test"); err != nil {
		t.Fatal(err)
	}
	errorsFile := fmt.Sprintf("file-batch_%d-errors", se.acmeBatch)
	noneUpload := "file-0123456789abcdef01234567"
	noneBatchFile := fmt.Sprintf("file-batch_%d-errors", se.acmeBatch+1000)
	globex, acme := "Bearer "+se.globex, "Bearer "+se.acme
	snap := se.snapshot()
	same := func(what, method, theirs, none string) {
		t.Helper()
		pathOf := func(id string) string {
			if method == http.MethodDelete {
				return "/v1/files/" + id
			}
			return "/v1/files?after=" + id
		}
		r1 := se.req(method, pathOf(theirs), globex, nil, nil)
		r2 := se.req(method, pathOf(none), globex, nil, nil)
		b1 := strings.ReplaceAll(string(r1.body), theirs, "ID")
		b2 := strings.ReplaceAll(string(r2.body), none, "ID")
		if r1.status != http.StatusNotFound || r1.status != r2.status || b1 != b2 {
			t.Errorf("%s: another account's answers %d %s, no such %d %s; want the same 404", what, r1.status, r1.body, r2.status, r2.body)
		}
	}
	same("DELETE of acme's upload", http.MethodDelete, se.acmeFile, noneUpload)
	same("GET /v1/files?after= acme's upload", http.MethodGet, se.acmeFile, noneUpload)
	same("DELETE of acme's batch's error file", http.MethodDelete, errorsFile, noneBatchFile)
	if diff := diffSnap(snap, se.snapshot()); diff != "" {
		t.Errorf("globex's requests changed the database: %s", diff)
	}
	if r := se.req(http.MethodDelete, "/v1/files/"+errorsFile, acme, nil, nil); r.status != http.StatusBadRequest {
		t.Errorf("acme's DELETE of its batch's error file: %d %s; want 400", r.status, r.body)
	}
	if r := se.req(http.MethodDelete, fmt.Sprintf("/v1/files/file-batch_%d-output", se.acmeBatch), acme, nil, nil); r.status != http.StatusNotFound {
		t.Errorf("acme's DELETE of its batch's output file, no line done: %d %s; want 404", r.status, r.body)
	}
	if r := se.req(http.MethodGet, "/v1/files/"+se.acmeFile, acme, nil, nil); r.status != http.StatusOK {
		t.Errorf("acme's file after globex's requests: %d %s", r.status, r.body)
	}
}

func diffSnap(a, b map[string][]string) string {
	for k, v := range a {
		if strings.Join(v, "\n") != strings.Join(b[k], "\n") {
			return "table " + k
		}
	}
	return ""
}

// TestFileList_BadQueriesAre400: every malformed query is 400 (never a
// 500, on PostgreSQL too: NUL and invalid UTF-8 never reach a query).
func TestFileList_BadQueriesAre400(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		e.upload("", "batch", "in.jsonl", chatLine("a", "x")).file(t)
		for _, q := range []string{"limit=0", "limit=10001", "limit=-1", "limit=1.5", "limit=abc", "limit=%201",
			"order=ASC", "order=newest", "after=file-batch_1-output", "after=file-%00", "after=%ff", "after=file-0123456789ABCDEF01234567",
			"purpose=%00", "purpose=%ff%fe", "purpose=batch%00"} {
			if r := e.do(http.MethodGet, "/v1/files?"+q, nil, ""); r.status != http.StatusBadRequest {
				t.Errorf("GET /v1/files?%s: %d %s; want 400", q, r.status, r.body)
			}
		}
		for _, q := range []string{"limit=10000", "limit=1", "order=asc", "purpose=fine-tune", "purpose=%C3%A9"} {
			if r := e.do(http.MethodGet, "/v1/files?"+q, nil, ""); r.status != http.StatusOK {
				t.Errorf("GET /v1/files?%s: %d %s; want 200", q, r.status, r.body)
			}
		}
		if r := e.do(http.MethodGet, "/v1/files?after=file-0123456789abcdef01234567", nil, ""); r.status != http.StatusNotFound {
			t.Errorf("after= no file: %d %s; want 404", r.status, r.body)
		}
	})
}

// TestFileDelete_Races: on both dialects, two DELETEs of one file:
// exactly one is 200; and a DELETE racing POST /v1/batches of a file of
// two parts never leaves a batch made of part of it.
func TestFileDelete_Races(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		for round := range 10 {
			f := e.upload("", "batch", "in.jsonl", chatLine("a", "x")).file(t)
			var wg sync.WaitGroup
			status := make([]int, 4)
			for i := range status {
				wg.Go(func() { status[i] = e.do(http.MethodDelete, "/v1/files/"+f.ID, nil, "").status })
			}
			wg.Wait()
			ok, notFound := 0, 0
			for _, s := range status {
				switch s {
				case http.StatusOK:
					ok++
				case http.StatusNotFound:
					notFound++
				}
			}
			if ok != 1 || notFound != len(status)-1 {
				t.Errorf("round %d: racing DELETEs answered %v; want one 200, the rest 404", round, status)
			}
		}

		var b strings.Builder
		lines := 0
		for ; b.Len() < store.FilePartBytes*2+1000; lines++ {
			b.WriteString(sizedChatLine(t, fmt.Sprintf("c%05d", lines), 333))
		}
		seen := map[int]int{}
		for round := range 8 {
			f := e.upload("", "batch", "in.jsonl", b.String()).file(t)
			var wg sync.WaitGroup
			var create reply
			wg.Go(func() { create = e.createBatch("", createBody(f.ID, "")) })
			wg.Go(func() {
				// A little after the create began reading.
				for range round * 3 {
					e.do(http.MethodGet, "/v1/files?limit=1", nil, "")
				}
				if r := e.do(http.MethodDelete, "/v1/files/"+f.ID, nil, ""); r.status != http.StatusOK {
					t.Errorf("DELETE: %d %s", r.status, r.body)
				}
			})
			wg.Wait()
			seen[create.status]++
			var n int
			if err := st.DB().QueryRowContext(t.Context(), st.Rebind(`SELECT COUNT(*) FROM jobs j JOIN batches b ON b.id = j.batch_id WHERE b.input_file_id = $1`), f.ID).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if (create.status == http.StatusOK && n != lines) || (create.status != http.StatusOK && n != 0) {
				t.Errorf("round %d: create %d %s made a batch of %d jobs; want all %d lines or none", round, create.status, create.body, n, lines)
			}
			if create.status != http.StatusOK && create.status != http.StatusNotFound {
				t.Errorf("round %d: create racing DELETE: %d %.300s; want 200 (made before the delete) or 404 (the file deleted)", round, create.status, create.body)
			}
		}
		t.Logf("POST /v1/batches racing DELETE answered %v", seen)
	})
}
