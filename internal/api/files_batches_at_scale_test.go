package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// The scale and resource side of the Files and Batches API
// (docs/batches.md): memory of large uploads and downloads, a cancel of a
// large batch, list pagination over many batches, concurrent uploads and
// creates, a client that hangs up mid-upload, and uploads and downloads
// slower than serve's timeouts. Cancels racing completions are in
// openai_batch_cancel_races_test.go.

// ---- memory probe ----

// memProbe measures the process's Go heap around one operation: TotalAlloc
// and Mallocs (runtime.ReadMemStats before/after), the peak of live heap
// objects over the start (sampled every millisecond through runtime/metrics,
// which does not stop the world), and the peak RSS over the start
// (/proc/self/status VmHWM, reset through /proc/self/clear_refs; it
// includes SQLite's C-side memory, which the Go heap does not).
type memProbe struct {
	before  runtime.MemStats
	peak    atomic.Uint64
	stop    chan struct{}
	done    chan struct{}
	rssBase int64
}

type memCost struct {
	TotalAlloc, Mallocs, PeakHeapOver uint64
	PeakRSSOver                       int64
}

func (r memCost) String() string {
	return fmt.Sprintf("TotalAlloc %.1f MiB, Mallocs %d, peak live heap +%.1f MiB, peak RSS +%.1f MiB",
		float64(r.TotalAlloc)/(1<<20), r.Mallocs, float64(r.PeakHeapOver)/(1<<20), float64(r.PeakRSSOver)/(1<<20))
}

func startMemProbe() *memProbe {
	runtime.GC()
	runtime.GC()
	m := &memProbe{stop: make(chan struct{}), done: make(chan struct{})}
	runtime.ReadMemStats(&m.before)
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets VmHWM to VmRSS (Linux)
	m.rssBase = procStatusBytes("VmRSS")
	m.peak.Store(m.before.HeapAlloc)
	go func() {
		defer close(m.done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > m.peak.Load() {
				m.peak.Store(v)
			}
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *memProbe) end() memCost {
	close(m.stop)
	<-m.done
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	r := memCost{TotalAlloc: after.TotalAlloc - m.before.TotalAlloc, Mallocs: after.Mallocs - m.before.Mallocs}
	if p := m.peak.Load(); p > m.before.HeapAlloc {
		r.PeakHeapOver = p - m.before.HeapAlloc
	}
	if hwm := procStatusBytes("VmHWM"); hwm > 0 {
		r.PeakRSSOver = hwm - m.rssBase
	}
	return r
}

// procStatusBytes is a field of /proc/self/status in bytes (0 when unknown).
func procStatusBytes(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb)
			return kb << 10
		}
	}
	return 0
}

// ---- helpers ----

// eachBackendInTurn runs fn on SQLite, then on PostgreSQL when
// INKWELL_TEST_POSTGRES_URL is set, one after the other (not in parallel:
// memory figures are process-wide).
func eachBackendInTurn(t *testing.T, fn func(t *testing.T, st *store.Store)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})) })
	if os.Getenv(storetest.PostgresEnv) != "" {
		t.Run("postgres", func(t *testing.T) { fn(t, storetest.MustOpen(t, storetest.PostgresDSN(t), store.Options{})) })
	}
}

// repeatedLines reads as n copies of line, allocating nothing.
type repeatedLines struct {
	line []byte
	left int
	off  int
}

func (r *repeatedLines) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.left > 0 {
		c := copy(p[n:], r.line[r.off:])
		n += c
		r.off += c
		if r.off == len(r.line) {
			r.off, r.left = 0, r.left-1
		}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

const bigFormBoundary = "bigFormBoundary7c1f0e9d"

// bigUploadForm is the multipart form around a file's content: purpose
// first, then the file part, whose content goes between head and tail.
func bigUploadForm() (head, tail, contentType string) {
	head = "--" + bigFormBoundary + "\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n" +
		"--" + bigFormBoundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.jsonl\"\r\nContent-Type: application/octet-stream\r\n\r\n"
	return head, "\r\n--" + bigFormBoundary + "--\r\n", "multipart/form-data; boundary=" + bigFormBoundary
}

// uploadStream POSTs /v1/files with content streamed from r, of size
// bytes (announced as Content-Length when announce is set, else chunked).
func uploadStream(t *testing.T, srv *httptest.Server, content io.Reader, size int64, announce bool) reply {
	t.Helper()
	head, tail, ct := bigUploadForm()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/files",
		io.MultiReader(strings.NewReader(head), content, strings.NewReader(tail)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ct)
	req.ContentLength = -1
	if announce {
		req.ContentLength = int64(len(head)+len(tail)) + size
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// spooledUploads is the spooled uploads (inkwell-upload-*) of dir this
// process holds: any file left there by name, and each one open, which
// the upload unlinks as soon as it creates it (files.go, spool), as its
// /proc/self/fd link ("/proc/self/fd/N", which os.Stat follows to the
// file, unlinked or not).
func spooledUploads(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "inkwell-upload-*"))
	if err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to see the open spooled uploads: %v", err)
	}
	for _, fd := range fds {
		link := filepath.Join("/proc/self/fd", fd.Name())
		if target, err := os.Readlink(link); err == nil && strings.HasPrefix(target, filepath.Join(dir, "inkwell-upload-")) {
			m = append(m, link)
		}
	}
	return m
}

func queryCount(t *testing.T, st *store.Store, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := st.DB().QueryRowContext(context.Background(), rebindTest(st, q), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func execWrite(t *testing.T, st *store.Store, q string, args ...any) {
	t.Helper()
	if _, err := st.WriteDB().ExecContext(context.Background(), rebindTest(st, q), args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func batchNum(t *testing.T, id string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscanf(id, "batch_%d", &n); err != nil {
		t.Fatalf("batch id %q: %v", id, err)
	}
	return n
}

// createJobsBatch creates a batch of n /v1/jobs lines through the JSONL form
// (one request) and returns its id.
func createJobsBatch(t *testing.T, e *cancelEnv, key string, n int) int64 {
	t.Helper()
	r := e.postBatch(key, batchBody(n))
	if r.status != http.StatusCreated {
		t.Fatalf("batch of %d lines: %d %s", n, r.status, r.body)
	}
	return r.batch(t).ID
}

// markBatchDone ends every job of batch id done, as a lane's completion
// would leave it (an attempt, a result with the whole answer), in three
// statements instead of n completions.
func markBatchDone(t *testing.T, st *store.Store, id int64) {
	t.Helper()
	execWrite(t, st, `INSERT INTO job_attempts (job_id, attempt_number, status, lane, started_at, finished_at)
		SELECT id, 1, 'done', 'lane-a', created_at, created_at FROM jobs WHERE batch_id = $1`, id)
	execWrite(t, st, `INSERT INTO results (job_id, attempt_id, text, created_at, response, model, finish_reason, prompt_tokens, completion_tokens)
		SELECT j.id, a.id, 'Ink dries slowly', j.created_at, '`+answer+`', 'gpt-4o-mini', 'stop', 9, 4
		FROM jobs j JOIN job_attempts a ON a.job_id = j.id WHERE j.batch_id = $1`, id)
	execWrite(t, st, `UPDATE jobs SET status = 'done', lane = 'lane-a', started_at = created_at, finished_at = created_at WHERE batch_id = $1`, id)
}

// ---- upload memory ----

// TestFiles_LargeUploadIsStreamedNotReadIntoMemory: an upload of ~90 MB
// (50,000 lines of 1,800 bytes) is kept whole, reads back whole, and
// leaves no temporary file; one of 101 MB streamed without Content-Length
// is 413, writes nothing and leaves no temporary file. It reports the
// heap and RSS each costs; of memory, it asserts only that the refused
// upload does not allocate anything like its size (docs/batches.md: "a
// 100 MB file never sits in memory").
func TestFiles_LargeUploadIsStreamedNotReadIntoMemory(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("uploads 90 MB and 101 MB")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	eachBackendInTurn(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		line := append(bytes.Repeat([]byte("x"), 1799), '\n')
		const lines = api.MaxBatchLines
		size := int64(len(line) * lines)

		start := time.Now()
		m := startMemProbe()
		r := uploadStream(t, e.srv, &repeatedLines{line: line, left: lines}, size, true)
		got := m.end()
		f := r.file(t)
		if f.Bytes != size {
			t.Errorf("stored %d bytes, want %d", f.Bytes, size)
		}
		t.Logf("upload of %.1f MB (%d lines, Content-Length): %s, %v", float64(size)/1e6, lines, got, time.Since(start).Round(time.Millisecond))
		if left := spooledUploads(t, tmp); len(left) != 0 {
			t.Errorf("temporary files left after a stored upload: %v", left)
		}

		// Read it back: streamed one part at a time?
		m = startMemProbe()
		resp, err := e.srv.Client().Get(e.srv.URL + "/v1/files/" + f.ID + "/content")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got = m.end()
		t.Logf("download of the same file: %d bytes, %s", n, got)
		if n != size {
			t.Errorf("content: %d bytes, want %d", n, size)
		}

		before := e.snapshot()
		overSize := int64(api.MaxBatchBytes + 1<<20)
		big := &repeatedLines{line: line, left: int(overSize / int64(len(line)))}
		big.left = min(big.left, lines) // stay under the line limit: the byte limit must refuse it
		big.line = append(bytes.Repeat([]byte("x"), int(overSize/int64(lines))-1), '\n')
		m = startMemProbe()
		r = uploadStream(t, e.srv, big, 0, false)
		got = m.end()
		assertError(t, r, http.StatusRequestEntityTooLarge, inkwell.ETOOLARGE)
		t.Logf("refused upload of %.1f MB (chunked): %s", float64(len(big.line)*lines)/1e6, got)
		if got.TotalAlloc > 32<<20 {
			t.Errorf("a refused %d-byte upload allocated %d bytes of Go heap: it is read into memory, not streamed", len(big.line)*lines, got.TotalAlloc)
		}
		if left := spooledUploads(t, tmp); len(left) != 0 {
			t.Errorf("temporary files left after a refused upload: %v", left)
		}
		e.assertUnchanged("a refused 101 MB upload", before)
	})
}

// ---- large output download, large cancel ----

// TestFiles_OutputOf20000LinesIsWholeAndInOrder: a batch of 20,000 done
// lines; GET /v1/files/{id}/content and GET /v1/files/{id} (which counts
// the bytes by making the file) are measured. The content must come whole
// and in line order, and the file object's size must be the content's.
// The allocations and the peak live heap while it is sent are logged,
// not asserted (see below why a bound there would fail by the noise).
func TestFiles_OutputOf20000LinesIsWholeAndInOrder(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("a batch of 20,000 lines")
	}
	eachBackendInTurn(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		const lines = 20_000
		start := time.Now()
		id := createJobsBatch(t, e, "big-output", lines)
		t.Logf("JSONL create of %d lines: %v", lines, time.Since(start).Round(time.Millisecond))
		markBatchDone(t, st, id)
		fileID := fmt.Sprintf("file-batch_%d-output", id)

		m := startMemProbe()
		start = time.Now()
		resp, err := e.srv.Client().Get(e.srv.URL + "/v1/files/" + fileID + "/content")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var n, size int
		prev := int64(0)
		for sc.Scan() {
			n++
			size += len(sc.Bytes()) + 1
			var l struct{ ID, CustomID string }
			if err := json.Unmarshal(sc.Bytes(), &struct {
				ID       *string `json:"id"`
				CustomID *string `json:"custom_id"`
			}{&l.ID, &l.CustomID}); err != nil {
				t.Fatalf("line %d: %v", n, err)
			}
			var job int64
			fmt.Sscanf(l.ID, "batch_req_%d", &job)
			if job <= prev || l.CustomID != fmt.Sprintf("line-%d", n) {
				t.Fatalf("line %d: %s %s after job %d: not in line order", n, l.ID, l.CustomID, prev)
			}
			prev = job
		}
		resp.Body.Close()
		elapsed := time.Since(start)
		got := m.end()
		if n != lines {
			t.Errorf("output has %d lines, want %d", n, lines)
		}
		t.Logf("GET …/content of %d lines, %.1f MB: %v; %s; %.0f bytes and %.1f allocations per line (server and client together)",
			n, float64(size)/1e6, elapsed.Round(time.Millisecond), got, float64(got.TotalAlloc)/float64(lines), float64(got.Mallocs)/float64(lines))
		// The peak live heap is logged, not asserted: it is sampled every
		// millisecond over the whole process (the client's reading too),
		// and near the output's size either way (7.4 MiB for 7.6 MB, once,
		// on a loaded machine), so a bound here would fail by the noise.

		m = startMemProbe()
		start = time.Now()
		f := e.do(http.MethodGet, "/v1/files/"+fileID, nil, "").file(t)
		got = m.end()
		t.Logf("GET /v1/files/%s (bytes counted by making it: %d): %v; %s", fileID, f.Bytes, time.Since(start).Round(time.Millisecond), got)
		if f.Bytes != int64(size) {
			t.Errorf("file object says %d bytes, the content is %d", f.Bytes, size)
		}
	})
}

// TestOpenAIBatch_CancelOf20000LinesEndsEveryLine: a cancel of a
// 20,000-line batch ends every line in one go, and its error file is
// 20,000 lines.
func TestOpenAIBatch_CancelOf20000LinesEndsEveryLine(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("a batch of 20,000 lines")
	}
	eachBackendInTurn(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		const lines = 20_000
		id := createJobsBatch(t, e, "big-cancel", lines)
		start := time.Now()
		c := e.do(http.MethodPost, fmt.Sprintf("/v1/batches/batch_%d/cancel", id), nil, "").openAIBatch(t)
		t.Logf("cancel of %d queued lines: %v", lines, time.Since(start).Round(time.Millisecond))
		if c.Status != "cancelled" || c.RequestCounts != (api.BatchRequestCounts{Total: lines, Failed: lines}) || c.ErrorFileID == nil {
			t.Fatalf("cancel answered %+v", c)
		}
		if n := queryCount(t, st, `SELECT COUNT(*) FROM audit_log WHERE job_id IN (SELECT id FROM jobs WHERE batch_id = $1)`, id); n != lines {
			t.Errorf("%d audit rows, want one per line (%d)", n, lines)
		}
		m := startMemProbe()
		resp, err := e.srv.Client().Get(e.srv.URL + "/v1/files/" + *c.ErrorFileID + "/content")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := m.end()
		if n := bytes.Count(b, []byte("\n")); n != lines {
			t.Errorf("error file has %d lines, want %d", n, lines)
		}
		t.Logf("error file, %d lines, %.1f MB (client buffers it whole): %s", lines, float64(len(b))/1e6, got)
	})
}

// ---- list pagination over many batches ----

// TestOpenAIBatch_ListPagesThousandsOfBatchesPerAccount: 2,000 batches
// of two accounts (inserted directly, plus one each made through the
// API); each account's client token pages through its own with limit 7
// and 100 (globex's also with limit 1): newest first, no duplicates, no
// gaps, first_id and last_id those of the page, has_more false on the
// last page only; the operator sees all. A bad limit or after is 400, an
// empty limit the default 20; an after that names no batch, or another
// account's, is read as a position.
func TestOpenAIBatch_ListPagesThousandsOfBatchesPerAccount(t *testing.T) {
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		for _, name := range []string{"acme", "globex"} {
			if _, err := st.CreateAccount(ctx, store.Account{Name: name}); err != nil {
				t.Fatal(err)
			}
		}
		tok := map[string]string{}
		for _, a := range []string{"acme", "globex"} {
			_, text, err := st.CreateToken(ctx, a, store.RoleClient)
			if err != nil {
				t.Fatal(err)
			}
			tok[a] = text
		}
		_, op, err := st.CreateToken(ctx, inkwell.DefaultAccount, store.RoleOperator)
		if err != nil {
			t.Fatal(err)
		}
		tok["operator"] = op
		e := oaEnv(t, st, api.Config{Auth: api.AuthAuto})
		auth := func(who string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok[who]} }
		// One real batch each, made through the API, then 2,000 rows.
		for _, a := range []string{"acme", "globex"} {
			h := auth(a)
			h["Content-Type"] = "application/jsonl"
			h["Idempotency-Key"] = "real-" + a
			if r := e.do(http.MethodPost, "/v1/batches", h, batchBody(1)); r.status != http.StatusCreated {
				t.Fatalf("batch of %s: %d %s", a, r.status, r.body)
			}
		}
		execWrite(t, st, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
			INSERT INTO batches (account, idempotency_key, request_hash, lines, created_at)
			SELECT CASE WHEN i % 3 = 0 THEN 'globex' ELSE 'acme' END, 'bulk-' || CAST(i AS TEXT), 'h', 1, (SELECT MIN(created_at) FROM batches) FROM n`)
		want := map[string][]string{}
		rows, err := st.DB().QueryContext(ctx, `SELECT id, account FROM batches ORDER BY id DESC`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			var a string
			if err := rows.Scan(&id, &a); err != nil {
				t.Fatal(err)
			}
			want[a] = append(want[a], fmt.Sprintf("batch_%d", id))
			want["operator"] = append(want["operator"], fmt.Sprintf("batch_%d", id))
		}
		rows.Close()

		list := func(who, query string) api.BatchList {
			t.Helper()
			r := e.do(http.MethodGet, "/v1/batches"+query, auth(who), "")
			var l api.BatchList
			dec := json.NewDecoder(bytes.NewReader(r.body))
			dec.DisallowUnknownFields()
			if r.status != http.StatusOK || dec.Decode(&l) != nil || l.Object != "list" {
				t.Fatalf("%s GET /v1/batches%s: %d %s", who, query, r.status, r.body)
			}
			return l
		}
		pages := func(who string, limit int) (ids []string, nPages int) {
			t.Helper()
			query := fmt.Sprintf("?limit=%d", limit)
			for {
				l := list(who, query)
				nPages++
				if len(l.Data) > limit {
					t.Fatalf("%s limit %d: a page of %d", who, limit, len(l.Data))
				}
				for _, b := range l.Data {
					ids = append(ids, b.ID)
				}
				if len(l.Data) > 0 && (l.FirstID == nil || l.LastID == nil || *l.FirstID != l.Data[0].ID || *l.LastID != l.Data[len(l.Data)-1].ID) {
					t.Errorf("%s limit %d: first_id/last_id do not match the page", who, limit)
				}
				if !l.HasMore {
					if len(ids) < len(want[who]) {
						t.Errorf("%s limit %d: has_more false after %d of %d batches", who, limit, len(ids), len(want[who]))
					}
					return ids, nPages
				}
				if len(l.Data) == 0 || nPages > 3000 {
					t.Fatalf("%s limit %d: has_more true on an empty page, or no end", who, limit)
				}
				query = fmt.Sprintf("?limit=%d&after=%s", limit, *l.LastID)
			}
		}
		start := time.Now()
		for _, who := range []string{"acme", "globex", "operator"} {
			for _, limit := range []int{7, 100} {
				got, n := pages(who, limit)
				if !slices.Equal(got, want[who]) {
					t.Errorf("%s limit %d: %d ids over %d pages, want %d (newest first, each once, only its own)", who, limit, len(got), n, len(want[who]))
				}
			}
		}
		got, n := pages("globex", 1)
		if !slices.Equal(got, want["globex"]) {
			t.Errorf("globex limit 1: %d ids over %d pages, want %d", len(got), n, len(want["globex"]))
		}
		t.Logf("%d batches paged (7, 100, and globex by 1: %d pages) in %v", len(want["operator"]), n, time.Since(start).Round(time.Millisecond))

		// A page that ends exactly at the last batch says has_more false.
		if l := list("acme", fmt.Sprintf("?limit=%d&after=%s", 3, want["acme"][len(want["acme"])-4])); len(l.Data) != 3 || l.HasMore {
			t.Errorf("the last 3 of acme's: %d, has_more %v; want 3, false", len(l.Data), l.HasMore)
		}
		for _, q := range []string{"?limit=0", "?limit=-1", "?limit=101", "?limit=x", "?limit=", "?after=batch_0", "?after=batch_-1", "?after=7", "?after=batch_99999999999999999999", "?after=file-1"} {
			if q == "?limit=" {
				if l := list("acme", q); len(l.Data) != 20 {
					t.Errorf("an empty limit: %d batches, want the default 20", len(l.Data))
				}
				continue
			}
			assertError(t, e.do(http.MethodGet, "/v1/batches"+q, auth("acme"), ""), http.StatusBadRequest, inkwell.EINVALID)
		}
		// An after no batch has (past the newest): the page from the newest,
		// as if after were a position; another account's id works as one too.
		if l := list("acme", "?limit=2&after=batch_999999"); len(l.Data) != 2 || l.Data[0].ID != want["acme"][0] {
			t.Errorf("after an unknown id: %+v", l.Data)
		}
		if l := list("acme", "?limit=1&after="+want["globex"][0]); len(l.Data) != 1 {
			t.Errorf("after globex's newest, for acme: %+v", l.Data)
		}
	})
}

// ---- concurrency ----

// TestOpenAIBatch_ConcurrentUploadsAndCreatesAreOnePerKey: 8 uploads at
// once are 8 files; 8 creates of one file under one Idempotency-Key are
// one batch; under 8 keys 8 batches; without a key one batch. No 5xx
// anywhere, and exactly the jobs of the batches made.
func TestOpenAIBatch_ConcurrentUploadsAndCreatesAreOnePerKey(t *testing.T) {
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		const n, lines = 8, 5
		var content strings.Builder
		for i := range lines {
			content.WriteString(chatLine(fmt.Sprint("c", i), "poem"))
		}
		form, ct := uploadForm(t, "batch", "in.jsonl", content.String())
		par := func(f func(i int) reply) []reply {
			out := make([]reply, n)
			var wg sync.WaitGroup
			gate := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate
					out[i] = f(i)
				}()
			}
			close(gate)
			wg.Wait()
			return out
		}
		ups := par(func(int) reply {
			return e.do(http.MethodPost, "/v1/files", map[string]string{"Content-Type": ct}, form)
		})
		ids := map[string]bool{}
		for _, r := range ups {
			if r.status != http.StatusOK {
				t.Fatalf("a concurrent upload: %d %s", r.status, r.body)
			}
			ids[r.file(t).ID] = true
		}
		if len(ids) != n || queryCount(t, st, `SELECT COUNT(*) FROM files`) != n ||
			queryCount(t, st, `SELECT COUNT(*) FROM file_parts`) != n {
			t.Errorf("%d concurrent uploads: %d ids, %d files, %d parts", n, len(ids),
				queryCount(t, st, `SELECT COUNT(*) FROM files`), queryCount(t, st, `SELECT COUNT(*) FROM file_parts`))
		}
		var files []string
		for id := range ids {
			files = append(files, id)
		}
		slices.Sort(files)

		batchesOf := func(what string, rs []reply) map[string]bool {
			t.Helper()
			out := map[string]bool{}
			for _, r := range rs {
				if r.status != http.StatusOK {
					t.Errorf("%s: %d %s", what, r.status, r.body)
					continue
				}
				out[r.openAIBatch(t).ID] = true
			}
			return out
		}
		same := batchesOf("8 creates, one key", par(func(int) reply { return e.createBatch("same-key", createBody(files[0], "")) }))
		other := batchesOf("8 creates, 8 keys", par(func(i int) reply { return e.createBatch(fmt.Sprint("key-", i), createBody(files[1], "")) }))
		derived := batchesOf("8 creates, no key", par(func(int) reply { return e.createBatch("", createBody(files[2], "")) }))
		if len(same) != 1 || len(other) != n || len(derived) != 1 {
			t.Errorf("batches: one key %d, 8 keys %d, no key %d; want 1, %d, 1", len(same), len(other), len(derived), n)
		}
		if b, j := queryCount(t, st, `SELECT COUNT(*) FROM batches`), queryCount(t, st, `SELECT COUNT(*) FROM jobs`); b != n+2 || j != (n+2)*lines {
			t.Errorf("%d batches, %d jobs; want %d, %d", b, j, n+2, (n+2)*lines)
		}
		// The same key with another file, raced against its first use: one
		// batch, and the others 422.
		codes := map[int]int{}
		for _, r := range par(func(i int) reply { return e.createBatch("race-key", createBody(files[3+i%2], "")) }) {
			codes[r.status]++
		}
		if codes[http.StatusOK] != n/2 || codes[http.StatusUnprocessableEntity] != n/2 {
			t.Errorf("one key, two files, raced: %v; want %d × 200 and %d × 422", codes, n/2, n/2)
		}
	})
}

// TestBatch_ConcurrentCreatesStayWithinMaxQueued: with serve --max-queued
// 100, 8 batches of 30 lines created at once: "a batch is accepted only if
// the jobs already queued plus its lines are at most N" (docs/batches.md),
// so at most 3 are accepted and never more than 100 jobs are queued.
// Admissions take turns (store admitBatch), so the first 3 to commit fit
// (30, 60, 90 queued) and are accepted: exactly 3.
func TestBatch_ConcurrentCreatesStayWithinMaxQueued(t *testing.T) {
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{MaxQueued: 100})
		const n, lines = 8, 30
		var wg sync.WaitGroup
		gate := make(chan struct{})
		statuses := make([]int, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				r := e.postBatch(fmt.Sprint("mq-", i), batchBody(lines))
				statuses[i] = r.status
			}()
		}
		close(gate)
		wg.Wait()
		accepted := 0
		for _, s := range statuses {
			switch s {
			case http.StatusCreated:
				accepted++
			case http.StatusTooManyRequests:
			default:
				t.Errorf("a batch under --max-queued: %d", s)
			}
		}
		queued := queryCount(t, st, `SELECT COUNT(*) FROM jobs WHERE status = 'queued'`)
		t.Logf("%d of %d batches accepted, %d jobs queued (limit 100)", accepted, n, queued)
		if accepted > 3 || queued > 100 {
			t.Errorf("%d batches of %d lines accepted at once, %d jobs queued: past --max-queued 100", accepted, lines, queued)
		} else if accepted < 3 || queued != int64(accepted*lines) {
			t.Errorf("%d batches of %d lines accepted at once, %d jobs queued: want 3 accepted (%d jobs), the batches that fit under --max-queued 100", accepted, lines, queued, 3*lines)
		}
	})
}

// TestFiles_UploadCutShortLeavesNothing: a client that hangs up half-way
// through a multipart upload leaves nothing: no row, no temporary file.
func TestFiles_UploadCutShortLeavesNothing(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	eachBackendInTurn(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		before := e.snapshot()
		for _, chunked := range []bool{false, true} {
			conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			head, tail, ct := bigUploadForm()
			const total = 50 << 20
			te := fmt.Sprintf("Content-Length: %d\r\n", len(head)+len(tail)+total)
			if chunked {
				te = "Transfer-Encoding: chunked\r\n"
			}
			fmt.Fprintf(conn, "POST /v1/files HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\n%s\r\n", e.srv.Listener.Addr(), ct, te)
			body := []byte(head + strings.Repeat(strings.Repeat("y", 1023)+"\n", 5<<10)) // 5 MiB of the 50
			if chunked {
				fmt.Fprintf(conn, "%x\r\n", len(body))
				body = append(body, "\r\n"...)
			}
			if _, err := conn.Write(body); err != nil {
				t.Fatal(err)
			}
			storetest.WaitFor(t, 5*time.Second, "the upload spooled to a temporary file", func() bool {
				for _, p := range spooledUploads(t, tmp) {
					if fi, err := os.Stat(p); err == nil && fi.Size() > 1<<20 {
						return true
					}
				}
				return false
			})
			conn.Close()
			storetest.WaitFor(t, 5*time.Second, "the temporary file removed", func() bool { return len(spooledUploads(t, tmp)) == 0 })
		}
		e.assertUnchanged("uploads cut short by the client", before)
	})
}

// ---- timeouts of serve (cmd/inkwell/serve.go) ----

// serverWithServeTimeouts serves the api as serve does, with its
// ReadTimeout and WriteTimeout scaled down to d.
func serverWithServeTimeouts(t *testing.T, st *store.Store, d time.Duration) *httptest.Server {
	t.Helper()
	a := api.New(api.Config{Store: st, Logger: storetest.TestLogger(t)})
	a.SetReady(true)
	srv := httptest.NewUnstartedServer(a)
	srv.Config.ReadHeaderTimeout, srv.Config.ReadTimeout, srv.Config.WriteTimeout = d, d, 2*d
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// TestFiles_SlowUploadOutlivesTheServersReadTimeout: serve's ReadTimeout
// (30 s) covers the whole request body. POST /v1/files did not extend it
// as the long-poll extends its write deadline (wait.go), so a 100 MB
// upload that took longer than 30 s (under 3.5 MB/s) was cut and could
// never be stored; it now pushes the deadline out (transfer.go,
// allowTransfer). Here, scaled: ReadTimeout 300 ms, an upload sent over
// ~1 s, which must be stored.
func TestFiles_SlowUploadOutlivesTheServersReadTimeout(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	srv := serverWithServeTimeouts(t, st, 300*time.Millisecond)
	head, tail, ct := bigUploadForm()
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.WriteString(pw, head)
		for i := range 10 {
			time.Sleep(100 * time.Millisecond)
			if _, err := io.WriteString(pw, chatLine(fmt.Sprint("s", i), "slow")); err != nil {
				return
			}
		}
		_, _ = io.WriteString(pw, tail)
		pw.Close()
	}()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/files", pr)
	req.Header.Set("Content-Type", ct)
	resp, err := srv.Client().Do(req)
	pr.CloseWithError(errors.New("done"))
	if err != nil {
		t.Fatalf("an upload slower than ReadTimeout: %v (the server cut the connection)", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("an upload slower than ReadTimeout: %d %s; want 200 (serve's ReadTimeout is 30 s: a 100 MB upload under 3.5 MB/s fails)", resp.StatusCode, b)
	}
}

// TestFiles_SlowDownloadOutlivesTheServersWriteTimeout: serve's
// WriteTimeout (1 min) covers the whole answer. …/content did not extend
// it, so an output file that took longer than a minute to read
// (docs/batches.md: "50,000 long answers can be hundreds of MB") was cut
// short, silently (the client saw a truncated body); it now pushes the
// deadline out (transfer.go, allowTransfer). Scaled: WriteTimeout 600 ms,
// a client that starts reading 20,000 lines (~9 MB, more than loopback's
// socket buffers hold) after 1 s, and must read them all.
func TestFiles_SlowDownloadOutlivesTheServersWriteTimeout(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	e := oaEnv(t, st, api.Config{})
	const lines = 20_000
	id := createJobsBatch(t, e, "slow-read", lines)
	markBatchDone(t, st, id)
	srv := serverWithServeTimeouts(t, st, 300*time.Millisecond)
	resp, err := srv.Client().Get(fmt.Sprintf("%s/v1/files/file-batch_%d-output/content", srv.URL, id))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	time.Sleep(time.Second)
	var n, size int
	buf := make([]byte, 16<<10)
	var rerr error
	for {
		k, err := resp.Body.Read(buf)
		n += bytes.Count(buf[:k], []byte("\n"))
		size += k
		if err != nil {
			rerr = err
			break
		}
	}
	if n != lines || !errors.Is(rerr, io.EOF) {
		t.Errorf("a slow reader of a %d-line output got %d lines, %d bytes (%v): cut at serve's WriteTimeout", lines, n, size, rerr)
	}
}
