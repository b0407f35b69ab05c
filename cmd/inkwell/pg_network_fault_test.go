package main_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	cli "github.com/inkwell/inkwell/cmd/inkwell"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// pgfaultSubmit sends n jobs to url and waits until each is running with
// its provider call in flight (the simulator's latency holds them).
func pgfaultSubmit(t *testing.T, url, prefix string, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range n {
		id, err := lanesPost(url, fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf(`{"prompt":"%s job %d","max_words":5}`, prefix, i))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

// pgfaultMoney checks every job against the simulator's ledger: a job the
// provider billed has exactly one charge naming that bill's request, is
// done, and was billed once.
func pgfaultMoney(t *testing.T, st *store.Store, sim *simtest.Sim, ids []int64) {
	t.Helper()
	ledger := sim.MustLedger(t)
	for _, id := range ids {
		d := pgfaultShow(t, st, id)
		e, ok := ledger.Entry(storetest.ProviderKey(t, st, id, d.Job.IdempotencyKey))
		switch {
		case ok && e.Bills > 1:
			t.Errorf("job %d billed %d times, want once", id, e.Bills)
		case ok && e.Bills == 1 && (d.Charge == nil || d.Charge.ProviderRequestID != e.RequestID || d.Job.Status != inkwell.StatusDone):
			t.Errorf("job %d: the provider billed it (request %s) but the job is %s (error %q) with charge %+v: a paid answer was thrown away",
				id, e.RequestID, d.Job.Status, d.Job.Error, d.Charge)
		case !ok && d.Charge != nil:
			t.Errorf("job %d charged %+v for a call the provider never billed", id, d.Charge)
		}
	}
}

func pgfaultAllRunning(t *testing.T, child *cli.Child, st *store.Store, ids []int64) {
	t.Helper()
	// Running in the database is not enough: a claim commits before its
	// reply reaches the lane, and a fault in between leaves a job running
	// that no call runs (a claim reply lost, another test's case). The
	// lane's log says it has the job.
	storetest.WaitFor(t, pgfaultWait, "every job running, claimed by the lane", func() bool {
		log := child.Log()
		for _, id := range ids {
			if pgfaultShow(t, st, id).Job.Status != inkwell.StatusRunning || !claimLogged(log, id) {
				return false
			}
		}
		return true
	})
}

// claimLogged reports whether log holds the lane's "job claimed" line of
// job id.
func claimLogged(log string, id int64) bool {
	want := fmt.Sprintf(" job_id=%d attempt_id=", id)
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `msg="job claimed"`) && strings.Contains(line, want) {
			return true
		}
	}
	return false
}

// The completion of a group of answers is one statement on PostgreSQL.
// When the reply to it is lost after it committed, the lane tries again:
// the retry must see that its first try landed (ErrAlreadyDone) and count
// the jobs done, with one result and one charge each.
func TestServePG_CompletionReplyLost(t *testing.T) {
	t.Parallel()
	child, proxy, st, sim := startPGFaultServe(t, 500*time.Millisecond, "--grace", "5s")
	// Armed before the lane's first completion: the connection that sends
	// the completion statement's text loses the reply to it.
	proxy.armDrop(dropRule{marker: "of the group were running"})
	ids := pgfaultSubmit(t, child.URL, "lost-completion", 3)
	storetest.WaitFor(t, pgfaultWait, "the completion's reply lost", func() bool { return proxy.droppedReplies() == 1 })
	storetest.WaitFor(t, pgfaultWait, "every job done", func() bool {
		for _, id := range ids {
			if pgfaultShow(t, st, id).Job.Status != inkwell.StatusDone {
				return false
			}
		}
		return true
	})
	storetest.WaitFor(t, 10*time.Second, "serve to log that a retried completion found its first commit landed", func() bool {
		return strings.Contains(child.Log(), "the first commit of the completion had landed")
	})
	pgfaultMoney(t, st, sim, ids)
	if n := lanesCount(t, st, `SELECT COUNT(*) FROM charges`); n != len(ids) {
		t.Errorf("%d charges, want %d", n, len(ids))
	}
	if err := child.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("serve after SIGTERM: %v, want exit 0", err)
	}
}

// Every connection between serve and PostgreSQL is reset while answers are
// on their way: the lock session ends with them, so the lane stops (exit
// non-zero, for a supervisor), but the answers in hand are stored first,
// since the database is reachable again at once and nobody has fenced the
// attempts out.
func TestServePG_ResetWhileCallsInFlight(t *testing.T) {
	t.Parallel()
	child, proxy, st, sim := startPGFaultServe(t, 2*time.Second, "--grace", "10s")
	ids := pgfaultSubmit(t, child.URL, "reset", 4)
	pgfaultAllRunning(t, child, st, ids)
	proxy.reset()
	storetest.WaitFor(t, pgfaultWait, "serve to exit after its lock session was reset", func() bool {
		return syscall.Kill(child.Pid(), 0) == syscall.ESRCH
	})
	if !strings.Contains(child.Log(), `msg="lane stopped" component=worker lane=X reason="stopped: lane_held`) {
		t.Errorf("serve's log does not say the lane stopped for its lost lock")
	}
	pgfaultMoney(t, st, sim, ids)
	for _, id := range ids {
		if d := pgfaultShow(t, st, id); d.Job.Status != inkwell.StatusDone {
			t.Errorf("job %d %s (%q) after the reset, want done", id, d.Job.Status, d.Job.Error)
		}
	}
}

// The network between serve and PostgreSQL stalls (every connection stays
// open, nothing gets through) while four provider calls are in flight;
// their answers arrive during the stall. The lane cannot prove its lock
// (the keeper's check times out after 5 s) and stops claiming — right. But
// nobody asked it to stop and nobody fenced its attempts out: the answers
// in hand are paid for, and they wait for the database "for as long as the
// process lives" (docs/recovery.md), as they do when the database is
// merely busy. The lane's own stop used to give them --grace, and when the
// stall outlasted it the process exited 1 with PROVIDER ANSWER NOT STORED:
// billed answers thrown away, their jobs left running for a restart to
// fail (Lane.operatorStop).
func TestServePG_NetworkStallKeepsAnswersInHand(t *testing.T) {
	t.Parallel()
	child, proxy, st, sim := startPGFaultServe(t, 2*time.Second, "--grace", "2s")
	ids := pgfaultSubmit(t, child.URL, "stall", 4)
	pgfaultAllRunning(t, child, st, ids)
	proxy.freeze()
	// The answers arrive within 2 s of the stall; the lane finds its lock
	// unproven about 10 s in; each write tries 10 s. The stall lasts 45 s,
	// or until serve gives the answers up.
	stallEnd := time.Now().Add(45 * time.Second)
	for time.Now().Before(stallEnd) && !strings.Contains(child.Log(), "PROVIDER ANSWER NOT STORED") {
		time.Sleep(200 * time.Millisecond)
	}
	proxy.thaw()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if lanesCount(t, st, `SELECT COUNT(*) FROM charges`) == len(ids) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if strings.Contains(child.Log(), "PROVIDER ANSWER NOT STORED") {
		t.Errorf("serve logged PROVIDER ANSWER NOT STORED after a network stall it had not been asked to stop for")
	}
	pgfaultMoney(t, st, sim, ids)
}
