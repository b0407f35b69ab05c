package worker_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// TestLane_SlotFreesWhileItsAnswerIsWritten: on PostgreSQL, where a claim
// is a statement of its own, a slot frees when its call ends. With one
// slot, and job 0's completion held behind a row lock the test takes, the
// lane claims and calls the next jobs meanwhile, one at a time, each
// answer taking one of the answersPerSlot places for answers written
// without a slot taken (job 0's is the first). The call after the last
// place is taken keeps its slot, so the job after it stays queued. When
// the lock is let go, all are done, each with one attempt; and the places
// are free again: a later job D whose write is held the same way lets job
// E be called.
func TestLane_SlotFreesWhileItsAnswerIsWritten(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.PostgresDSN(t), store.Options{})
	places := worker.AnswersPerSlot
	jobs := make([]inkwell.Job, places+2) // places answers written, one call keeping its slot, one job queued
	for i := range jobs {
		jobs[i] = accept(t, st, fmt.Sprint("j", i), fmt.Sprint("poem ", i), 5)
	}
	p := &heldCalls{inner: provider.NewSim(0), started: make(chan string, 16), ended: make(chan string, 16),
		hold: map[string]chan struct{}{"poem 0": make(chan struct{}), "poem d": make(chan struct{})}}
	startLane(t, st, worker.Config{Provider: p, Concurrency: 1, Poll: 10 * time.Millisecond})

	tx := p.holdWrite(t, st, jobs[0], "poem 0")
	defer tx.Rollback()
	last := fmt.Sprint("poem ", places) // the call that finds every place taken
	p.wait(t, p.started, last)
	p.wait(t, p.ended, last)
	time.Sleep(200 * time.Millisecond) // room for a wrong claim of the last job to happen
	for i, j := range jobs {
		want := inkwell.StatusRunning
		if i == len(jobs)-1 {
			want = inkwell.StatusQueued
		}
		d, err := st.Show(t.Context(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Job.Status != want {
			t.Errorf("job %d (the %d-th) is %s while job 0's answer waits to be written, want %s", j.ID, i, d.Job.Status, want)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		d := waitJob(t, st, j.ID, "done", isStatus(inkwell.StatusDone))
		if len(d.Attempts) != 1 || d.Charge == nil {
			t.Errorf("job %d: %d attempts, charge %+v; want one attempt and its charge", j.ID, len(d.Attempts), d.Charge)
		}
	}
	// The places for answers written without a slot are free again.
	d := accept(t, st, "d", "poem d", 5)
	e := accept(t, st, "e", "poem e", 5)
	tx = p.holdWrite(t, st, d, "poem d")
	defer tx.Rollback()
	p.wait(t, p.started, "poem e")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	for _, j := range []inkwell.Job{d, e} {
		waitJob(t, st, j.ID, "done", isStatus(inkwell.StatusDone))
	}
	if n := p.most.Load(); n != 1 {
		t.Errorf("%d provider calls in flight at once, want at most 1 (--concurrency 1)", n)
	}
}

// heldCalls is the simulator behind a counter of calls in flight, which
// holds each call whose prompt is in hold until its channel is closed, and
// tells each call's start and end by its prompt.
type heldCalls struct {
	inner          inkwell.Provider
	hold           map[string]chan struct{}
	started, ended chan string
	inFlight, most atomic.Int64
	mu             sync.Mutex
}

// holdWrite waits for job's call (prompt), locks the job's row in a
// transaction it returns, then lets the call answer: the answer is in
// hand and its completion waits on the lock until the transaction ends.
func (h *heldCalls) holdWrite(t *testing.T, st *store.Store, job inkwell.Job, prompt string) *sql.Tx {
	t.Helper()
	h.wait(t, h.started, prompt)
	tx, err := st.DB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(t.Context(), `SELECT id FROM jobs WHERE id = $1 FOR UPDATE`, job.ID); err != nil {
		t.Fatal(err)
	}
	close(h.hold[prompt])
	return tx
}

func (h *heldCalls) Generate(ctx context.Context, req inkwell.ProviderRequest) (inkwell.ProviderResponse, error) {
	n := h.inFlight.Add(1)
	h.mu.Lock()
	h.most.Store(max(h.most.Load(), n))
	h.mu.Unlock()
	defer h.inFlight.Add(-1)
	h.started <- req.Prompt
	defer func() { h.ended <- req.Prompt }()
	if ch, ok := h.hold[req.Prompt]; ok {
		<-ch
	}
	return h.inner.Generate(ctx, req)
}

// wait waits for prompt on ch, passing over the others.
func (h *heldCalls) wait(t *testing.T, ch chan string, prompt string) {
	t.Helper()
	for {
		select {
		case got := <-ch:
			if got == prompt {
				return
			}
		case <-time.After(waitLimit):
			t.Fatalf("no call of %q within %v", prompt, waitLimit)
		}
	}
}
