package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestServe_LogsEachTransitionOnce runs real servers and checks that each
// transition of a job is logged exactly once, naming the job, its attempt,
// the lane and the evidence: accept, claim and completion of one job; claim
// of another, a SIGKILL under it, and the startup recovery that fails it.
func TestServe_LogsEachTransitionOnce(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")

	fast := startServe(t, db, "--sim-latency", "0s", "--heartbeat", "100ms")
	done := submit(t, fast.URL, "log-done", `{"prompt":"a haiku about ink"}`).Job.ID
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	storetest.WaitFor(t, waitLimit, "job done", func() bool { return show(t, st, done).Job.Status == inkwell.StatusDone })
	if err := fast.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	logs := fast.Log()
	wantLogged(t, logs, "job accepted", done, "component=api")
	claim := wantLogged(t, logs, "job claimed", done, "lane=local", "attempt_id=", "attempt_number=1")
	wantLogged(t, logs, "job done", done, "lane=local", "attempt_number=1", "provider_request_id=", "amount_micros=")
	if !strings.Contains(claim, "component=worker") {
		t.Errorf("claim line %q names no component", claim)
	}

	slow := startServe(t, db, "--sim-latency", "1m", "--heartbeat", "100ms")
	orphan := submit(t, slow.URL, "log-orphan", `{"prompt":"a long saga"}`).Job.ID
	storetest.WaitFor(t, waitLimit, "job running", func() bool { return show(t, st, orphan).Job.Status == inkwell.StatusRunning })
	// The claim is logged just after its commit: a kill between the two
	// (a loaded machine) would leave no line to check.
	storetest.WaitFor(t, waitLimit, "the claim logged", func() bool { return len(loggedLines(slow.Log(), "job claimed", orphan)) > 0 })
	slow.Signal(t, syscall.SIGKILL)
	wantLogged(t, slow.Log(), "job claimed", orphan, "lane=local", "attempt_number=1")

	restarted := startServe(t, db, "--sim-latency", "0s", "--heartbeat", "100ms")
	if err := restarted.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	line := wantLogged(t, restarted.Log(), "job failed by startup recovery", orphan,
		"lane=local", "attempt_number=1", `error="worker restarted"`, "recovery_run_id=", "evidence=flock")
	if !regexp.MustCompile(`attempt_id=\d+`).MatchString(line) {
		t.Errorf("recovery line %q names no attempt id", line)
	}
	wantLogged(t, restarted.Log(), "startup recovery", 0, "attempts_closed=1", "jobs_failed=1")
}

// loggedLines is the lines of logs with msg and (when jobID > 0) that
// job id.
func loggedLines(logs, msg string, jobID int64) []string {
	var found []string
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, fmt.Sprintf("msg=%q", msg)) && !strings.Contains(line, "msg="+msg+" ") {
			continue
		}
		if jobID > 0 && !strings.Contains(line+" ", fmt.Sprintf(" job_id=%d ", jobID)) {
			continue
		}
		found = append(found, line)
	}
	return found
}

// wantLogged finds the one line with msg and (when jobID > 0) that job id,
// checks that it carries every attribute in attrs, and returns it.
func wantLogged(t *testing.T, logs, msg string, jobID int64, attrs ...string) string {
	t.Helper()
	found := loggedLines(logs, msg, jobID)
	if len(found) != 1 {
		t.Errorf("log lines %q for job %d: %d, want exactly 1:\n%s", msg, jobID, len(found), strings.Join(found, "\n"))
		return ""
	}
	for _, a := range attrs {
		if !strings.Contains(found[0], a) {
			t.Errorf("log line %q lacks %q", found[0], a)
		}
	}
	return found[0]
}
