package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestCLI_RecoverRefusesALaneThatNeverRan: 'inkwell recover --lane esat'
// (east mistyped) on a database where only east ran is refused, exit 1,
// naming the lanes that did run, and writes nothing: no lock file beside
// the database, no recovery run. The real name still recovers.
func TestCLI_RecoverRefusesALaneThatNeverRan(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	lock, err := st.LockLane(t.Context(), "east")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterLane(t.Context(), lock); err != nil {
		t.Fatal(err)
	}
	lock.Release()
	files := dirNames(t, dir)
	runs := func() int { return countWhere(t, st, `SELECT COUNT(*) FROM recovery_runs`) }

	for _, args := range [][]string{{"--lane", "esat"}, {"--lane", "esat", "--dry-run"}, {}} {
		code, stdout, stderr := runCLI(t, append([]string{"recover", "--db", db}, args...)...)
		lane := "local"
		if len(args) > 0 {
			lane = args[1]
		}
		if code != 1 || !strings.Contains(stderr, "lane "+lane+" never ran on this database") ||
			!strings.Contains(stderr, "lanes that ran here: east") || !strings.Contains(stderr, "nothing written") {
			t.Errorf("inkwell recover %v: exit %d, stdout %q, stderr %q; want 1, the lane refused and east named", args, code, stdout, stderr)
		}
	}
	if got := dirNames(t, dir); strings.Join(got, ",") != strings.Join(files, ",") {
		t.Errorf("refused recoveries left files: %v (were %v)", got, files)
	}
	if n := runs(); n != 0 {
		t.Errorf("refused recoveries recorded %d recovery runs, want 0", n)
	}

	code, stdout, stderr := runCLI(t, "recover", "--db", db, "--lane", "east")
	if code != 0 || !strings.Contains(stdout, "recovery run 1 on lane east") {
		t.Errorf("inkwell recover --lane east: exit %d, stdout %q, stderr %q; want run 1", code, stdout, stderr)
	}
}

// TestCLI_RecoverMarksTheDeadHolderStopped: a serve killed with SIGKILL
// leaves a fresh heartbeat, so status calls its lane alive for the next
// 15 s; once 'inkwell recover' has taken the lane's lock (the proof the
// holder is dead), status says stopped at once, with the run that proved
// it (run 2: run 1 was serve's own startup), and the recover output says so too.
func TestCLI_RecoverMarksTheDeadHolderStopped(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--sim-latency", "30s")
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	job := submit(t, srv.URL, "orphan-key", `{"prompt":"left running"}`).Job
	storetest.WaitFor(t, waitLimit, "job running", func() bool { return show(t, st, job.ID).Job.Status == inkwell.StatusRunning })
	srv.Signal(t, syscall.SIGKILL)

	lanes := func() []api.Lane {
		t.Helper()
		code, stdout, stderr := runCLI(t, "status", "--db", db, "--json")
		var rep api.OverviewResponse
		if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil {
			t.Fatalf("inkwell status --json: exit %d, stderr %q", code, stderr)
		}
		return rep.Lanes
	}
	if l := lanes(); len(l) != 1 || !l[0].Alive {
		t.Fatalf("lanes right after SIGKILL = %+v; want the one lane still looking alive (fresh heartbeat)", l)
	}

	code, stdout, stderr := runCLI(t, "recover", "--db", db)
	if code != 0 || !strings.Contains(stdout, "marked the previous holder's lanes row stopped: dead: recovery run 2 took its lane lock") {
		t.Fatalf("inkwell recover: exit %d, stdout %q, stderr %q; want the lanes row marked", code, stdout, stderr)
	}
	l := lanes()
	if len(l) != 1 || l[0].Alive || l[0].State != "stopped" || l[0].StoppedAt == nil ||
		!strings.HasPrefix(l[0].StopReason, "dead: recovery run 2 took its lane lock (flock) and found its process gone (pid ") || l[0].PID != srv.Pid() {
		t.Errorf("lanes after recover = %+v; want the killed pid %d's row stopped, naming recovery run 2 (run 1 was serve's own startup)", l, srv.Pid())
	}

	// A second recover finds the row stopped and leaves it as it is.
	code, stdout, _ = runCLI(t, "recover", "--db", db, "--json")
	var rep api.RecoveryReport
	if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil || rep.PreviousStopped != "" ||
		!strings.Contains(rep.Evidence.PreviousProcess, "is recorded stopped at") {
		t.Errorf("second recover: exit %d, stdout %q; want no new mark, the stop read as evidence", code, stdout)
	}
	if again := lanes(); len(again) != 1 || again[0].StopReason != l[0].StopReason || !again[0].StoppedAt.Equal(*l[0].StoppedAt) {
		t.Errorf("second recover changed the lanes row: %+v, was %+v", again, l)
	}
}
