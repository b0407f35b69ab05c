package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Adversarial tests of the OpenAI Files and Batches API against real
// `inkwell serve` children on PostgreSQL, killed with SIGKILL.

// pgbUpload posts content as a batch input file and returns its id.
func pgbUpload(t *testing.T, url, content string) string {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if err := mw.WriteField("purpose", "batch"); err != nil {
		t.Fatal(err)
	}
	fw, err := mw.CreateFormFile("file", "requests.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(fw, content)
	mw.Close()
	resp, err := http.Post(url+"/v1/files", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var f struct{ ID string }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &f) != nil || f.ID == "" {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	return f.ID
}

// pgbDo sends one request and returns its status and body.
func pgbDo(t *testing.T, method, url string, header map[string]string, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

type pgbBatch struct {
	ID            string  `json:"id"`
	Status        string  `json:"status"`
	OutputFileID  *string `json:"output_file_id"`
	ErrorFileID   *string `json:"error_file_id"`
	RequestCounts struct {
		Total, Completed, Failed int64
	} `json:"request_counts"`
}

func pgbCreate(t *testing.T, url, fileID string, header map[string]string) (int, pgbBatch, []byte) {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	for k, v := range header {
		h[k] = v
	}
	code, b := pgbDo(t, http.MethodPost, url+"/v1/batches", h,
		fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/chat/completions","completion_window":"24h"}`, fileID))
	var out pgbBatch
	if code == http.StatusOK {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("batch object %s: %v", b, err)
		}
	}
	return code, out, b
}

func pgbGet(t *testing.T, url, id string) pgbBatch {
	t.Helper()
	code, b := pgbDo(t, http.MethodGet, url+"/v1/batches/"+id, nil, "")
	var out pgbBatch
	if code != http.StatusOK || json.Unmarshal(b, &out) != nil {
		t.Fatalf("GET batch %s: %d %s", id, code, b)
	}
	return out
}

type pgbLine struct {
	ID       string `json:"id"`
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int    `json:"status_code"`
		RequestID  string `json:"request_id"`
	} `json:"response"`
	Error *struct{ Code string } `json:"error"`
}

// pgbFile reads a virtual file's lines ("" id: none).
func pgbFile(t *testing.T, url string, id *string) []pgbLine {
	t.Helper()
	if id == nil {
		return nil
	}
	code, b := pgbDo(t, http.MethodGet, url+"/v1/files/"+*id+"/content", nil, "")
	if code != http.StatusOK {
		t.Fatalf("file %s: %d %s", *id, code, b)
	}
	var out []pgbLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l pgbLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %s: %v", sc.Bytes(), err)
		}
		out = append(out, l)
	}
	return out
}

func pgbChatLines(prefix, account string, n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"custom_id":"%s-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"writer","account":%q,"messages":[{"role":"user","content":"note %d"}],"max_tokens":20}}`+"\n", prefix, i, account, i)
	}
	return b.String()
}

func pgbScalar(t *testing.T, st *store.Store, q string) int64 {
	t.Helper()
	var n int64
	if err := st.DB().QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestBatchKill9Postgres: a batch on PostgreSQL, its serve killed
// with SIGKILL while calls are in flight and lines are done, one line
// cancelled alone; after a restart and a retry of the lines recovery
// closed, the batch completes: every custom_id exactly once across the
// output and error files, request_counts equal to those files, one charge
// per done line and one provider bill per charge, and the account's
// budget back to spent = the charges, nothing left reserved.
func TestBatchKill9Postgres(t *testing.T) {
	t.Parallel()
	const lines = 8
	dsn := storetest.PostgresDSN(t)
	st := storetest.MustOpen(t, dsn, store.Options{})
	budget := int64(1_000_000_000)
	if _, err := st.CreateAccount(t.Context(), store.Account{Name: "acme", BudgetMicros: &budget}); err != nil {
		t.Fatal(err)
	}
	sim := simtest.MustStart(t, providersim.Config{Latency: 400 * time.Millisecond})
	cfg := chatConfig(t, sim.URL)
	args := []string{"--config", cfg, "--concurrency", "2", "--grace", "1s", "--heartbeat", "200ms", "--poll", "50ms"}
	srv := startServe(t, dsn, args...)

	fileID := pgbUpload(t, srv.URL, pgbChatLines("line", "acme", lines))
	code, b, body := pgbCreate(t, srv.URL, fileID, nil)
	if code != http.StatusOK {
		t.Fatalf("create: %d %s", code, body)
	}
	// One queued line cancelled alone: an error line.
	lastJob := pgbScalar(t, st, `SELECT MAX(id) FROM jobs`)
	if c, out := pgbDo(t, http.MethodPost, fmt.Sprintf("%s/v1/jobs/%d/cancel", srv.URL, lastJob), nil, ""); c != http.StatusOK {
		t.Fatalf("cancel job %d: %d %s", lastJob, c, out)
	}
	waitFor(t, "a line done and calls in flight", func() bool {
		return len(idsWhere(t, st, `status = 'done'`)) >= 1 && len(idsWhere(t, st, `status = 'running'`)) >= 1
	})
	srv.Signal(t, syscall.SIGKILL)
	srv = startServe(t, dsn, args...)
	restarted := idsWhere(t, st, `status = 'failed' AND error_class = 'worker_restarted'`)
	if len(restarted) == 0 {
		t.Fatalf("no job closed by recovery after the kill")
	}
	for _, id := range restarted {
		if c, out := pgbDo(t, http.MethodPost, fmt.Sprintf("%s/v1/jobs/%d/retry", srv.URL, id), nil, ""); c != http.StatusOK {
			t.Fatalf("retry %d: %d %s", id, c, out)
		}
	}
	waitFor(t, "the batch completed", func() bool { b = pgbGet(t, srv.URL, b.ID); return b.Status == "completed" })

	out, errs := pgbFile(t, srv.URL, b.OutputFileID), pgbFile(t, srv.URL, b.ErrorFileID)
	seen := map[string]int{}
	for _, l := range out {
		seen[l.CustomID]++
		if l.Response == nil || l.Response.StatusCode != 200 || l.Error != nil {
			t.Errorf("output line %+v: want a 200 response", l)
		}
	}
	for _, l := range errs {
		seen[l.CustomID]++
		if l.Error == nil || l.Error.Code != "cancelled" || l.Response != nil {
			t.Errorf("error line %+v: want the cancelled line", l)
		}
	}
	for i := 1; i <= lines; i++ {
		if n := seen[fmt.Sprintf("line-%d", i)]; n != 1 {
			t.Errorf("line-%d appears %d times across output and errors, want once", i, n)
		}
	}
	if b.RequestCounts.Total != lines || b.RequestCounts.Completed != int64(len(out)) || b.RequestCounts.Failed != int64(len(errs)) || len(errs) != 1 {
		t.Errorf("request_counts %+v; output %d lines, errors %d lines; want them equal, 1 error", b.RequestCounts, len(out), len(errs))
	}
	charges := pgbScalar(t, st, `SELECT COUNT(*) FROM charges`)
	if charges != int64(len(out)) {
		t.Errorf("%d charges for %d done lines", charges, len(out))
	}
	ledger := sim.MustLedger(t)
	if ledger.TotalBills != charges {
		t.Errorf("the provider billed %d times, %d charges (ledger %+v)", ledger.TotalBills, charges, ledger.Entries)
	}
	for _, l := range out {
		if e, ok := ledger.Request(l.Response.RequestID); !ok || e.Bills != 1 {
			t.Errorf("line %s request %s: ledger %+v (%v), want billed once", l.CustomID, l.Response.RequestID, e, ok)
		}
	}
	var reserved, spent int64
	if err := st.DB().QueryRowContext(t.Context(), `SELECT reserved_micros, spent_micros FROM accounts WHERE name = 'acme'`).Scan(&reserved, &spent); err != nil {
		t.Fatal(err)
	}
	sum := pgbScalar(t, st, `SELECT COALESCE(SUM(amount_micros), 0) FROM charges`)
	if reserved != 0 || spent != sum {
		t.Errorf("account acme: reserved %d, spent %d; want 0 reserved, spent = the charges, %d", reserved, spent, sum)
	}
}

// TestBatchCancelTwoLanesPostgres: two serve processes (lanes A
// and B) share one PostgreSQL database and run a batch against a slow
// provider; the batch is cancelled through A while both lanes have calls
// in flight and lines are done. Throughout, a batch answered "cancelled"
// has every line ended; afterwards every line is ended once, each done
// line has one charge billed once, no failed line has a charge, the
// account's reserved money is exactly its open reservations and its spent
// money the charges, and request_counts match the output and error files.
func TestBatchCancelTwoLanesPostgres(t *testing.T) {
	t.Parallel()
	const lines = 30
	dsn := storetest.PostgresDSN(t)
	st := storetest.MustOpen(t, dsn, store.Options{})
	budget := int64(1_000_000_000)
	if _, err := st.CreateAccount(t.Context(), store.Account{Name: "acme", BudgetMicros: &budget}); err != nil {
		t.Fatal(err)
	}
	sim := simtest.MustStart(t, providersim.Config{Latency: 300 * time.Millisecond})
	cfg := chatConfig(t, sim.URL)
	lane := func(name string) *server {
		return startServe(t, dsn, "--config", cfg, "--lane", name, "--concurrency", "2", "--grace", "1s", "--heartbeat", "100ms", "--poll", "20ms")
	}
	a, b := lane("A"), lane("B")
	fileID := pgbUpload(t, a.URL, pgbChatLines("c", "acme", lines))
	code, batch, body := pgbCreate(t, a.URL, fileID, nil)
	if code != http.StatusOK {
		t.Fatalf("create: %d %s", code, body)
	}
	waitFor(t, "lines done and calls in flight on both lanes", func() bool {
		return pgbScalar(t, st, `SELECT COUNT(*) FROM jobs WHERE status = 'done'`) >= 2 &&
			pgbScalar(t, st, `SELECT COUNT(DISTINCT lane) FROM job_attempts WHERE status = 'running'`) == 2
	})

	// Watch the batch through B while A cancels it. The watcher reads its
	// own copy of the id: the wait below writes batch as it polls.
	stop := make(chan struct{})
	watched := make(chan []string)
	batchID := batch.ID
	go func() {
		var bad []string
		for {
			select {
			case <-stop:
				watched <- bad
				return
			default:
			}
			req, _ := http.NewRequest(http.MethodGet, b.URL+"/v1/batches/"+batchID, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			var o pgbBatch
			json.NewDecoder(resp.Body).Decode(&o)
			resp.Body.Close()
			if o.Status == "cancelled" && o.RequestCounts.Completed+o.RequestCounts.Failed != o.RequestCounts.Total {
				bad = append(bad, fmt.Sprintf("%+v", o))
			}
		}
	}()
	code, body = pgbDo(t, http.MethodPost, a.URL+"/v1/batches/"+batch.ID+"/cancel", nil, "")
	var c pgbBatch
	if code != http.StatusOK || json.Unmarshal(body, &c) != nil || (c.Status != "cancelled" && c.Status != "cancelling") {
		t.Fatalf("cancel: %d %s; want the batch cancelling or cancelled", code, body)
	}
	waitFor(t, "the batch cancelled and no call running", func() bool {
		batch = pgbGet(t, b.URL, batch.ID)
		return batch.Status == "cancelled" && pgbScalar(t, st, `SELECT COUNT(*) FROM job_attempts WHERE status = 'running'`) == 0
	})
	time.Sleep(500 * time.Millisecond) // late answers of aborted calls, if any, reach the lanes
	close(stop)
	if bad := <-watched; len(bad) > 0 {
		t.Errorf("answered cancelled with lines not ended: %v", bad)
	}

	out, errs := pgbFile(t, a.URL, batch.OutputFileID), pgbFile(t, a.URL, batch.ErrorFileID)
	seen := map[string]int{}
	for _, l := range append(append([]pgbLine{}, out...), errs...) {
		seen[l.CustomID]++
	}
	for i := 1; i <= lines; i++ {
		if n := seen[fmt.Sprintf("c-%d", i)]; n != 1 {
			t.Errorf("c-%d appears %d times across output and errors, want once", i, n)
		}
	}
	if batch.RequestCounts.Completed != int64(len(out)) || batch.RequestCounts.Failed != int64(len(errs)) || len(out)+len(errs) != lines {
		t.Errorf("request_counts %+v; files: %d output, %d errors", batch.RequestCounts, len(out), len(errs))
	}
	if n := pgbScalar(t, st, `SELECT COUNT(*) FROM jobs j WHERE j.status = 'done' AND (SELECT COUNT(*) FROM charges c WHERE c.job_id = j.id) != 1`); n != 0 {
		t.Errorf("%d done jobs without exactly one charge", n)
	}
	if n := pgbScalar(t, st, `SELECT COUNT(*) FROM charges c JOIN jobs j ON j.id = c.job_id WHERE j.status != 'done'`); n != 0 {
		t.Errorf("%d charges on jobs not done", n)
	}
	ledger := sim.MustLedger(t)
	charged := map[string]bool{}
	for _, l := range out {
		charged[l.Response.RequestID] = true
		if e, ok := ledger.Request(l.Response.RequestID); !ok || e.Bills != 1 {
			t.Errorf("line %s: ledger %+v (%v), want billed once", l.CustomID, e, ok)
		}
	}
	discarded := 0
	for _, e := range ledger.Entries {
		if !charged[e.RequestID] {
			discarded++
		}
	}
	t.Logf("done %d, failed %d, provider bills %d, billed answers with no charge %d", len(out), len(errs), ledger.TotalBills, discarded)
	var reserved, spent int64
	if err := st.DB().QueryRowContext(t.Context(), `SELECT reserved_micros, spent_micros FROM accounts WHERE name = 'acme'`).Scan(&reserved, &spent); err != nil {
		t.Fatal(err)
	}
	open := pgbScalar(t, st, `SELECT COALESCE(SUM(reservation_micros), 0) FROM jobs WHERE reservation_state = 'open' AND reservation_account = 'acme'`)
	sum := pgbScalar(t, st, `SELECT COALESCE(SUM(amount_micros), 0) FROM charges`)
	if reserved != open || spent != sum {
		t.Errorf("account acme: reserved %d (open reservations %d), spent %d (charges %d)", reserved, open, spent, sum)
	}
}

// TestBatchCancelCrashTwoLanesPostgres: lane A dies (SIGKILL, the
// cancel.after-commit crash point) right after a batch cancel's first
// transaction, while lanes A and B both have calls in flight. B's calls
// go on: their paid answers are kept (done, charged once, billed once);
// A's orphans are rescued by B; the batch reads "cancelling" while a line
// runs and "cancelled" once none does, and a cancel re-sent to B answers
// it cancelled with its cancelled_at set, every line in one of its files.
func TestBatchCancelCrashTwoLanesPostgres(t *testing.T) {
	t.Parallel()
	const lines = 30
	dsn := storetest.PostgresDSN(t)
	st := storetest.MustOpen(t, dsn, store.Options{})
	sim := simtest.MustStart(t, providersim.Config{Latency: 600 * time.Millisecond})
	cfg := chatConfig(t, sim.URL)
	args := func(name string) []string {
		return []string{"serve", "--db", dsn, "--addr", "127.0.0.1:0", "--config", cfg, "--lane", name, "--concurrency", "2", "--grace", "1s",
			"--heartbeat", "100ms", "--poll", "20ms", "--rescue-interval", "100ms"}
	}
	a := StartChild(t, inkwellBin, append(childEnv(), "INKWELL_CRASH_AT=cancel.after-commit"), waitLimit, args("A")...)
	b := StartChild(t, inkwellBin, childEnv(), waitLimit, args("B")...)
	fileID := pgbUpload(t, b.URL, pgbChatLines("k", "default", lines))
	code, batch, body := pgbCreate(t, b.URL, fileID, nil)
	if code != http.StatusOK {
		t.Fatalf("create: %d %s", code, body)
	}
	var onB []int64
	waitFor(t, "a line done and calls in flight on both lanes", func() bool {
		onB = nil
		rows, err := st.DB().QueryContext(t.Context(), `SELECT job_id FROM job_attempts WHERE status = 'running' AND lane = 'B'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			rows.Scan(&id)
			onB = append(onB, id)
		}
		return pgbScalar(t, st, `SELECT COUNT(*) FROM jobs WHERE status = 'done'`) >= 1 && len(onB) > 0 &&
			pgbScalar(t, st, `SELECT COUNT(*) FROM job_attempts WHERE status = 'running' AND lane = 'A'`) > 0
	})
	req, _ := http.NewRequest(http.MethodPost, a.URL+"/v1/batches/"+batch.ID+"/cancel", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("cancel through A answered %d; want A killed by its crash point", resp.StatusCode)
	}
	<-a.exited
	if n := pgbScalar(t, st, `SELECT COUNT(*) FROM batches WHERE cancelling_at IS NOT NULL`); n != 1 {
		t.Fatalf("the cancel's first transaction did not commit (%d batches cancelling)", n)
	}
	if now := pgbGet(t, b.URL, batch.ID); now.Status != "cancelling" && pgbScalar(t, st, `SELECT COUNT(*) FROM jobs WHERE status IN ('queued', 'running')`) > 0 {
		t.Errorf("batch %+v right after the crash, lines still running: want cancelling", now)
	}
	waitFor(t, "every line ended", func() bool {
		return pgbScalar(t, st, `SELECT COUNT(*) FROM jobs WHERE status IN ('queued', 'running')`) == 0
	})
	if now := pgbGet(t, b.URL, batch.ID); now.Status != "cancelled" {
		t.Errorf("batch %+v with every line ended after a cancel: want cancelled", now)
	}
	code, body = pgbDo(t, http.MethodPost, b.URL+"/v1/batches/"+batch.ID+"/cancel", nil, "")
	var again struct {
		pgbBatch
		CancelledAt *int64 `json:"cancelled_at"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &again) != nil || again.Status != "cancelled" || again.CancelledAt == nil {
		t.Errorf("re-sent cancel: %d %s; want 200, cancelled, cancelled_at set", code, body)
	}
	if n := pgbScalar(t, st, `SELECT COUNT(*) FROM batches WHERE cancelled_at IS NOT NULL`); n != 1 {
		t.Errorf("cancelled_at not stored after the re-sent cancel")
	}
	for _, id := range onB {
		var status string
		var charges int64
		if err := st.DB().QueryRowContext(t.Context(), `SELECT status, (SELECT COUNT(*) FROM charges WHERE job_id = $1) FROM jobs WHERE id = $1`, id).Scan(&status, &charges); err != nil {
			t.Fatal(err)
		}
		if status != "done" || charges != 1 {
			t.Errorf("job %d, in flight on live lane B at the cancel: %s with %d charges; want its paid answer kept (done, 1 charge)", id, status, charges)
		}
	}
	out, errs := pgbFile(t, b.URL, again.OutputFileID), pgbFile(t, b.URL, again.ErrorFileID)
	if int64(len(out)) != again.RequestCounts.Completed || int64(len(errs)) != again.RequestCounts.Failed || len(out)+len(errs) != lines {
		t.Errorf("request_counts %+v; files: %d output, %d errors", again.RequestCounts, len(out), len(errs))
	}
	charges := pgbScalar(t, st, `SELECT COUNT(*) FROM charges`)
	if ledger := sim.MustLedger(t); charges != int64(len(out)) || ledger.TotalBills < charges {
		t.Errorf("%d charges, %d done lines, %d bills", charges, len(out), ledger.TotalBills)
	}
	for _, l := range out {
		if e, ok := sim.MustLedger(t).Request(l.Response.RequestID); !ok || e.Bills != 1 {
			t.Errorf("line %s: ledger %+v (%v), want billed once", l.CustomID, e, ok)
		}
	}
}

// TestBatchModelPerLine: a batch file whose lines name different
// models runs each line on its own model's provider (writer on the
// simulator, billed and priced; sketch on the in-process sim, free);
// a file with one line of an unknown model is 400 naming that line, and
// nothing is written.
func TestBatchModelPerLine(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	db := t.TempDir() + "/inkwell.db"
	srv := startServe(t, db, "--config", chatConfig(t, sim.URL))
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	line := func(id, model string) string {
		return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":%q,"messages":[{"role":"user","content":"hi %s"}],"max_tokens":20}}`+"\n", id, model, id)
	}
	bad := pgbUpload(t, srv.URL, line("w1", "writer")+line("s1", "sketch")+line("x1", "gpt-nonexistent"))
	code, _, body := pgbCreate(t, srv.URL, bad, nil)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "line 3") {
		t.Errorf("a file with an unknown model on line 3: %d %s; want 400 naming line 3", code, body)
	}
	if n := pgbScalar(t, st, `SELECT COUNT(*) FROM jobs`) + pgbScalar(t, st, `SELECT COUNT(*) FROM batches`); n != 0 {
		t.Errorf("%d rows written by a refused create", n)
	}
	good := pgbUpload(t, srv.URL, line("w1", "writer")+line("s1", "sketch")+line("w2", "writer"))
	code, b, body := pgbCreate(t, srv.URL, good, nil)
	if code != http.StatusOK {
		t.Fatalf("create: %d %s", code, body)
	}
	waitFor(t, "the batch completed", func() bool { b = pgbGet(t, srv.URL, b.ID); return b.Status == "completed" })
	out := pgbFile(t, srv.URL, b.OutputFileID)
	if len(out) != 3 || b.ErrorFileID != nil {
		t.Fatalf("output %+v, error file %v; want 3 done lines", out, b.ErrorFileID)
	}
	ledger := sim.MustLedger(t)
	for _, l := range out {
		_, billed := ledger.Request(l.Response.RequestID)
		if billed != strings.HasPrefix(l.CustomID, "w") {
			t.Errorf("line %s (request %s): billed by the simulator %v; want only writer lines there", l.CustomID, l.Response.RequestID, billed)
		}
	}
	if n := pgbScalar(t, st, `SELECT COUNT(*) FROM charges WHERE model = 'writer' AND amount_micros > 0`); n != 2 {
		t.Errorf("%d priced writer charges, want 2", n)
	}
	if ledger.TotalBills != 2 {
		t.Errorf("simulator billed %d times, want 2", ledger.TotalBills)
	}
}
