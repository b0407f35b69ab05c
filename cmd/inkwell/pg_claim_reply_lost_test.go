package main_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	cli "github.com/inkwell/inkwell/cmd/inkwell"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

const pgfaultWait = 60 * time.Second

// startPGFaultServe starts `inkwell serve` on PostgreSQL through a fault
// proxy, calling a real provider simulator with the given latency.
func startPGFaultServe(t *testing.T, latency time.Duration, extra ...string) (*cli.Child, *pgFaultProxy, *store.Store, *simtest.Sim) {
	t.Helper()
	dsn := storetest.PostgresDSN(t)
	st := storetest.MustOpen(t, dsn, store.Options{})
	proxy, pdsn := startPGFaultProxy(t, dsn)
	sim := simtest.MustStart(t, providersim.Config{Latency: latency})
	args := append([]string{"serve", "--db", pdsn, "--addr", "127.0.0.1:0", "--lane", "X",
		"--provider", "openai", "--provider-url", sim.URL, "--provider-timeout", "60s",
		"--heartbeat", "200ms", "--poll", "50ms"}, extra...)
	c := cli.StartChild(t, lanesBinary(t), append(os.Environ(), "INKWELL_CRASH_AT="), pgfaultWait, args...)
	return c, proxy, st, sim
}

func pgfaultShow(t *testing.T, st *store.Store, id int64) inkwell.JobDetail {
	t.Helper()
	d, err := st.Show(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A claim is one statement and its own transaction on PostgreSQL. When the
// connection breaks after the server committed it but before its reply
// reached the lane (a reset after the commit: the classic ambiguous
// commit), the job is running, with a running attempt, on a lane that is
// alive and holds its lock, and that lane does not know it claimed it.
// Nobody calls the provider for it, no rescue touches it (the lane's lock
// is held), and no recovery runs until the process restarts: the job must
// not stay running forever. The lane puts it back (stranded.go), nothing
// having been sent, and it ends done on a second attempt.
func TestServePG_ClaimReplyLostJobPutBack(t *testing.T) {
	t.Parallel()
	child, proxy, st, sim := startPGFaultServe(t, 100*time.Millisecond, "--grace", "5s")

	proxy.armDrop(dropRule{app: "inkwell/claim"})
	id, err := lanesPost(child.URL, "lost-claim-reply", `{"prompt":"a claim whose reply is lost","max_words":5}`)
	if err != nil {
		t.Fatal(err)
	}
	storetest.WaitFor(t, pgfaultWait, "the claim's reply lost", func() bool { return proxy.droppedReplies() == 1 })
	d := pgfaultShow(t, st, id)
	if d.Job.Status != inkwell.StatusRunning || len(d.Attempts) != 1 || d.Attempts[0].Status != inkwell.StatusRunning {
		t.Fatalf("right after the lost reply: job %s with %d attempts, want running with its attempt running (the claim committed)", d.Job.Status, len(d.Attempts))
	}

	// A second job goes through the same lane meanwhile: the lane is alive.
	other, err := lanesPost(child.URL, "after-lost-claim", `{"prompt":"a job after the lost reply","max_words":5}`)
	if err != nil {
		t.Fatal(err)
	}
	storetest.WaitFor(t, pgfaultWait, "the second job done", func() bool { return pgfaultShow(t, st, other).Job.Status == inkwell.StatusDone })

	// The lane puts it back once it is older than any claim still on its
	// way back (the database time-out, 10 s, and a margin), at a heartbeat.
	deadline := time.Now().Add(pgfaultWait)
	for time.Now().Before(deadline) && pgfaultShow(t, st, id).Job.Status != inkwell.StatusDone {
		time.Sleep(200 * time.Millisecond)
	}
	d = pgfaultShow(t, st, id)
	key := storetest.ProviderKey(t, st, id, d.Job.IdempotencyKey)
	e, _ := sim.MustLedger(t).Entry(key)
	if d.Job.Status != inkwell.StatusDone {
		var atts []string
		for _, a := range d.Attempts {
			atts = append(atts, fmt.Sprintf("#%d %s on %s", a.AttemptNumber, a.Status, a.Lane))
		}
		t.Errorf("job %d whose claim reply was lost: %s %v after %s with the lane alive and idle (provider calls for it: %d); "+
			"want it run to done: it is stranded running on a live lane until a restart", id, d.Job.Status, atts, pgfaultWait, e.Calls)
	} else if len(d.Attempts) != 2 || d.Attempts[0].Status != inkwell.StatusFailed || d.Attempts[0].ErrorClass != inkwell.ClassNotSent {
		t.Errorf("job %d done with attempts %+v; want the stranded attempt #1 failed not_sent (never called), then #2 done", id, d.Attempts)
	}
	if e.Bills > 1 {
		t.Errorf("job %d billed %d times, want at most once", id, e.Bills)
	}
	if err := child.Signal(t, 15); err != nil { // SIGTERM
		t.Logf("serve after SIGTERM: %v", err)
	}
}
