package store_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_WatchEnded: a store's watch hears the ends committed through
// another store on the same database (another process's connections): a
// completion and a cancel, in order, and never a reschedule, which is not
// an end.
func TestStore_WatchEnded(t *testing.T) {
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		watcher := storetest.MustOpen(t, b.DSN, store.Options{})
		writer := storetest.MustOpen(t, b.DSN, store.Options{})
		rescheduled := mustAccept(t, writer, acceptParams("ended-a", "a"))
		done := mustAccept(t, writer, acceptParams("ended-b", "b"))
		cancelled := mustAccept(t, writer, acceptParams("ended-c", "c"))
		woken, all := watch(t, watcher, []int64{rescheduled.ID, done.ID, cancelled.ID})
		if b.Name == "postgres" {
			waitSignal(t, all, "LISTEN in place")
		}

		c := storetest.ClaimAs(t, writer, "ended")
		retryAt := writer.Now().Add(time.Hour)
		if err := writer.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "503",
			Class: inkwell.ClassProviderError, RetryAt: &retryAt}); err != nil {
			t.Fatal(err)
		}
		c = storetest.ClaimAs(t, writer, "ended")
		if err := writer.CompleteIfRunning(t.Context(), completeParams(c)); err != nil {
			t.Fatal(err)
		}
		if _, err := writer.Cancel(t.Context(), cancelled.ID, "test"); err != nil {
			t.Fatal(err)
		}

		// An outcome group announces its ends just after its commit, a
		// cancel inside its own: the two may be heard in either order.
		var heard []int64
		for !slices.Contains(heard, cancelled.ID) || !slices.Contains(heard, done.ID) {
			select {
			case ids := <-woken:
				heard = append(heard, ids...)
			case <-time.After(10 * time.Second):
				t.Fatalf("heard %v; want jobs %d (done) and %d (cancelled)", heard, done.ID, cancelled.ID)
			}
		}
		// The reschedule would have been heard by now: its group
		// committed before the completion's. A job may be heard twice
		// (its notice, and the recheck that raced it): a waiter reads
		// its job again, no more.
		if slices.Sort(heard); !slices.Equal(slices.Compact(heard), []int64{done.ID, cancelled.ID}) {
			t.Errorf("heard %v, want only %d and %d (job %d was rescheduled: not an end)", heard, done.ID, cancelled.ID, rescheduled.ID)
		}
	})
}

// TestStore_WatchEnded_Recovery: a recovery run's ends reach the watch: on
// PostgreSQL as "look at all" (the run does not name its jobs), on SQLite
// as the waited-for job.
func TestStore_WatchEnded_Recovery(t *testing.T) {
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		watcher := storetest.MustOpen(t, b.DSN, store.Options{})
		writer := storetest.MustOpen(t, b.DSN, store.Options{})
		job := mustAccept(t, writer, acceptParams("recovered", "r"))
		woken, all := watch(t, watcher, []int64{job.ID})
		if b.Name == "postgres" {
			waitSignal(t, all, "LISTEN in place")
		}
		storetest.ClaimAs(t, writer, "dead") // left running by a lane that is gone
		l := mustLockLane(t, writer, "dead")
		if _, err := writer.Recover(t.Context(), l, false); err != nil {
			t.Fatal(err)
		}
		if b.Name == "postgres" {
			waitSignal(t, all, "the recovery run's notice")
			return
		}
		select {
		case ids := <-woken:
			if !slices.Equal(ids, []int64{job.ID}) {
				t.Errorf("woken for %v, want [%d]", ids, job.ID)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("job %d ended by recovery: no wake", job.ID)
		}
	})
}

// watch runs st.WatchEnded for the test's life, waiting for ids, and
// returns what it wakes.
func watch(t *testing.T, st *store.Store, ids []int64) (woken chan []int64, all chan struct{}) {
	t.Helper()
	woken, all = make(chan []int64, 64), make(chan struct{}, 64)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	// As the server's hub (jobwait.Hub), a job woken is no longer waited
	// for: the SQLite watch reads every waited-for job that has ended each
	// time any commit moves data_version, so an id left waiting would be
	// heard again at the next commit.
	var mu sync.Mutex
	waiting := slices.Clone(ids)
	go func() {
		stopped <- st.WatchEnded(ctx, store.WatchParams{
			Wake: func(got []int64) {
				mu.Lock()
				waiting = slices.DeleteFunc(waiting, func(id int64) bool { return slices.Contains(got, id) })
				mu.Unlock()
				woken <- got
			},
			WakeAll: func() { all <- struct{}{} },
			Waiting: func() []int64 {
				mu.Lock()
				defer mu.Unlock()
				return slices.Clone(waiting)
			},
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != context.Canceled {
			t.Errorf("WatchEnded returned %v, want context.Canceled", err)
		}
	})
	return woken, all
}

func waitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
	}
}

// TestStore_WatchEnded_LostNotice: on PostgreSQL an outcome group
// announces its ends after its commit, so a process that dies in between
// never announces them; the watch finds such an end by reading the
// waited-for jobs at its recheck.
func TestStore_WatchEnded_LostNotice(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	watcher := storetest.MustOpen(t, dsn, store.Options{})
	store.SetEndedRecheck(watcher, 20*time.Millisecond)
	writer := storetest.MustOpen(t, dsn, store.Options{})
	job := mustAccept(t, writer, acceptParams("lost-notice", "l"))
	woken, all := watch(t, watcher, []int64{job.ID})
	waitSignal(t, all, "LISTEN in place")
	// The end committed with no notice at all, as by a process killed
	// between its commit and its notification.
	if _, err := writer.DB().ExecContext(t.Context(), `UPDATE jobs SET status = 'failed', error = 'ended without a notice',
		error_class = 'rejected', finished_at = clock_timestamp() WHERE id = $1`, job.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case ids := <-woken:
		if !slices.Equal(ids, []int64{job.ID}) {
			t.Errorf("woken for %v, want [%d]", ids, job.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("job %d ended without a notice: no wake from the recheck", job.ID)
	}
}
