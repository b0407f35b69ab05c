package worker_test

import (
	"bytes"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// TestLane_AnswerWaitsOutALockedDatabase: a provider answer that arrives
// while another connection holds SQLite's write lock is kept and counted
// (AnswersWaiting), not failed; a stop asked for meanwhile gives it the
// grace period, said loudly; stored within it, the job is done; past it,
// the lane says the answer was not stored and leaves the job running for
// recovery (no failed attempt written on a guess).
func TestLane_AnswerWaitsOutALockedDatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		freeInTime bool
	}{{"StoredWithinTheGrace", true}, {"GraceRunsOut", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := storetest.SQLitePath(t)
			st := storetest.MustOpen(t, path, store.Options{BusyTimeout: 50 * time.Millisecond})
			gate := newGatedProvider(provider.NewSim(0))
			logs := &syncBuffer{}
			r := startLane(t, st, worker.Config{Provider: gate, Grace: 2 * time.Second, DBTimeout: 500 * time.Millisecond,
				Heartbeat: time.Hour, Logger: slog.New(slog.NewTextHandler(logs, nil))})
			job := accept(t, st, "k", "worth keeping", 5)
			r.lane.Wake()
			gate.waitStarted(t)
			lock := holdWriteLock(t, path)
			gate.release()

			storetest.WaitFor(t, waitLimit, "the answer counted as waiting", func() bool { return r.lane.AnswersWaiting() == 1 })
			storetest.WaitFor(t, waitLimit, "the wait logged", func() bool { return logs.contains("answer waiting to be stored") })
			r.cancel()
			storetest.WaitFor(t, waitLimit, "the stop said loudly", func() bool {
				return logs.contains("stopping with a provider answer not stored yet")
			})
			if tc.freeInTime {
				if err := lock.Commit(); err != nil {
					t.Fatal(err)
				}
				if err := r.wait(t); err != nil {
					t.Errorf("Run = %v, want nil: the answer was stored within the grace period", err)
				}
				waitJob(t, st, job.ID, "done", isStatus(inkwell.StatusDone))
				if n := r.lane.AnswersWaiting(); n != 0 {
					t.Errorf("AnswersWaiting() = %d after the answer was stored, want 0", n)
				}
				return
			}
			err := r.wait(t)
			if err == nil || !strings.Contains(err.Error(), "outcome not recorded") {
				t.Errorf("Run = %v, want the unrecorded outcome", err)
			}
			if !logs.contains("PROVIDER ANSWER NOT STORED") {
				t.Errorf("the lost answer was not logged loudly:\n%s", logs.String())
			}
			if err := lock.Commit(); err != nil {
				t.Fatal(err)
			}
			d, err := st.Show(t.Context(), job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if d.Job.Status != inkwell.StatusRunning || len(d.Attempts) != 1 || d.Attempts[0].Status != inkwell.StatusRunning {
				t.Errorf("job %+v attempts %+v, want both still running: only recovery may close them", d.Job, d.Attempts)
			}
		})
	}
}

// holdWriteLock takes SQLite's write lock on path from a connection of
// its own (BEGIN IMMEDIATE) and holds it until the returned transaction
// ends.
func holdWriteLock(t *testing.T, path string) *sql.Tx {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	return tx
}

// syncBuffer is a log sink the test can read while the lane writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) contains(sub string) bool { return strings.Contains(s.String(), sub) }
