package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	cli "github.com/inkwell/inkwell/cmd/inkwell"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Several lanes in several real processes share one PostgreSQL database.
// One is killed with SIGKILL while its provider call is in flight; the
// survivors prove it dead by its lock and close its orphan, a retry finishes
// it, and in the end every job is done once, charged once, billed once.

const (
	lanesJobs = 500
	lanesLate = 48               // sent once the provider holds its answers
	lanesWait = 90 * time.Second // bound on each wait; normally seconds
)

func TestLanes_ThreeProcessesDrainWhileOneIsKilled(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	st := storetest.MustOpen(t, dsn, store.Options{})
	bin := lanesBinary(t)
	sim := startHeldSim(t)

	lanes := map[string]*cli.Child{}
	for _, name := range []string{"A", "B", "C"} {
		lanes[name] = cli.StartChild(t, bin, append(os.Environ(), "INKWELL_CRASH_AT="), lanesWait, "serve", "--db", dsn, "--addr", "127.0.0.1:0", "--lane", name,
			"--provider", "openai", "--provider-url", sim.url, "--provider-timeout", "30s",
			"--heartbeat", "200ms", "--poll", "50ms", "--rescue-interval", "100ms", "--grace", "5s")
	}
	jobs := lanesSubmit(t, []string{lanes["A"].URL, lanes["B"].URL, lanes["C"].URL}, "lanes", lanesJobs)

	storetest.WaitFor(t, lanesWait, "a fifth of the jobs done", func() bool {
		return lanesCount(t, st, `SELECT COUNT(*) FROM jobs WHERE status = 'done'`) >= lanesJobs/5
	})
	sim.hold()
	// On a loaded machine the lanes may have drained every job by now
	// (submitting is the slow part): jobs sent while the provider holds
	// its answers fill the lanes' slots. A and C hold at most 32 calls
	// between them, so B takes some of these 48.
	jobs = append(jobs, lanesSubmit(t, []string{lanes["A"].URL}, "lanes-late", lanesLate)...)
	var killedJob int64
	storetest.WaitFor(t, lanesWait, "lane B in a provider call", func() bool { killedJob = sim.heldJobOf(t, st, "B"); return killedJob != 0 })
	lanes["B"].Signal(t, syscall.SIGKILL)
	sim.release()

	run := lanesWaitRescue(t, st, "B")
	lanesRetryUntilDone(t, st, lanes["A"].URL)
	for _, name := range []string{"A", "C"} {
		if err := lanes[name].Signal(t, syscall.SIGTERM); err != nil {
			t.Errorf("lane %s after SIGTERM: %v, want exit 0", name, err)
		}
	}

	lanesCheckJobs(t, st, jobs)
	lanesCheckNoOverlap(t, st)
	lanesCheckKilledJob(t, st, killedJob, run)
	lanesCheckLedger(t, st, sim, len(jobs))
}

// lanesCheckJobs: every job done, with exactly one result and one charge,
// its highest attempt the one done attempt, numbers 1..n.
func lanesCheckJobs(t *testing.T, st *store.Store, jobs []int64) {
	t.Helper()
	for _, q := range []struct{ what, sql string }{
		{"jobs", `SELECT COUNT(*) FROM jobs`},
		{"done jobs", `SELECT COUNT(*) FROM jobs WHERE status = 'done'`},
		{"results", `SELECT COUNT(DISTINCT job_id) FROM results`},
		{"result rows", `SELECT COUNT(*) FROM results`},
		{"charges", `SELECT COUNT(DISTINCT job_id) FROM charges`},
		{"charge rows", `SELECT COUNT(*) FROM charges`},
		{"done attempts", `SELECT COUNT(*) FROM job_attempts WHERE status = 'done'`},
		{"jobs whose last attempt is the done one", `SELECT COUNT(*) FROM jobs j JOIN job_attempts a ON a.job_id = j.id
			WHERE a.status = 'done' AND a.attempt_number = (SELECT MAX(attempt_number) FROM job_attempts WHERE job_id = j.id)
			  AND a.attempt_number = (SELECT COUNT(*) FROM job_attempts WHERE job_id = j.id)`},
		{"results and charges of the done attempt", `SELECT COUNT(*) FROM results r JOIN charges c ON c.job_id = r.job_id
			JOIN job_attempts a ON a.id = r.attempt_id AND a.id = c.attempt_id WHERE a.status = 'done'`},
	} {
		if got := lanesCount(t, st, q.sql); got != len(jobs) {
			t.Errorf("%s = %d, want %d", q.what, got, len(jobs))
		}
	}
	if n := lanesCount(t, st, `SELECT COUNT(*) FROM job_attempts WHERE status = 'running'`); n != 0 {
		t.Errorf("%d attempts still running, want 0", n)
	}
}

// lanesCheckNoOverlap: no job was ever claimed by two lanes at once; each
// attempt began after the one before it had finished.
func lanesCheckNoOverlap(t *testing.T, st *store.Store) {
	t.Helper()
	const q = `SELECT a.job_id, a.attempt_number, a.lane, b.lane FROM job_attempts a
		JOIN job_attempts b ON b.job_id = a.job_id AND b.attempt_number = a.attempt_number + 1
		WHERE a.finished_at IS NULL OR b.started_at < a.finished_at`
	rows, err := st.DB().QueryContext(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var job int64
		var n int
		var la, lb string
		if err := rows.Scan(&job, &n, &la, &lb); err != nil {
			t.Fatal(err)
		}
		t.Errorf("job %d: attempt %d on %s overlaps attempt %d on %s", job, n, la, n+1, lb)
	}
	if perLane := lanesCount(t, st, `SELECT COUNT(DISTINCT lane) FROM job_attempts WHERE status = 'done'`); perLane < 2 {
		t.Errorf("done attempts ran on %d lanes, want the work shared by at least 2", perLane)
	}
}

// lanesCheckKilledJob: the job B was running when it died was closed by a
// survivor's rescue (named in the evidence) and finished by a retry; the
// one rescue run closed every call B had in flight.
func lanesCheckKilledJob(t *testing.T, st *store.Store, job int64, run store.RecoveryRun) {
	t.Helper()
	d, err := st.Show(t.Context(), job)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Attempts) != 2 {
		t.Fatalf("killed job %d has %d attempts, want 2: %+v", job, len(d.Attempts), d.Attempts)
	}
	first, second := d.Attempts[0], d.Attempts[1]
	if first.Lane != "B" || first.Status != inkwell.StatusFailed || first.Error != inkwell.ErrWorkerRestarted ||
		first.RecoveryRunID == nil || *first.RecoveryRunID != run.ID {
		t.Errorf("killed job's first attempt = %+v, want failed on B by rescue run %d", first, run.ID)
	}
	if second.Lane == "B" || second.Status != inkwell.StatusDone {
		t.Errorf("killed job's second attempt = %+v, want done on a surviving lane", second)
	}
	var ev store.Evidence
	if err := json.Unmarshal([]byte(run.Evidence), &ev); err != nil || (ev.RescuedBy != "A" && ev.RescuedBy != "C") {
		t.Errorf("rescue evidence = %s (%v), want rescued_by_lane A or C", run.Evidence, err)
	}
	// Every call B had in flight (up to its 16 slots; a claim B sent just
	// before the kill may still have committed after it) was closed by this
	// one run, and none is left running.
	linked := lanesCount(t, st, fmt.Sprintf(`SELECT COUNT(*) FROM job_attempts WHERE recovery_run_id = %d`, run.ID))
	left := lanesCount(t, st, `SELECT COUNT(*) FROM job_attempts WHERE lane = 'B' AND status = 'running'`)
	if run.Lane != "B" || run.AttemptsClosed < 1 || run.AttemptsClosed != run.JobsFailed || int64(linked) != run.AttemptsClosed || left != 0 {
		t.Errorf("rescue run = %+v with %d attempts linked, %d of B's left running; want lane B, all its calls in flight closed in one run", run, linked, left)
	}
}

// lanesCheckLedger: the simulator billed each job exactly once, and each
// charge names the request it billed.
func lanesCheckLedger(t *testing.T, st *store.Store, sim *heldSim, jobs int) {
	t.Helper()
	ledger, err := providersim.FetchLedger(t.Context(), http.DefaultClient, sim.url)
	if err != nil {
		t.Fatal(err)
	}
	if ledger.TotalBills != int64(jobs) {
		t.Errorf("simulator billed %d times, want %d (once per job)", ledger.TotalBills, jobs)
	}
	rows, err := st.DB().QueryContext(t.Context(), `SELECT j.id, j.idempotency_key, c.provider_request_id FROM jobs j JOIN charges c ON c.job_id = j.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var key, reqID string
		if err := rows.Scan(&id, &key, &reqID); err != nil {
			t.Fatal(err)
		}
		e, ok := ledger.Entry(storetest.ProviderKey(t, st, id, key))
		if !ok || e.Bills != 1 || e.RequestID != reqID {
			t.Errorf("job %d: ledger entry %+v (found %t), charge names %s; want billed once under that request", id, e, ok, reqID)
		}
	}
}

func lanesSubmit(t *testing.T, urls []string, prefix string, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				id, err := lanesPost(urls[i%len(urls)], fmt.Sprintf("%s-%03d", prefix, i), fmt.Sprintf(`{"prompt":"%s line %d about lanes","max_words":6}`, prefix, i))
				if err != nil {
					errs <- err
					continue
				}
				ids[i] = id
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return ids
}

func lanesPost(url, key, body string) (int64, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/jobs", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("submit %s: %w", key, err)
	}
	defer resp.Body.Close()
	var d inkwell.JobDetail
	if resp.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("submit %s: status %d, want 201", key, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return 0, fmt.Errorf("submit %s: %w", key, err)
	}
	return d.Job.ID, nil
}

// lanesWaitRescue waits until lane B owns no running attempt and a
// survivor's rescue run for it exists, and returns that run.
func lanesWaitRescue(t *testing.T, st *store.Store, dead string) store.RecoveryRun {
	t.Helper()
	var id int64
	storetest.WaitFor(t, lanesWait, "a rescue of lane "+dead, func() bool {
		err := st.DB().QueryRowContext(t.Context(), `SELECT COALESCE(MAX(id), 0) FROM recovery_runs
			WHERE lane = $1 AND evidence LIKE '%rescued_by_lane%'`, dead).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		return id > 0 && lanesCount(t, st, `SELECT COUNT(*) FROM job_attempts WHERE status = 'running' AND lane = '`+dead+`'`) == 0
	})
	run, err := st.RecoveryRunByID(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// lanesRetryUntilDone retries failed jobs through the API, as an operator
// would, until every job is done.
func lanesRetryUntilDone(t *testing.T, st *store.Store, url string) {
	t.Helper()
	storetest.WaitFor(t, lanesWait, "every job done", func() bool {
		rows, err := st.DB().QueryContext(t.Context(), `SELECT id FROM jobs WHERE status = 'failed'`)
		if err != nil {
			t.Fatal(err)
		}
		var failed []int64
		for rows.Next() {
			var id int64
			rows.Scan(&id)
			failed = append(failed, id)
		}
		rows.Close()
		for _, id := range failed {
			resp, err := http.Post(fmt.Sprintf("%s/v1/jobs/%d/retry", url, id), "application/json", nil)
			if err != nil {
				t.Fatalf("retry job %d: %v", id, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("retry job %d: status %d, want 200", id, resp.StatusCode)
			}
		}
		return lanesCount(t, st, `SELECT COUNT(*) FROM jobs WHERE status <> 'done'`) == 0
	})
}

func lanesCount(t *testing.T, st *store.Store, q string) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// heldSim is the provider simulator, in this process, behind a switch that
// holds new calls until released: it makes "killed mid-call" certain
// instead of likely. Held calls are then made for real (billed if the
// provider decides to answer, as a real one would even for a dead client).
type heldSim struct {
	url     string
	mu      sync.Mutex
	gate    chan struct{} // nil when not holding
	heldKey map[string]bool
	holding int // calls waiting at the gate now
}

func startHeldSim(t *testing.T) *heldSim {
	t.Helper()
	srv, err := providersim.New(providersim.Config{LedgerPath: filepath.Join(t.TempDir(), "ledger.db")})
	if err != nil {
		t.Fatal(err)
	}
	h := &heldSim{heldKey: map[string]bool{}}
	inner := srv.Handler()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			h.wait(r.Header.Get("Idempotency-Key"))
		}
		inner.ServeHTTP(w, r)
	})}
	go hs.Serve(ln)
	t.Cleanup(func() {
		h.release()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		srv.Close()
	})
	h.url = "http://" + ln.Addr().String()
	return h
}

func (h *heldSim) wait(key string) {
	h.mu.Lock()
	gate := h.gate
	if gate != nil {
		h.heldKey[key] = true
	}
	h.mu.Unlock()
	if gate != nil {
		h.mu.Lock()
		h.holding++
		h.mu.Unlock()
		<-gate
		h.mu.Lock()
		h.holding--
		h.mu.Unlock()
	}
}

// heldCount is how many calls the simulator holds right now.
func (h *heldSim) heldCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.holding
}

func (h *heldSim) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate == nil {
		h.gate = make(chan struct{})
	}
}

func (h *heldSim) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate != nil {
		close(h.gate)
		h.gate = nil
	}
}

// heldJobOf returns the job whose call lane is making right now and the
// simulator is holding, or 0.
func (h *heldSim) heldJobOf(t *testing.T, st *store.Store, lane string) int64 {
	t.Helper()
	rows, err := st.DB().QueryContext(t.Context(), `SELECT j.id, j.idempotency_key FROM job_attempts a JOIN jobs j ON j.id = a.job_id
		WHERE a.status = 'running' AND a.lane = $1`, lane)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	for rows.Next() {
		var id int64
		var key string
		if err := rows.Scan(&id, &key); err != nil {
			t.Fatal(err)
		}
		if h.heldKey[storetest.ProviderKey(t, st, id, key)] {
			return id
		}
	}
	return 0
}

// lanesBinary builds the inkwell binary into the test's temporary directory
// (the build cache makes this a link step after the first time).
func lanesBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "inkwell")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
