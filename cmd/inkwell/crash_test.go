package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// These tests run the real inkwell binary, built once in TestMain, as child
// processes, and kill them with SIGKILL as a crash would.

var inkwellBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "inkwell-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	inkwellBin = filepath.Join(dir, "inkwell")
	if out, err := exec.Command("go", "build", "-o", inkwellBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	storetest.Exit(code) // a line when PostgreSQL tests were skipped
}

// waitLimit bounds each wait on a child or a row; normally they take
// milliseconds.
const waitLimit = 60 * time.Second

// childEnv is this process's environment without the variables that would
// change what a child does behind the test's back.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "INKWELL_DB=") || strings.HasPrefix(kv, "INKWELL_CRASH_AT=") || strings.HasPrefix(kv, "INKWELL_CONFIG=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// server is a running `inkwell serve` child.
type server = Child

// startServe starts `inkwell serve` on a free loopback port and waits until
// it answers /readyz with 200 (recovery done).
func startServe(t *testing.T, db string, args ...string) *server {
	t.Helper()
	all := append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0"}, args...)
	return StartChild(t, inkwellBin, childEnv(), waitLimit, all...)
}

// runCLI runs the binary to completion and returns its exit code and
// output, in a working directory of its own (the default inkwell.db, if
// ever used, lands there).
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCLIIn(t, t.TempDir(), args...)
}

// runCLIIn is runCLI with the working directory dir.
func runCLIIn(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, inkwellBin, args...)
	cmd.Env = childEnv()
	cmd.SysProcAttr = ChildProcAttr()
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("inkwell %q did not finish within %v", args, waitLimit)
	}
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("inkwell %q: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

func submit(t *testing.T, url, key, body string) inkwell.JobDetail {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/jobs", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/jobs: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/jobs: %d %s, want 201", resp.StatusCode, b)
	}
	var d inkwell.JobDetail
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func show(t *testing.T, st *store.Store, id int64) inkwell.JobDetail {
	t.Helper()
	d, err := st.Show(context.Background(), id)
	if err != nil {
		t.Fatalf("Show %d: %v", id, err)
	}
	return d
}

func countWhere(t *testing.T, st *store.Store, q string, args ...any) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestServe_KillMidCallThenRecoverAndRetry is the seed's crash test:
// kill -9 of a real server while a provider call is in flight, restart,
// check the rows, refuse a second server, retry, and finish the job.
func TestServe_KillMidCallThenRecoverAndRetry(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	first := startServe(t, db, "--sim-latency", "30s", "--heartbeat", "100ms")
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})

	job := submit(t, first.URL, "crash-key", `{"prompt":"a haiku about ink","max_words":12}`).Job
	storetest.WaitFor(t, waitLimit, "job running in the database", func() bool {
		d := show(t, st, job.ID)
		return d.Job.Status == inkwell.StatusRunning && len(d.Attempts) == 1
	})
	if err := first.Signal(t, syscall.SIGKILL); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("first serve after SIGKILL: %v, want killed", err)
	}
	// Death changes no row: the job is still running, mid-call.
	if d := show(t, st, job.ID); d.Job.Status != inkwell.StatusRunning || d.Attempts[0].Status != inkwell.StatusRunning {
		t.Fatalf("after the kill, before restart: job %s attempt %s, want both running", d.Job.Status, d.Attempts[0].Status)
	}

	second := startServe(t, db, "--sim-latency", "10ms", "--poll", "50ms")
	d := show(t, st, job.ID)
	if d.Job.Status != inkwell.StatusFailed || d.Job.Error != inkwell.ErrWorkerRestarted || d.Job.FinishedAt == nil {
		t.Errorf("job after restart = %+v, want failed %q with finished_at", d.Job, inkwell.ErrWorkerRestarted)
	}
	a := d.Attempts[0]
	if len(d.Attempts) != 1 || a.AttemptNumber != 1 || a.Status != inkwell.StatusFailed || a.Error != inkwell.ErrWorkerRestarted || a.FinishedAt == nil || a.RecoveryRunID == nil {
		t.Fatalf("attempts after restart = %+v, want attempt 1 failed %q, finished, linked to a recovery run", d.Attempts, inkwell.ErrWorkerRestarted)
	}
	run, err := st.RecoveryRunByID(context.Background(), *a.RecoveryRunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Lane != "local" || run.AttemptsClosed != 1 || run.AttemptsBackfilled != 0 || run.JobsFailed != 1 {
		t.Errorf("recovery run = %+v, want lane local, 1 attempt closed, 0 back-filled, 1 job failed", run)
	}
	var ev store.Evidence
	if err := json.Unmarshal([]byte(run.Evidence), &ev); err != nil {
		t.Fatalf("evidence %q: %v", run.Evidence, err)
	}
	if ev.Proof == "" || ev.LaneRow == nil || ev.LaneRow.PID != first.Pid() || ev.LockFile == nil || ev.LockFile.PID != first.Pid() || ev.Recoverer.PID != second.Pid() {
		t.Errorf("evidence = %s, want a proof, the killed pid %d as previous holder (lanes row and lock file) and pid %d as recoverer", run.Evidence, first.Pid(), second.Pid())
	}

	// A second server while the lane's holder lives refuses, names it, and changes nothing.
	runsBefore := countWhere(t, st, `SELECT COUNT(*) FROM recovery_runs`)
	code, _, stderr := runCLI(t, "serve", "--db", db, "--addr", "127.0.0.1:0", "--sim-latency", "0s")
	if code != 1 || !strings.Contains(stderr, fmt.Sprintf("pid %d", second.Pid())) {
		t.Errorf("second serve: exit %d, stderr %q; want 1 and a message naming pid %d", code, stderr, second.Pid())
	}
	if got := countWhere(t, st, `SELECT COUNT(*) FROM recovery_runs`); got != runsBefore {
		t.Errorf("the refused serve wrote %d recovery runs", got-runsBefore)
	}
	if d := show(t, st, job.ID); d.Job.Status != inkwell.StatusFailed || len(d.Attempts) != 1 {
		t.Errorf("the refused serve touched job %d: %+v", job.ID, d)
	}

	// Retry through the CLI; the live server runs attempt 2 to done.
	code, stdout, stderr := runCLI(t, "retry", fmt.Sprint(job.ID), "--db", db)
	if code != 0 || !strings.Contains(stdout, "queued") {
		t.Fatalf("inkwell retry: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	storetest.WaitFor(t, waitLimit, "job done after retry", func() bool { return show(t, st, job.ID).Job.Status == inkwell.StatusDone })
	d = show(t, st, job.ID)
	if len(d.Attempts) != 2 || d.Attempts[0].Status != inkwell.StatusFailed || d.Attempts[1].AttemptNumber != 2 || d.Attempts[1].Status != inkwell.StatusDone {
		t.Errorf("attempts = %+v, want 1 failed then 2 done", d.Attempts)
	}
	if n := countWhere(t, st, `SELECT COUNT(*) FROM results WHERE job_id = ?`, job.ID); n != 1 {
		t.Errorf("results of job %d = %d, want 1", job.ID, n)
	}
	if n := countWhere(t, st, `SELECT COUNT(*) FROM charges WHERE job_id = ?`, job.ID); n != 1 {
		t.Errorf("charges of job %d = %d, want 1", job.ID, n)
	}
	if d.Result == nil || d.Charge == nil || d.Result.AttemptID != d.Attempts[1].ID || d.Charge.AttemptID != d.Attempts[1].ID {
		t.Errorf("result %+v / charge %+v, want both from attempt 2 (id %d)", d.Result, d.Charge, d.Attempts[1].ID)
	}
	code, stdout, _ = runCLI(t, "show", fmt.Sprint(job.ID), "--db", db)
	if code != 0 || d.Result == nil || !strings.Contains(stdout, d.Result.Text) || !strings.Contains(stdout, inkwell.ErrWorkerRestarted) {
		t.Errorf("inkwell show: exit %d, stdout %q; want the text and the restarted attempt", code, stdout)
	}

	// SIGTERM: a clean stop, exit 0, the lane marked stopped.
	if err := second.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("serve after SIGTERM: %v, want exit 0\n%s", err, second.Log())
	}
	lanes, err := st.Lanes(context.Background())
	if err != nil || len(lanes) != 1 || lanes[0].StoppedAt == nil || lanes[0].PID != second.Pid() {
		t.Errorf("lanes = %+v (%v), want lane local stopped by pid %d", lanes, err, second.Pid())
	}
}

func TestCLI_HelpForEveryCommand(t *testing.T) {
	t.Parallel()
	code, stdout, _ := runCLI(t, "--help")
	if code != 0 {
		t.Fatalf("inkwell --help: exit %d, want 0", code)
	}
	_, list, ok := strings.Cut(stdout, "Commands:\n")
	if !ok {
		t.Fatalf("inkwell --help lists no commands:\n%s", stdout)
	}
	var names []string
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		names = append(names, strings.Fields(line)[0])
	}
	for _, want := range []string{"serve", "submit", "show", "retry", "recover", "migrate"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("inkwell --help does not list %q (lists %q)", want, names)
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCLI(t, name, "--help")
			if code != 0 {
				t.Errorf("inkwell %s --help: exit %d, want 0 (stderr %q)", name, code, stderr)
			}
			if !strings.Contains(stdout, "Usage: inkwell "+name) || !strings.Contains(stdout, "Flags:") || !regexp.MustCompile(`(?m)^\s+--\w`).MatchString(stdout) {
				t.Errorf("inkwell %s --help printed no usage and flags:\n%s", name, stdout)
			}
		})
	}
}

func TestCLI_UnknownCommand(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCLI(t, "frobnicate")
	if code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("inkwell frobnicate: exit %d, stderr %q; want 2 and the unknown command named", code, stderr)
	}
	if code, _, _ := runCLI(t); code != 2 {
		t.Errorf("inkwell with no command: exit %d, want 2", code)
	}
	if code, _, _ := runCLI(t, "show", "--no-such-flag"); code != 2 {
		t.Errorf("inkwell show --no-such-flag: exit %d, want 2", code)
	}
}

func TestCLI_MissingDatabaseCreatesNothing(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"show", "1"}, {"retry", "1"}, {"recover"}} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db := filepath.Join(dir, "missing.db")
			code, _, stderr := runCLI(t, append(args, "--db", db)...)
			if code != 1 || !strings.Contains(stderr, db) || !strings.Contains(stderr, "no such file") {
				t.Errorf("inkwell %s on a missing database: exit %d, stderr %q; want 1 and a message naming %s", args[0], code, stderr, db)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("inkwell %s created %v", args[0], entries)
			}
		})
	}
}

// TestCLI_RecoverDryRunThenReal: `inkwell recover` on the orphan of a
// killed server, first as a dry run (prints, changes nothing), then for
// real, then again (changes nothing); and refused while a server is alive.
func TestCLI_RecoverDryRunThenReal(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--sim-latency", "30s")
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	job := submit(t, srv.URL, "orphan-key", `{"prompt":"left running"}`).Job
	storetest.WaitFor(t, waitLimit, "job running", func() bool { return show(t, st, job.ID).Job.Status == inkwell.StatusRunning })

	code, _, stderr := runCLI(t, "recover", "--db", db)
	if code != 1 || !strings.Contains(stderr, fmt.Sprintf("pid %d", srv.Pid())) {
		t.Errorf("recover while serve lives: exit %d, stderr %q; want 1 naming pid %d", code, stderr, srv.Pid())
	}
	srv.Signal(t, syscall.SIGKILL)

	runs := func() int { return countWhere(t, st, `SELECT COUNT(*) FROM recovery_runs`) }
	before := runs()
	code, stdout, stderr := runCLI(t, "recover", "--db", db, "--dry-run")
	if code != 0 || !strings.Contains(stdout, "would close 1 running attempt") || !strings.Contains(stdout, "nothing was changed") {
		t.Errorf("recover --dry-run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if d := show(t, st, job.ID); d.Job.Status != inkwell.StatusRunning || runs() != before {
		t.Errorf("the dry run changed rows: job %s, %d new recovery runs", d.Job.Status, runs()-before)
	}
	for i, want := range []int64{1, 0} {
		code, stdout, stderr = runCLI(t, "recover", "--db", db, "--json")
		var rep api.RecoveryReport
		if err := json.Unmarshal([]byte(stdout), &rep); code != 0 || err != nil {
			t.Fatalf("recover %d: exit %d, stdout %q, stderr %q (%v)", i+1, code, stdout, stderr, err)
		}
		if rep.AttemptsClosed != want || rep.JobsFailed != want || rep.RunID == 0 {
			t.Errorf("recover %d = %+v, want %d attempt closed and %d job failed in a recorded run", i+1, rep, want, want)
		}
	}
	if d := show(t, st, job.ID); d.Job.Status != inkwell.StatusFailed || d.Job.Error != inkwell.ErrWorkerRestarted {
		t.Errorf("job after recover = %+v, want failed %q", d.Job, inkwell.ErrWorkerRestarted)
	}
}

// TestCLI_SubmitWaitEndToEnd is the newcomer's first five minutes: serve,
// submit --wait prints the text; a re-send with the printed key is the same job.
func TestCLI_SubmitWaitEndToEnd(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--sim-latency", "10ms")
	code, stdout, stderr := runCLI(t, "submit", "--prompt", "a haiku about ink", "--server", srv.URL, "--wait")
	if code != 0 {
		t.Fatalf("submit --wait: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	m := regexp.MustCompile(`(?m)^job (\d+) accepted.*\nkey (\S+)`).FindStringSubmatch(stdout)
	if m == nil || !strings.Contains(stdout, "job "+m[1]+" done") {
		t.Fatalf("submit --wait printed %q; want the job id, the key and done", stdout)
	}
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	var id int64
	fmt.Sscan(m[1], &id)
	d := show(t, st, id)
	if d.Result == nil || !strings.Contains(stdout, d.Result.Text) {
		t.Errorf("submit --wait printed %q; want the stored text %+v", stdout, d.Result)
	}
	code, stdout, _ = runCLI(t, "submit", "--prompt", "a haiku about ink", "--server", srv.URL, "--key", m[2])
	if code != 0 || !strings.Contains(stdout, "job "+m[1]+" already accepted") {
		t.Errorf("re-submit with key %s: exit %d, stdout %q; want the same job %s", m[2], code, stdout, m[1])
	}
	if n := countWhere(t, st, `SELECT COUNT(*) FROM jobs`); n != 1 {
		t.Errorf("jobs = %d, want 1", n)
	}
}
