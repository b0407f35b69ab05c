package main_test

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	cli "github.com/inkwell/inkwell/cmd/inkwell"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

func pgfaultServeArgs(dsn, simURL string, extra ...string) []string {
	return append([]string{"serve", "--db", dsn, "--addr", "127.0.0.1:0", "--lane", "X",
		"--provider", "openai", "--provider-url", simURL, "--provider-timeout", "60s",
		"--heartbeat", "200ms", "--poll", "50ms"}, extra...)
}

// pgHolder is a serve child holding lane X on a fresh PostgreSQL database,
// with n jobs running on a simulator that answers in 3 s.
type pgHolder struct {
	dsn, bin string
	st       *store.Store
	sim      *simtest.Sim
	a        *cli.Child
	ids      []int64
}

func startPGHolder(t *testing.T, prefix string, n int, grace string) pgHolder {
	t.Helper()
	h := pgHolder{dsn: storetest.PostgresDSN(t)}
	h.st = storetest.MustOpen(t, h.dsn, store.Options{})
	h.sim = simtest.MustStart(t, providersim.Config{Latency: 3 * time.Second})
	h.bin = lanesBinary(t)
	env := append(os.Environ(), "INKWELL_CRASH_AT=")
	h.a = cli.StartChild(t, h.bin, env, pgfaultWait, pgfaultServeArgs(h.dsn, h.sim.URL, "--grace", grace)...)
	h.ids = pgfaultSubmit(t, h.a.URL, prefix, n)
	pgfaultAllRunning(t, h.a, h.st, h.ids)
	return h
}

// A second serve of the same lane on the same database, while the first
// is alive and holds the lock, is refused with the holder named, and
// writes nothing (no recovery run, the lanes row still the first's).
func TestServePG_SecondServeOfALiveLaneRefused(t *testing.T) {
	t.Parallel()
	h := startPGHolder(t, "second", 2, "10s")
	dsn, st, sim, bin, a, ids := h.dsn, h.st, h.sim, h.bin, h.a, h.ids
	runs := lanesCount(t, st, `SELECT COUNT(*) FROM recovery_runs`)

	out, err := exec.Command(bin, pgfaultServeArgs(dsn, sim.URL)...).CombinedOutput()
	if code := exitCode(err); code != 1 {
		t.Errorf("second serve of a live lane: exit %d (%v), want 1\n%s", code, err, out)
	}
	if !strings.Contains(string(out), "lane X is held by") || !strings.Contains(string(out), "Refusing to start the lane") {
		t.Errorf("refusal does not name the holder:\n%s", out)
	}
	if n := lanesCount(t, st, `SELECT COUNT(*) FROM recovery_runs`); n != runs {
		t.Errorf("recovery runs %d after the refusal, want %d: a refusal writes nothing", n, runs)
	}
	for _, id := range ids {
		if d := pgfaultShow(t, st, id); d.Job.Status != inkwell.StatusRunning || d.Attempts[0].Status != inkwell.StatusRunning {
			t.Errorf("job %d %s after the refusal, want still running on the first serve", id, d.Job.Status)
		}
	}
	storetest.WaitFor(t, pgfaultWait, "the first serve's jobs done", func() bool {
		return lanesCount(t, st, `SELECT COUNT(*) FROM jobs WHERE status = 'done'`) == len(ids)
	})
	pgfaultMoney(t, st, sim, ids)
	if err := a.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("first serve after SIGTERM: %v, want exit 0", err)
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// Split brain on one host: serve A's lock session ends (terminated on the
// server, as a network cut or an admin would end it) while A, alive, has
// provider calls in flight. serve B of the same lane starts on the same
// host: the lock is free, and B used to take that as proof of A's death,
// its startup recovery failing A's running attempts; A's answers then
// arrived, paid for, and were fenced out: billed, never charged, jobs
// failed "worker restarted". As on SQLite, a granted lock is now proof only
// with the previous holder's process gone where this host can tell
// (pgLock.takenFromLive): B refuses while A lives, and A's answers are
// stored.
func TestServePG_SameLaneRefusedWhileOldHolderAlive(t *testing.T) {
	t.Parallel()
	h := startPGHolder(t, "split", 3, "20s")
	dsn, st, sim, bin, a, ids := h.dsn, h.st, h.sim, h.bin, h.a, h.ids

	var n int
	if err := st.DB().QueryRowContext(t.Context(), `SELECT COUNT(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name LIKE 'inkwell/lane/%'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminate A's lock session: %d sessions, %v", n, err)
	}
	if syscall.Kill(a.Pid(), 0) != nil {
		t.Fatal("A died with its lock session; the test wants it alive")
	}
	// B starts while A is alive with its calls in flight. Started by hand:
	// a refused B exits, which StartChild would take for a failure.
	cmdB := exec.Command(bin, pgfaultServeArgs(dsn, sim.URL, "--grace", "5s")...)
	cmdB.Env = append(os.Environ(), "INKWELL_CRASH_AT=")
	cmdB.SysProcAttr = cli.ChildProcAttr()
	var outB strings.Builder
	cmdB.Stderr = &outB
	if err := cmdB.Start(); err != nil {
		t.Fatal(err)
	}
	doneB := make(chan error, 1)
	go func() { doneB <- cmdB.Wait() }()
	t.Cleanup(func() {
		cmdB.Process.Kill()
		<-doneB
	})

	// A's answers arrive 3 s after the calls began; give them time to be
	// stored (or fenced out) and A time to stop.
	storetest.WaitFor(t, pgfaultWait, "A to exit", func() bool { return syscall.Kill(a.Pid(), 0) == syscall.ESRCH })
	time.Sleep(time.Second)
	if strings.Contains(a.Log(), "discarded") || lanesCount(t, st, `SELECT COUNT(*) FROM job_attempts WHERE error = 'worker restarted'`) > 0 {
		t.Errorf("B's recovery failed attempts of A, which was alive with its calls in flight (%d attempts 'worker restarted')",
			lanesCount(t, st, `SELECT COUNT(*) FROM job_attempts WHERE error = 'worker restarted'`))
	}
	pgfaultMoney(t, st, sim, ids)
	if t.Failed() {
		t.Logf("B's log:\n%s", outB.String())
	}
}

// serve A holding lane X is stopped (SIGSTOP) for 7 s with calls in flight
// — longer than the keeper's 5 s bound on a check — then continued. While
// it is stopped its sessions stay open (its kernel still answers for its
// sockets), so its lock is held: a second serve of the lane is refused,
// and nothing of A's is recovered. Continued, A finishes every job, each
// charged once for its one bill, and stops cleanly on SIGTERM.
func TestServePG_StoppedHolderKeepsItsLane(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	st := storetest.MustOpen(t, dsn, store.Options{})
	sim := simtest.MustStart(t, providersim.Config{Latency: 2 * time.Second})
	bin := lanesBinary(t)
	env := append(os.Environ(), "INKWELL_CRASH_AT=")
	a := cli.StartChild(t, bin, env, pgfaultWait, pgfaultServeArgs(dsn, sim.URL, "--grace", "10s")...)
	ids := pgfaultSubmit(t, a.URL, "sigstop", 3)
	pgfaultAllRunning(t, a, st, ids)
	if err := syscall.Kill(a.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	out, err := exec.Command(bin, pgfaultServeArgs(dsn, sim.URL)...).CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "lane X is held by") {
		t.Errorf("serve of lane X while its holder is stopped: exit %d, want 1 naming the holder:\n%s", code, out)
	}
	time.Sleep(7*time.Second - time.Since(stopped))
	if err := syscall.Kill(a.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	storetest.WaitFor(t, pgfaultWait, "every job done", func() bool {
		return lanesCount(t, st, `SELECT COUNT(*) FROM jobs WHERE status = 'done'`) == len(ids)
	})
	if n := lanesCount(t, st, `SELECT COUNT(*) FROM recovery_runs`); n != 1 {
		t.Errorf("%d recovery runs, want 1 (A's own start)", n)
	}
	pgfaultMoney(t, st, sim, ids)
	if err := a.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("A after SIGCONT and SIGTERM: %v, want exit 0", err)
	}
}

// TestServePG_LaneThatLostItsLockIsNotReady: serve's lock session is
// ended (as a network cut or an operator would) while its two calls run.
// The lane stops claiming and drains: its calls finish and their answers
// are stored. Meanwhile /readyz must say 503 "stopping", so a balancer
// sends no more work to a server that will run none of it (it said 200).
func TestServePG_LaneThatLostItsLockIsNotReady(t *testing.T) {
	t.Parallel()
	h := startPGHolder(t, "unready", 2, "10s")
	var n int
	if err := h.st.DB().QueryRowContext(t.Context(), `SELECT COUNT(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name LIKE 'inkwell/lane/%'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminate the lock session: %d sessions, %v", n, err)
	}
	storetest.WaitFor(t, pgfaultWait, "/readyz 503 stopping while the lane drains", func() bool {
		resp, err := http.Get(h.a.URL + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "stopping")
	})
	storetest.WaitFor(t, pgfaultWait, "the drained answers stored", func() bool {
		for _, id := range h.ids {
			if pgfaultShow(t, h.st, id).Job.Status != inkwell.StatusDone {
				return false
			}
		}
		return true
	})
}
