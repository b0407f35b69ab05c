package worker_test

import (
	"context"
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
// is a statement of its own, a slot frees when its call ends. With C
// slots, and every completion held back (the test holds a SHARE lock on
// results, which every completion inserts into and no claim touches), the
// lane goes on calling: each answer takes one of the answersPerSlot × C
// places for answers written without a slot taken, and once they are all
// taken each of the C slots keeps its answered call. So exactly
// (answersPerSlot + 1) × C jobs are running and the rest stay queued,
// never more than C calls at once. When the lock is let go every job is
// done with one attempt; a second round shows every place came back.
func TestLane_SlotFreesWhileItsAnswerIsWritten(t *testing.T) {
	t.Parallel()
	for _, slots := range []int{1, 3} {
		t.Run(fmt.Sprint("slots=", slots), func(t *testing.T) {
			t.Parallel()
			st := storetest.MustOpen(t, storetest.PostgresDSN(t), store.Options{})
			want := (worker.AnswersPerSlot + 1) * slots // running while the writes are held
			p := &countedCalls{inner: provider.NewSim(0)}
			var lane *running
			for round := range 2 {
				tx, err := st.DB().BeginTx(t.Context(), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				if _, err := tx.ExecContext(t.Context(), `LOCK TABLE results IN SHARE MODE`); err != nil {
					t.Fatal(err)
				}
				jobs := make([]inkwell.Job, want+3)
				for i := range jobs {
					jobs[i] = accept(t, st, fmt.Sprint("r", round, "j", i), fmt.Sprint("round ", round, " poem ", i), 5)
				}
				if lane == nil {
					lane = startLane(t, st, worker.Config{Provider: p, Concurrency: slots, Poll: 10 * time.Millisecond})
				}
				running := func() (n int) {
					if err := st.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM jobs WHERE status = 'running'`).Scan(&n); err != nil {
						t.Fatal(err)
					}
					return n
				}
				for deadline := time.Now().Add(waitLimit); running() < want; time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("round %d: %d jobs running after %v, want %d while the writes are held", round, running(), waitLimit, want)
					}
				}
				time.Sleep(200 * time.Millisecond) // room for a wrong claim to happen
				if n := running(); n != want {
					t.Errorf("round %d: %d jobs running while the writes are held, want %d ((answersPerSlot + 1) × %d slots)", round, n, want, slots)
				}
				for i, j := range jobs[want:] {
					if d, err := st.Show(t.Context(), j.ID); err != nil || d.Job.Status != inkwell.StatusQueued {
						t.Errorf("round %d: job %d (the %d-th) is %s (%v) while the writes are held, want queued", round, j.ID, want+i, d.Job.Status, err)
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
			}
			if n := p.most.Load(); n > int64(slots) {
				t.Errorf("%d provider calls in flight at once, want at most %d (--concurrency %d)", n, slots, slots)
			}
		})
	}
}

// TestLane_HungCallDoesNotHoldBackTheBacklog: with a backlog a lane
// gathers freed slots before it claims (gatherFreed), but a call that
// never ends must not hold back its other slots: the gather gives up on
// it, and sixty fast jobs queued behind it are all done while it hangs.
func TestLane_HungCallDoesNotHoldBackTheBacklog(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		accept(t, st, "hang", "hang", 5)
		var jobs []inkwell.Job
		for i := range 60 {
			jobs = append(jobs, accept(t, st, fmt.Sprint("f", i), fmt.Sprint("poem ", i), 5))
		}
		startLane(t, st, worker.Config{Provider: hangOne{provider.NewSim(0)}, Concurrency: 4, Grace: 10 * time.Millisecond})
		for _, j := range jobs {
			waitJob(t, st, j.ID, "done", isStatus(inkwell.StatusDone))
		}
	})
}

// hangOne is the simulator, but the call whose prompt is "hang" never
// answers (until its context ends), and every other takes 2 ms.
type hangOne struct{ inner inkwell.Provider }

func (h hangOne) Generate(ctx context.Context, req inkwell.ProviderRequest) (inkwell.ProviderResponse, error) {
	if req.Prompt == "hang" {
		<-ctx.Done()
		return inkwell.ProviderResponse{}, ctx.Err()
	}
	time.Sleep(2 * time.Millisecond)
	return h.inner.Generate(ctx, req)
}

// countedCalls is the simulator behind a counter of calls in flight,
// which keeps the most it saw at once.
type countedCalls struct {
	inner          inkwell.Provider
	inFlight, most atomic.Int64
	mu             sync.Mutex
}

func (h *countedCalls) Generate(ctx context.Context, req inkwell.ProviderRequest) (inkwell.ProviderResponse, error) {
	n := h.inFlight.Add(1)
	h.mu.Lock()
	h.most.Store(max(h.most.Load(), n))
	h.mu.Unlock()
	defer h.inFlight.Add(-1)
	return h.inner.Generate(ctx, req)
}
