package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// The operator views compare against the database's wall clock, which a
// test cannot stop. So the store's injected clock writes each row at a
// chosen distance from the wall clock:
//
//   - a live lane beats one minute ahead of the wall clock: it stays
//     fresher than lane_silence_seconds (15 s) for the next 75 s of test
//     time, however slow the machine (a clock ahead counts as fresh);
//   - a dead lane beat an hour ago, far past any threshold;
//   - an age is asserted within [want, want+ageSlack]: the time the test
//     itself takes is the only slack.

const ageSlack = 120 // seconds

// ovFixture is one fresh store with an injectable clock.
type ovFixture struct {
	t   *testing.T
	ctx context.Context
	s   *store.Store
	clk *storetest.WallClock
	// locks are the lanes' locks this fixture took: claims go under them,
	// as a lane's do (ClaimUpTo).
	locks map[string]*store.LaneLock
}

// runOverview runs fn on every backend with a fresh fixture.
func runOverview(t *testing.T, fn func(f *ovFixture)) {
	t.Helper()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		clk := &storetest.WallClock{}
		clk.At(0)
		s := storetest.MustOpen(t, b.DSN, store.Options{NowFunc: clk.Now})
		fn(&ovFixture{t: t, ctx: t.Context(), s: s, clk: clk})
	})
}

func (f *ovFixture) accept(key string) inkwell.Job {
	f.t.Helper()
	payload := fmt.Sprintf(`{"prompt":%q,"account":"default","max_words":50}`, "write about "+key)
	job, _, err := f.s.Accept(f.ctx, store.AcceptParams{IdempotencyKey: key, RequestHash: inkwell.RequestHash([]byte(payload)), Payload: []byte(payload)})
	if err != nil {
		f.t.Fatalf("Accept(%s): %v", key, err)
	}
	return job
}

// lane takes the lane's lock and registers it (heartbeat = the clock now).
func (f *ovFixture) lane(name string) *store.LaneLock {
	f.t.Helper()
	l, err := f.s.LockLane(f.ctx, name)
	if err != nil {
		f.t.Fatalf("LockLane(%s): %v", name, err)
	}
	f.t.Cleanup(func() { l.Release() })
	if err := f.s.RegisterLane(f.ctx, l); err != nil {
		f.t.Fatalf("RegisterLane(%s): %v", name, err)
	}
	if f.locks == nil {
		f.locks = map[string]*store.LaneLock{}
	}
	f.locks[name] = l
	return l
}

func (f *ovFixture) claim(lane string) *store.Claimed {
	f.t.Helper()
	l := f.locks[lane]
	if l == nil {
		f.t.Fatalf("claim on lane %s: the fixture holds no lock of it", lane)
	}
	cs, err := f.s.ClaimUpTo(f.ctx, l, 1)
	if err != nil || len(cs) != 1 {
		f.t.Fatalf("ClaimUpTo(%s, 1) = %v, %v; want a claimed job", lane, cs, err)
	}
	return cs[0]
}

// fail ends c's attempt and job failed, with the class a worker gives msg.
func (f *ovFixture) fail(c *store.Claimed, class inkwell.ErrorClass, msg string) {
	f.t.Helper()
	if err := f.s.FailIfRunning(f.ctx, store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: msg, Class: class}); err != nil {
		f.t.Fatalf("FailIfRunning(job %d): %v", c.Job.ID, err)
	}
}

func (f *ovFixture) overview() map[string]store.OverviewRow {
	f.t.Helper()
	rows, err := f.s.Overview(f.ctx)
	if err != nil {
		f.t.Fatalf("Overview: %v", err)
	}
	var order []string
	m := map[string]store.OverviewRow{}
	for _, r := range rows {
		order = append(order, r.Status)
		m[r.Status] = r
	}
	if diff := cmp.Diff(inkwell.JobStatuses, order); diff != "" {
		f.t.Fatalf("job_overview statuses (-want +got):\n%s", diff)
	}
	return m
}

func (f *ovFixture) board() map[int64]store.BoardRow {
	f.t.Helper()
	rows, err := f.s.Board(f.ctx, 0)
	if err != nil {
		f.t.Fatalf("Board: %v", err)
	}
	m := map[int64]store.BoardRow{}
	for _, r := range rows {
		m[r.ID] = r
	}
	return m
}

func wantAction(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s next_action:\n got  %q\n want %q", what, got, want)
	}
}

func wantActionPrefix(t *testing.T, what, got, prefix string) {
	t.Helper()
	if !strings.HasPrefix(got, prefix) {
		t.Errorf("%s next_action:\n got  %q\n want it to start %q", what, got, prefix)
	}
}

func wantAge(t *testing.T, what string, got *int64, want int64) {
	t.Helper()
	if got == nil || *got < want || *got > want+ageSlack {
		t.Errorf("%s age_seconds = %v, want %d..%d", what, deref(got), want, want+ageSlack)
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// silentHeld is the action for the running jobs of a silent lane whose
// holder still holds its lock, as each dialect words it: PostgreSQL sees
// the session lock in pg_locks, SQLite cannot see a flock and names both
// cases.
func (f *ovFixture) silentHeld(lane string) string {
	f.t.Helper()
	l := f.laneState(lane)
	if f.s.Dialect() == "postgres" {
		return fmt.Sprintf("lane %s silent for %s, its process pid %d on host %s still holds the lock (stopped or hung?): "+
			"inspect it; ending it lets recovery close its attempts", lane, l.HeartbeatAge, l.PID, l.Host)
	}
	return fmt.Sprintf("lane %s silent for %s (pid %d on host %s): if that process still runs it holds the lane (stopped or hung?): "+
		"inspect it (ps -o pid,stat,cmd -p %d); ending it lets recovery close its attempts; if it is gone, restart the lane: "+
		"inkwell serve --lane %s", lane, l.HeartbeatAge, l.PID, l.Host, l.PID, lane)
}

func (f *ovFixture) laneState(lane string) store.LaneState {
	f.t.Helper()
	lanes, err := f.s.LiveLanes(f.ctx)
	if err != nil {
		f.t.Fatalf("LiveLanes: %v", err)
	}
	for _, l := range lanes {
		if l.Lane == lane {
			return l
		}
	}
	f.t.Fatalf("lane %s is not in lane_liveness: %+v", lane, lanes)
	return store.LaneState{}
}

// setAnswersWaiting writes what a lane's heartbeat reports: provider
// answers it holds and could not store.
func (f *ovFixture) setAnswersWaiting(lane string, n int) {
	f.t.Helper()
	if _, err := f.s.WriteDB().ExecContext(f.ctx, fmt.Sprintf(`UPDATE lanes SET answers_waiting = %d WHERE name = '%s'`, n, lane)); err != nil {
		f.t.Fatalf("set answers_waiting: %v", err)
	}
}

// dbTime is a SQL expression for the database's clock plus offset.
func (f *ovFixture) dbTime(offset time.Duration) string {
	secs := int(offset.Seconds())
	if f.s.Dialect() == "postgres" {
		return fmt.Sprintf("statement_timestamp() + make_interval(secs => %d)", secs)
	}
	return fmt.Sprintf("strftime('%%Y-%%m-%%dT%%H:%%M:%%f000Z', 'now', '%+d seconds')", secs)
}

func (f *ovFixture) wantCountsKept(when string) {
	f.t.Helper()
	wantCountsKept(f.t, f.s, when)
}

func TestStore_Overview(t *testing.T) {
	t.Parallel()
	t.Run("Columns", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			want := map[string][]string{
				"job_overview":  {"status", "jobs", "oldest_job_id", "oldest_age_seconds", "oldest_age", "next_action"},
				"job_board":     {"id", "status", "lane", "attempt", "since", "age_seconds", "age", "error", "next_action", "error_class", "pruned_at", "claim_turn"},
				"lane_liveness": {"lane", "state", "alive", "heartbeat_age_seconds", "heartbeat_age", "running_jobs", "heartbeat_at", "pid", "host", "incarnation", "started_at", "stopped_at", "stop_reason", "answers_waiting", "slots", "slots_in_use", "paused_until"},
			}
			for view, cols := range want {
				rows, err := s.DB().QueryContext(t.Context(), `SELECT * FROM `+view)
				if err != nil {
					t.Fatalf("SELECT * FROM %s: %v", view, err)
				}
				got, err := rows.Columns()
				rows.Close()
				if err != nil {
					t.Fatalf("%s columns: %v", view, err)
				}
				if diff := cmp.Diff(cols, got); diff != "" {
					t.Errorf("%s columns (-want +got):\n%s", view, diff)
				}
			}
		})
	})
	t.Run("EmptyHasFourRows", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			got, err := f.s.Overview(f.ctx)
			if err != nil {
				t.Fatalf("Overview: %v", err)
			}
			want := []store.OverviewRow{
				{Status: "queued", NextAction: "nothing queued"},
				{Status: "running", NextAction: "nothing running"},
				{Status: "failed", NextAction: "nothing to retry"},
				{Status: "done", NextAction: "nothing to do: each has its result and charge"},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("empty overview (-want +got):\n%s", diff)
			}
			if b := f.board(); len(b) != 0 {
				t.Errorf("board = %v, want no rows", b)
			}
		})
	})
	t.Run("QueuedNoLaneEver", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(-10 * time.Minute)
			j := f.accept("k1")
			o := f.overview()["queued"]
			if o.Jobs != 1 || o.OldestJobID == nil || *o.OldestJobID != j.ID {
				t.Errorf("queued row = %+v, want 1 job, oldest %d", o, j.ID)
			}
			wantAge(t, "queued", o.OldestAgeSeconds, 600)
			wantAction(t, "queued", o.NextAction, "no live worker lane: start inkwell serve (no lane has ever registered)")
		})
	})
	t.Run("QueuedLiveLane", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(time.Minute)
			f.lane("east")
			j1, j2 := f.accept("k1"), f.accept("k2")
			wantAction(t, "queued", f.overview()["queued"].NextAction, "wait: lane east claims next")
			b := f.board()
			wantAction(t, "board job 1", b[j1.ID].NextAction, "wait: lane east claims next")
			wantAction(t, "board job 2", b[j2.ID].NextAction, "wait: 1 queued ahead; live lanes claim round robin across accounts")
		})
	})
	t.Run("QueuedBusyLiveLane", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(time.Minute)
			f.lane("east")
			f.accept("k1")
			f.claim("east")
			f.accept("k2")
			wantAction(t, "queued", f.overview()["queued"].NextAction, "wait: lane east claims next, when its running job ends")
		})
	})
	t.Run("QueuedSilentOrStoppedLaneIsNotWaiting", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(-time.Hour)
			l := f.lane("east")
			f.clk.At(time.Minute)
			f.accept("k1")
			wantActionPrefix(t, "queued (silent lane)", f.overview()["queued"].NextAction,
				"no live worker lane: start inkwell serve (last seen: east silent 1h00m")
			if err := f.s.StopLane(f.ctx, l, "shutdown"); err != nil {
				t.Fatalf("StopLane: %v", err)
			}
			wantAction(t, "queued (stopped lane)", f.overview()["queued"].NextAction,
				"no live worker lane: start inkwell serve (last seen: east stopped 0s)")
		})
	})
	t.Run("QueuedIdleLiveLaneIsNotMoving", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(-time.Hour)
			j := f.accept("k1")
			f.clk.At(time.Minute)
			f.lane("east")
			o := f.overview()["queued"]
			wantAge(t, "queued", o.OldestAgeSeconds, 3600)
			wantActionPrefix(t, "queued", o.NextAction,
				fmt.Sprintf("not moving: lane east is alive and idle but has not claimed job %d, queued 1h0", j.ID))
		})
	})
	t.Run("RetriedJobQueuedSinceItsLastAttempt", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(-time.Hour)
			f.accept("k1")
			f.lane("east")
			c := f.claim("east")
			f.clk.At(-10 * time.Minute)
			f.fail(c, inkwell.ClassProviderError, "provider: HTTP 503")
			if _, err := f.s.RetryIfFailed(f.ctx, c.Job.ID, store.ActorCLI); err != nil {
				t.Fatalf("RetryIfFailed: %v", err)
			}
			r := f.board()[c.Job.ID]
			if r.Status != "queued" || r.Attempt != 1 {
				t.Errorf("board row = %+v, want queued after attempt 1", r)
			}
			wantAge(t, "retried job", r.AgeSeconds, 600)
		})
	})
	t.Run("RunningLiveLane", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(time.Minute)
			f.lane("east")
			f.accept("k1")
			c := f.claim("east")
			o := f.overview()["running"]
			if o.Jobs != 1 || o.OldestJobID == nil || *o.OldestJobID != c.Job.ID {
				t.Errorf("running row = %+v, want 1 job, oldest %d", o, c.Job.ID)
			}
			wantAction(t, "running", o.NextAction, "wait: running on live lane east (1 of 1 slots)")
			r := f.board()[c.Job.ID]
			if r.Lane != "east" || r.Attempt != 1 {
				t.Errorf("board row = %+v, want lane east, attempt 1", r)
			}
			wantActionPrefix(t, "board", r.NextAction, "wait: running on live lane east (attempt 1, heartbeat ")
		})
	})
	t.Run("RunningLaneSlotsAndPause", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(time.Minute)
			f.lane("east")
			f.accept("k1")
			f.accept("k2")
			f.claim("east")
			f.claim("east")
			if _, err := f.s.WriteDB().ExecContext(f.ctx, `UPDATE lanes SET slots = 16, slots_in_use = 2`); err != nil {
				t.Fatal(err)
			}
			wantAction(t, "running", f.overview()["running"].NextAction, "wait: running on live lane east (2 of 16 slots)")
			// A provider's 429 holds the lane's calls: the row says until when.
			if _, err := f.s.WriteDB().ExecContext(f.ctx, `UPDATE lanes SET paused_until = `+f.dbTime(time.Hour)); err != nil {
				t.Fatal(err)
			}
			wantActionPrefix(t, "running", f.overview()["running"].NextAction,
				"wait: running on live lane east (2 of 16 slots, paused by the provider's 429 until ")
			if l := f.laneState("east"); l.Slots != 16 || l.SlotsInUse != 2 || l.PausedUntil == nil {
				t.Errorf("lane_liveness east = %+v, want 16 slots, 2 in use, paused", l)
			}
			// A pause that has ended is not shown.
			if _, err := f.s.WriteDB().ExecContext(f.ctx, `UPDATE lanes SET paused_until = `+f.dbTime(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			wantAction(t, "running", f.overview()["running"].NextAction, "wait: running on live lane east (2 of 16 slots)")
		})
	})
	t.Run("RunningDeadLaneThenRecovery", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(-time.Hour)
			l := f.lane("east")
			f.accept("k1")
			c := f.claim("east")
			o := f.overview()["running"]
			wantAge(t, "running", o.OldestAgeSeconds, 3600)
			// The lane is silent, but its holder (this test) still runs and
			// holds the lock: the action must not say "restart" alone, which
			// the lock would refuse.
			held := f.silentHeld("east")
			wantAction(t, "running", o.NextAction, held)
			wantAction(t, "board", f.board()[c.Job.ID].NextAction, held)
			if run, err := f.s.LastRecoveryRun(f.ctx); err != nil || run != nil {
				t.Fatalf("LastRecoveryRun before any = %v, %v; want nil, nil", run, err)
			}

			// The holder ends: PostgreSQL sees its lock free and says the lane
			// is dead; SQLite cannot see a flock, so its words covered this.
			l.Release()
			if f.s.Dialect() == "postgres" {
				dead := "lane east is dead (its lock is free): restart it: inkwell serve --lane east"
				wantAction(t, "running (lock free)", f.overview()["running"].NextAction, dead)
				wantAction(t, "board (lock free)", f.board()[c.Job.ID].NextAction, dead)
			} else {
				wantAction(t, "running (holder gone)", f.overview()["running"].NextAction, held)
			}

			// Do what the action says: the lane restarts and recovers.
			f.clk.At(0)
			l2, err := f.s.LockLane(f.ctx, "east")
			if err != nil {
				t.Fatalf("LockLane after release: %v", err)
			}
			defer l2.Release()
			rep, err := f.s.Recover(f.ctx, l2, false)
			if err != nil || rep.JobsFailed != 1 {
				t.Fatalf("Recover = %+v, %v; want 1 job failed", rep, err)
			}
			ov := f.overview()
			if ov["running"].Jobs != 0 || ov["failed"].Jobs != 1 {
				t.Errorf("after recovery running %d, failed %d; want 0, 1", ov["running"].Jobs, ov["failed"].Jobs)
			}
			wantAction(t, "failed", ov["failed"].NextAction, fmt.Sprintf("inspect the error, then inkwell retry %d "+
				"(the worker died during the attempt, so the provider may already have billed it; "+
				"a provider that honours keys answers the retry from its record, one that ignores them (openai) may bill twice: check its usage first); "+
				"1 worker_restarted: the worker died during the attempt, so the provider may already have billed them; "+
				"a provider that honours keys answers a retry from its record, one that ignores them (openai) may bill twice: check its usage first", c.Job.ID))
			wantAction(t, "board", f.board()[c.Job.ID].NextAction, fmt.Sprintf("inspect the error, then inkwell retry %d "+
				"(the worker died during the attempt, so the provider may already have billed it; "+
				"a provider that honours keys answers the retry from its record, one that ignores them (openai) may bill twice: check its usage first)", c.Job.ID))
			f.wantCountsKept("after recovery")

			run, err := f.s.LastRecoveryRun(f.ctx)
			if err != nil || run == nil || run.ID != rep.RunID || run.JobsFailed != 1 || run.AttemptsClosed != 1 {
				t.Fatalf("LastRecoveryRun = %+v, %v; want run %d with 1 attempt closed, 1 job failed", run, err, rep.RunID)
			}
			got, err := f.s.RecoveredAttempts(f.ctx, run.ID)
			want := []store.RecoveredAttempt{{JobID: c.Job.ID, AttemptID: c.Attempt.ID, AttemptNumber: 1, Lane: "east"}}
			if err != nil {
				t.Fatalf("RecoveredAttempts: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("RecoveredAttempts (-want +got):\n%s", diff)
			}
		})
	})
	t.Run("RunningDeadLaneBesideLiveLane", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(-time.Hour)
			east := f.lane("east")
			f.accept("k1")
			c := f.claim("east")
			f.clk.At(time.Minute)
			f.lane("west")
			wantAction(t, "board", f.board()[c.Job.ID].NextAction, f.silentHeld("east"))
			wantAction(t, "running", f.overview()["running"].NextAction, f.silentHeld("east"))
			east.Release()
			// Only PostgreSQL lanes rescue each other (worker/rescue.go), and
			// only PostgreSQL can see that the lock is free.
			got, ov := f.board()[c.Job.ID].NextAction, f.overview()["running"].NextAction
			if f.s.Dialect() == "postgres" {
				dead := "lane east is dead (its lock is free): restart it, or a live lane rescues its jobs within --rescue-interval"
				wantAction(t, "board (lock free)", got, dead)
				wantAction(t, "running (lock free)", ov, dead)
			} else {
				wantAction(t, "board (holder gone)", got, f.silentHeld("east"))
				if strings.Contains(got+ov, "rescue") {
					t.Errorf("sqlite actions %q, %q speak of a rescue: only PostgreSQL lanes rescue each other", got, ov)
				}
			}
		})
	})
	t.Run("RunningOnStoppedLane", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(time.Minute)
			east := f.lane("east")
			f.accept("k1")
			c := f.claim("east")
			f.lane("west")
			// A stop recorded while a job still runs (say the grace ran out
			// and the process died before it could fail the job).
			if err := f.s.StopLane(f.ctx, east, "shutdown"); err != nil {
				t.Fatalf("StopLane: %v", err)
			}
			want := "restart that lane: its startup recovery closes these as failed (lane east stopped, last heartbeat "
			got := f.board()[c.Job.ID].NextAction
			wantActionPrefix(t, "board", got, want)
			wantActionPrefix(t, "running", f.overview()["running"].NextAction,
				"restart that lane: its startup recovery closes these as failed (1 on lane east stopped, last heartbeat ")
			const rescue = "; live lanes rescue them by themselves once that lane's lock session ends"
			if has := strings.HasSuffix(got, rescue); has != (f.s.Dialect() == "postgres") {
				t.Errorf("%s board action %q: ends with the rescue clause = %v, want %v", f.s.Dialect(), got, has, !has)
			}
		})
	})
	t.Run("AnswersWaitingComeFirst", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(time.Minute)
			f.lane("east")
			f.accept("k1")
			c := f.claim("east")
			f.setAnswersWaiting("east", 2)
			const waiting = "answer waiting to be stored: lane east holds 2 provider answers the database has not taken yet " +
				"(busy, locked or full?): free the database (a long transaction in another process? disk full?); " +
				"do not restart lane east, a restart loses those answers"
			wantAction(t, "running", f.overview()["running"].NextAction, waiting+"; wait: running on live lane east (1 of 1 slots)")
			wantActionPrefix(t, "board", f.board()[c.Job.ID].NextAction, waiting+"; wait: running on live lane east (attempt 1, heartbeat ")
			lanes, err := f.s.LiveLanes(f.ctx)
			if err != nil || len(lanes) != 1 || lanes[0].AnswersWaiting != 2 {
				t.Errorf("LiveLanes = %+v, %v; want lane east with 2 answers waiting", lanes, err)
			}

			// The database is full: no heartbeat gets through, and the lane
			// looks silent. Its answers still come first: a restart loses them.
			if _, err := f.s.WriteDB().ExecContext(f.ctx, `UPDATE lanes SET heartbeat_at = `+f.dbTime(-time.Hour)+`, answers_waiting = 1`); err != nil {
				t.Fatalf("age the heartbeat: %v", err)
			}
			one := strings.Replace(waiting, "holds 2 provider answers", "holds 1 provider answer", 1)
			wantAction(t, "running (silent)", f.overview()["running"].NextAction, one+"; "+f.silentHeld("east"))
			wantAction(t, "board (silent)", f.board()[c.Job.ID].NextAction, one+"; "+f.silentHeld("east"))

			// A stopped lane holds nothing any more.
			if _, err := f.s.WriteDB().ExecContext(f.ctx, `UPDATE lanes SET stopped_at = heartbeat_at, stop_reason = 'shutdown'`); err != nil {
				t.Fatalf("stop the lane: %v", err)
			}
			if got := f.overview()["running"].NextAction; strings.Contains(got, "answer waiting") {
				t.Errorf("running action %q names the answers of a stopped lane", got)
			}
		})
	})
	t.Run("FailedByClass", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(time.Minute)
			f.lane("east")
			j := f.failedByClass()
			b := f.board()
			for _, c := range failedCases(j) {
				r := b[j[c.name]]
				if r.Status != "failed" {
					t.Errorf("%s: job %d status %q, want failed", c.name, r.ID, r.Status)
				}
				if c.prefix {
					wantActionPrefix(t, c.name, r.NextAction, c.action)
				} else {
					wantAction(t, c.name, r.NextAction, c.action)
				}
				if r.ErrorClass != c.class {
					t.Errorf("%s: error_class %q, want %q", c.name, r.ErrorClass, c.class)
				}
			}
			o := f.overview()["failed"]
			if o.Jobs != int64(len(j)) {
				t.Errorf("failed jobs = %d, want %d", o.Jobs, len(j))
			}
			// The first failed job that needs a person leads (the rejected
			// one); then each kind, how many and what to do.
			wantAction(t, "failed", o.NextAction, fmt.Sprintf("fix its cause first (the API key, the model or the request; inspect the error), "+
				"then inkwell retry %d: the provider refused the request, so a retry as it is will fail the same way (and %d more: SELECT * FROM job_board)", j["rejected"], len(j)-1)+
				"; 1 not_sent: nothing reached the provider on the last call: a retry cannot bill twice unless an earlier attempt may have billed (job_board names those)"+
				"; 1 rate_limited: the provider answered 429 and billed nothing on the last call: a retry cannot bill twice unless an earlier attempt may have billed (job_board names those)"+
				"; 1 provider_error: the provider answered the last call with a server error (5xx): a retry cannot bill twice unless an earlier attempt may have billed (job_board names those)"+
				"; 1 rejected by the provider: fix its cause first (the API key, the model or the request), a retry will fail the same way"+
				"; 1 malformed: inspect the provider's answer first, Inkwell could not read it and a retry may get the same; the provider may have billed the call"+
				"; 1 unstorable: fix the database first (disk full? a constraint?), it refused the provider's answer; the provider billed the call"+
				"; 1 timeout: no answer came in time, the provider may have billed the call; with a provider that ignores keys (openai) a retry may bill twice, so check its usage first"+
				"; 1 shutdown: a stop cut the call short, the provider may have billed it; with a provider that ignores keys (openai) a retry may bill twice, so check its usage first"+
				"; 2 worker_restarted: the worker died during the attempt, so the provider may already have billed them; "+
				"a provider that honours keys answers a retry from its record, one that ignores them (openai) may bill twice: check its usage first"+
				"; 1 possible poison job (the last two attempts ended worker_restarted): it may be what kills the worker; inspect it before a retry"+
				"; 1 gave up after automatic retries: the provider kept failing; check it (its status, limits and API key), then retry"+
				"; 1 legacy (failed before failures had classes, the words do not tell): inspect the error, then retry"+
				"; 1 cancelled while the provider call was in flight: the provider may have billed them; nothing to do"+
				"; 1 cancelled while queued: nothing to do (job_board says of each whether an earlier call may have billed it)"+
				"; 1 pruned by retention: their prompt is gone, nothing to retry")
			f.wantCountsKept("after a failure of each class")

			// The class decides, not the words: the same error under another
			// class reads as that class, in the board and the counts.
			if _, err := f.s.WriteDB().ExecContext(f.ctx, fmt.Sprintf(`UPDATE jobs SET error_class = 'timeout' WHERE id = %d`, j["not_sent"])); err != nil {
				t.Fatal(err)
			}
			f.wantCountsKept("after a person's UPDATE OF error_class")
			wantActionPrefix(t, "not_sent reclassified", f.board()[j["not_sent"]].NextAction, "check the provider's usage first: no answer came in time")
			if got := f.overview()["failed"].NextAction; !strings.Contains(got, "; 2 timeout: ") || strings.Contains(got, "not_sent") {
				t.Errorf("failed after reclassifying: %q, want 2 timeout and no not_sent", got)
			}
			// A job without a class reads as legacy.
			if _, err := f.s.WriteDB().ExecContext(f.ctx, fmt.Sprintf(`UPDATE jobs SET error_class = NULL WHERE id = %d`, j["legacy"])); err != nil {
				t.Fatal(err)
			}
			f.wantCountsKept("after a class set to NULL")
			wantAction(t, "no class", f.board()[j["legacy"]].NextAction, fmt.Sprintf("inspect the error, then inkwell retry %d", j["legacy"]))

		})
	})
	t.Run("FailedNeedingNobody", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			// Cancelled and pruned jobs only: nobody needs to act.
			f.clk.At(time.Minute)
			f.lane("east")
			pruned := f.accept("pruned")
			f.fail(f.claim("east"), inkwell.ClassNotSent, "provider: provider call: connection refused: dial tcp")
			if _, err := f.s.WriteDB().ExecContext(f.ctx, fmt.Sprintf(`UPDATE jobs SET pruned_at = %s WHERE id = %d`, f.dbTime(0), pruned.ID)); err != nil {
				t.Fatal(err)
			}
			running := f.accept("running")
			f.claim("east")
			queued := f.accept("queued")
			for _, id := range []int64{running.ID, queued.ID} {
				if _, err := f.s.Cancel(f.ctx, id, "operator"); err != nil {
					t.Fatalf("Cancel(%d): %v", id, err)
				}
			}
			f.wantCountsKept("after cancels and a prune")
			wantAction(t, "failed (cancelled and pruned only)", f.overview()["failed"].NextAction, "nothing to retry"+
				"; 1 cancelled while the provider call was in flight: the provider may have billed them; nothing to do"+
				"; 1 cancelled while queued: nothing to do (job_board says of each whether an earlier call may have billed it)"+
				"; 1 pruned by retention: their prompt is gone, nothing to retry")
			// A retry of a cancelled job clears its class: it counts as queued.
			if _, err := f.s.RetryIfFailed(f.ctx, queued.ID, store.ActorCLI); err != nil {
				t.Fatalf("RetryIfFailed: %v", err)
			}
			f.wantCountsKept("after a cancelled job's retry")
		})
	})
	t.Run("ManyPoisonJobs", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			// 101 jobs whose last two attempts both ended worker_restarted,
			// and one restarted once: counted up to 100, then "more than".
			series := `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 102) SELECT i FROM c`
			if f.s.Dialect() == "postgres" {
				series = `SELECT i FROM generate_series(1, 102) AS i`
			}
			for _, q := range []string{
				`INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, error, error_class, lane, created_at, started_at, finished_at)
				 SELECT i, 'p' || i, 'h', '{}', 'failed', 'worker restarted', 'worker_restarted', 'east', ` + f.dbTime(0) + `, ` + f.dbTime(0) + `, ` + f.dbTime(0) + `
				 FROM (` + series + `) s`,
				`INSERT INTO job_attempts (job_id, attempt_number, status, error, error_class, lane, started_at, finished_at)
				 SELECT id, 1, 'failed', 'worker restarted', 'worker_restarted', 'east', started_at, finished_at FROM jobs`,
				`INSERT INTO job_attempts (job_id, attempt_number, status, error, error_class, lane, started_at, finished_at)
				 SELECT id, 2, 'failed', 'worker restarted', 'worker_restarted', 'east', started_at, finished_at FROM jobs WHERE id > 1`,
			} {
				if _, err := f.s.WriteDB().ExecContext(f.ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			got := f.overview()["failed"].NextAction
			if !strings.Contains(got, "; 102 worker_restarted: ") || !strings.Contains(got, "; more than 100 possible poison jobs (the last two attempts ended worker_restarted)") {
				t.Errorf("failed = %q, want 102 worker_restarted and more than 100 possible poison jobs", got)
			}
			wantAction(t, "restarted once", f.board()[1].NextAction, "inspect the error, then inkwell retry 1 (the worker died during the attempt, "+
				"so the provider may already have billed it; a provider that honours keys answers the retry from its record, one that ignores them (openai) may bill twice: check its usage first)")
			wantActionPrefix(t, "restarted twice", f.board()[2].NextAction, "possible poison job: ")
			// Down to two: counted.
			if _, err := f.s.WriteDB().ExecContext(f.ctx, `UPDATE jobs SET pruned_at = finished_at WHERE id > 3`); err != nil {
				t.Fatal(err)
			}
			if got := f.overview()["failed"].NextAction; !strings.Contains(got, "; 2 possible poison jobs (") {
				t.Errorf("failed = %q, want 2 possible poison jobs", got)
			}
			f.wantCountsKept("with many poison jobs")
		})
	})
	t.Run("QueuedWaitingForBackOff", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			// An hour ago: a job failed with a 5xx and was put back for an
			// hour and a minute; the lane is idle, and must not read as stuck.
			f.clk.At(-time.Hour)
			f.accept("k1")
			f.clk.At(time.Minute)
			f.lane("east")
			c := f.claim("east")
			at := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
			if err := f.s.FailIfRunning(f.ctx, store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "provider: HTTP 503",
				Class: inkwell.ClassProviderError, RetryAt: &at}); err != nil {
				t.Fatalf("FailIfRunning (reschedule): %v", err)
			}
			next := at.Format("2006-01-02T15:04:05Z")
			o := f.overview()["queued"]
			if o.Jobs != 1 {
				t.Errorf("queued = %d, want 1", o.Jobs)
			}
			wantAction(t, "queued (only waiting)", o.NextAction, "wait: 1 waiting for back-off, next at "+next)
			r := f.board()[c.Job.ID]
			wantAction(t, "board (waiting)", r.NextAction, "wait: back-off after attempt 1 failed (provider_error): automatic retry, claimed from "+next)
			if r.ErrorClass != "provider_error" || r.Error != "provider: HTTP 503" {
				t.Errorf("waiting job error %q, class %q; want the failure it waits out", r.Error, r.ErrorClass)
			}
			// A job ready behind it is the queue's head.
			j2 := f.accept("k2")
			wantAction(t, "queued (one ready)", f.overview()["queued"].NextAction, "wait: lane east claims next; 1 waiting for back-off, next at "+next)
			wantAction(t, "board (ready)", f.board()[j2.ID].NextAction, "wait: lane east claims next")
			f.wantCountsKept("with a job waiting for back-off")
			// No live lane: that comes first, and the waiting jobs follow.
			if _, err := f.s.WriteDB().ExecContext(f.ctx, `UPDATE lanes SET stopped_at = heartbeat_at, stop_reason = 'shutdown'`); err != nil {
				t.Fatal(err)
			}
			wantActionPrefix(t, "queued (no lane)", f.overview()["queued"].NextAction, "no live worker lane: start inkwell serve (last seen: east stopped")
			if got := f.overview()["queued"].NextAction; !strings.HasSuffix(got, "; 1 waiting for back-off, next at "+next) {
				t.Errorf("queued (no lane) = %q, want it to end with the waiting jobs", got)
			}
			// The back-off is over: the job is ready, and the head.
			if _, err := f.s.WriteDB().ExecContext(f.ctx, `UPDATE lanes SET stopped_at = NULL, stop_reason = NULL`); err != nil {
				t.Fatal(err)
			}
			if _, err := f.s.WriteDB().ExecContext(f.ctx, fmt.Sprintf(`UPDATE jobs SET not_before = %s WHERE id = %d`, f.dbTime(-time.Minute), c.Job.ID)); err != nil {
				t.Fatal(err)
			}
			wantAction(t, "queued (back-off over)", f.overview()["queued"].NextAction, "wait: lane east claims next")
			wantAction(t, "board (back-off over)", f.board()[c.Job.ID].NextAction, "wait: lane east claims next")
		})
	})
	t.Run("Done", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(-2 * time.Hour)
			f.lane("east")
			f.accept("k1")
			c := f.claim("east")
			if err := f.s.CompleteIfRunning(f.ctx, store.CompleteParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID,
				Text: "ink", Account: "default", AmountMicros: 10, ProviderRequestID: "req-1"}); err != nil {
				t.Fatalf("CompleteIfRunning: %v", err)
			}
			o := f.overview()["done"]
			if o.Jobs != 1 || o.OldestJobID != nil {
				t.Errorf("done row = %+v, want 1 job and no oldest_job_id", o)
			}
			wantAge(t, "done", o.OldestAgeSeconds, 7200)
			if o.OldestAge != "2h00m" && o.OldestAge != "2h01m" && o.OldestAge != "2h02m" {
				t.Errorf("done oldest_age = %q, want 2h00m (give or take the test's own minutes)", o.OldestAge)
			}
			wantAction(t, "done", o.NextAction, "nothing to do: each has its result and charge")
			if b := f.board(); len(b) != 0 {
				t.Errorf("board = %v, want no rows: a done job is not on the board", b)
			}
		})
	})
	t.Run("DoneWithoutItsChargeBreaksAnInvariant", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.lane("east")
			var ids []int64
			for _, k := range []string{"k1", "k2"} {
				f.accept(k)
				c := f.claim("east")
				if err := f.s.CompleteIfRunning(f.ctx, store.CompleteParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID,
					Text: "ink", Account: "default", AmountMicros: 10, ProviderRequestID: "req-" + k}); err != nil {
					t.Fatalf("CompleteIfRunning: %v", err)
				}
				ids = append(ids, c.Job.ID)
			}
			// Nothing in Inkwell deletes a charge; a person with SQL can.
			if _, err := f.s.DB().ExecContext(f.ctx, fmt.Sprintf(`DELETE FROM charges WHERE job_id = %d`, ids[1])); err != nil {
				t.Fatalf("delete a charge: %v", err)
			}
			wantAction(t, "done", f.overview()["done"].NextAction, fmt.Sprintf("inspect job %d (inkwell show %[1]d): "+
				"done without its result or charge, which breaks an invariant; nothing rewrites it", ids[1]))
		})
	})
}

// refusedError is what worker/job.go writes when the provider refuses a
// request with a 4xx: "provider: " and the provider's CallError.
var refusedError = "provider: " + (&provider.CallError{Class: provider.ClassClient, Status: 401, Msg: "invalid API key"}).Error()

// failedByClass makes one failed job of each kind the views tell apart,
// each through the store's transitions (a pruned job's prune by SQL), and
// returns their ids by name. The rejected job has the smallest id.
func (f *ovFixture) failedByClass() map[string]int64 {
	f.t.Helper()
	j := map[string]int64{}
	for _, c := range []struct {
		name  string
		class inkwell.ErrorClass
		msg   string
	}{
		{"rejected", inkwell.ClassRejected, refusedError},
		{"not_sent", inkwell.ClassNotSent, "provider: provider call: connection refused: dial tcp"},
		{"rate_limited", inkwell.ClassRateLimited, "provider: provider call: rate limited: HTTP 429"},
		{"provider_error", inkwell.ClassProviderError, "provider: provider call: server error: HTTP 502"},
		{"malformed", inkwell.ClassMalformed, "provider: provider call: malformed answer: unexpected EOF"},
		{"unstorable", inkwell.ClassUnstorable, "could not store the provider's answer: disk full"},
		{"timeout", inkwell.ClassTimeout, "provider: provider call: timeout: context deadline exceeded"},
		{"shutdown", inkwell.ClassShutdown, inkwell.ErrShutdownGrace},
		{"worker_restarted", inkwell.ClassWorkerRestarted, "worker restarted"},
		{"legacy", inkwell.ClassLegacy, "boom"},
		{"pruned", inkwell.ClassProviderError, "provider: provider call: server error: HTTP 500"},
	} {
		j[c.name] = f.accept(c.name).ID
		f.fail(f.claim("east"), c.class, c.msg)
	}
	// Automatic retry gave up after 5 attempts.
	j["gave_up"] = f.accept("gave_up").ID
	c := f.claim("east")
	if err := f.s.FailIfRunning(f.ctx, store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "provider: provider call: server error: HTTP 503",
		Class: inkwell.ClassProviderError, GaveUpAfter: 5}); err != nil {
		f.t.Fatalf("FailIfRunning (gave up): %v", err)
	}
	// Its last two attempts both ended worker_restarted.
	j["poison"] = f.accept("poison").ID
	f.fail(f.claim("east"), inkwell.ClassWorkerRestarted, "worker restarted")
	if _, err := f.s.RetryIfFailed(f.ctx, j["poison"], store.ActorCLI); err != nil {
		f.f("RetryIfFailed(poison): %v", err)
	}
	f.fail(f.claim("east"), inkwell.ClassWorkerRestarted, "worker restarted")
	// Cancelled while running, then while queued.
	j["cancelled_running"] = f.accept("cancelled_running").ID
	f.claim("east")
	if _, err := f.s.Cancel(f.ctx, j["cancelled_running"], "operator"); err != nil {
		f.f("Cancel(running): %v", err)
	}
	j["cancelled_queued"] = f.accept("cancelled_queued").ID
	if _, err := f.s.Cancel(f.ctx, j["cancelled_queued"], "operator"); err != nil {
		f.f("Cancel(queued): %v", err)
	}
	if _, err := f.s.WriteDB().ExecContext(f.ctx, fmt.Sprintf(`UPDATE jobs SET pruned_at = %s WHERE id = %d`, f.dbTime(0), j["pruned"])); err != nil {
		f.f("prune: %v", err)
	}
	return j
}

func (f *ovFixture) f(format string, args ...any) {
	f.t.Helper()
	f.t.Fatalf(format, args...)
}

// failedCase is the board's words for one kind of failed job.
type failedCase struct {
	name, class, action string
	prefix              bool
}

// failedCases is what job_board says of each job failedByClass made: the
// same words on both dialects.
func failedCases(j map[string]int64) []failedCase {
	usage := func(what string, id int64) string {
		return fmt.Sprintf("check the provider's usage first: %s, so the provider may have billed it; with a provider that ignores keys (openai) "+
			"a retry may bill twice, with one that honours them (sim, provider-sim) the retry is answered from its record; then inkwell retry %d", what, id)
	}
	return []failedCase{
		{name: "rejected", class: "rejected", action: fmt.Sprintf("fix its cause first (the API key, the model or the request; inspect the error), "+
			"then inkwell retry %d: the provider refused the request, so a retry as it is will fail the same way", j["rejected"])},
		{name: "not_sent", class: "not_sent", action: fmt.Sprintf("safe to retry: inkwell retry %d (nothing reached the provider: a retry cannot bill twice)", j["not_sent"])},
		{name: "rate_limited", class: "rate_limited", action: fmt.Sprintf("safe to retry: inkwell retry %d (the provider answered 429 and billed nothing: a retry cannot bill twice)", j["rate_limited"])},
		{name: "provider_error", class: "provider_error", action: fmt.Sprintf("safe to retry: inkwell retry %d (the provider answered with a server error (5xx): a retry cannot bill twice)", j["provider_error"])},
		{name: "malformed", class: "malformed", action: fmt.Sprintf("inspect the provider's answer first: Inkwell could not read it, and a retry may get the same answer "+
			"(the provider may have billed the call); then inkwell retry %d", j["malformed"])},
		{name: "unstorable", class: "unstorable", action: fmt.Sprintf("fix the database first (disk full? a constraint?): it refused the provider's answer; then inkwell retry %d "+
			"(the provider billed the call; the retry reuses the job's provider key, and a provider that ignores keys bills it again)", j["unstorable"])},
		{name: "timeout", class: "timeout", action: usage("no answer came in time", j["timeout"])},
		{name: "shutdown", class: "shutdown", action: usage("a stop cut the call short", j["shutdown"])},
		{name: "worker_restarted", class: "worker_restarted", action: fmt.Sprintf("inspect the error, then inkwell retry %d (the worker died during the attempt, "+
			"so the provider may already have billed it; a provider that honours keys answers the retry from its record, one that ignores them (openai) may bill twice: check its usage first)", j["worker_restarted"])},
		{name: "legacy", class: "legacy", action: fmt.Sprintf("inspect the error, then inkwell retry %d", j["legacy"])},
		{name: "gave_up", class: "provider_error", action: fmt.Sprintf("gave up after 5 attempts (the last provider_error): automatic retry stopped; "+
			"check the provider (its status, limits and API key), then inkwell retry %d", j["gave_up"])},
		{name: "poison", class: "worker_restarted", action: fmt.Sprintf("possible poison job: it may be what kills the worker; inspect it before a retry "+
			"(its last two attempts both ended worker_restarted: inkwell show %d)", j["poison"])},
		{name: "cancelled_running", class: "cancelled", action: fmt.Sprintf("nothing to do: cancelled after a call that may have billed it "+
			"(inkwell retry %d runs it again under the job's provider key: a provider that ignores keys (openai) may bill twice)", j["cancelled_running"])},
		{name: "cancelled_queued", class: "cancelled", action: fmt.Sprintf("nothing to do: cancelled before any call that could bill it "+
			"(inkwell retry %d runs it after all)", j["cancelled_queued"])},
		{name: "pruned", class: "provider_error", prefix: true, action: "nothing to do: pruned by retention at 20"},
	}
}

func TestStore_LiveLanes(t *testing.T) {
	t.Parallel()
	runOverview(t, func(f *ovFixture) {
		f.clk.At(-time.Hour)
		f.lane("dead")
		f.clk.At(time.Minute)
		f.lane("live")
		stopped := f.lane("stopped")
		if err := f.s.StopLane(f.ctx, stopped, "shutdown"); err != nil {
			t.Fatalf("StopLane: %v", err)
		}
		f.accept("k1")
		f.claim("live")
		lanes, err := f.s.LiveLanes(f.ctx)
		if err != nil {
			t.Fatalf("LiveLanes: %v", err)
		}
		type lane struct {
			Lane, State string
			Alive       bool
			Running     int64
			StopReason  string
		}
		var got []lane
		for _, l := range lanes {
			got = append(got, lane{l.Lane, l.State, l.Alive, l.RunningJobs, l.StopReason})
			if l.Lane == "dead" && (l.HeartbeatAgeSeconds < 3600 || l.HeartbeatAgeSeconds > 3600+ageSlack) {
				t.Errorf("dead lane heartbeat_age_seconds = %d, want about 3600", l.HeartbeatAgeSeconds)
			}
			if l.PID == 0 || l.Host == "" || l.Incarnation == "" || l.HeartbeatAge == "" {
				t.Errorf("lane %s = %+v, want pid, host, incarnation and heartbeat age", l.Lane, l)
			}
		}
		want := []lane{
			{"dead", "silent", false, 0, ""},
			{"live", "alive", true, 1, ""},
			{"stopped", "stopped", false, 0, "shutdown"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("lanes (-want +got):\n%s", diff)
		}
	})
}

// TestStore_OverviewLegacyTimes checks that the views read the legacy
// 'YYYY-MM-DD HH:MM:SS' times of an adopted single-table database, and
// name a legacy running job (no lane, no attempt) for what it is.
func TestStore_OverviewLegacyTimes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "legacy.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	legacyTime := func(ago time.Duration) string { return time.Now().UTC().Add(-ago).Format("2006-01-02 15:04:05") }
	for _, q := range []string{
		`CREATE TABLE jobs (id INTEGER PRIMARY KEY, prompt TEXT NOT NULL, status TEXT NOT NULL, error TEXT,
			created_at TEXT, started_at TEXT, finished_at TEXT)`,
		`INSERT INTO jobs VALUES (1, 'old queued', 'queued', NULL, '` + legacyTime(3*time.Hour) + `', NULL, NULL)`,
		`INSERT INTO jobs VALUES (2, 'old running', 'running', NULL, '` + legacyTime(3*time.Hour) + `', '` + legacyTime(2*time.Hour) + `', NULL)`,
		`INSERT INTO jobs VALUES (3, 'old failed', 'failed', 'boom', '` + legacyTime(3*time.Hour) + `', NULL, '` + legacyTime(time.Hour) + `')`,
		`INSERT INTO jobs VALUES (4, 'old done', 'done', NULL, '` + legacyTime(4*time.Hour) + `', '` + legacyTime(4*time.Hour) + `', '` + legacyTime(4*time.Hour) + `')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("legacy setup %q: %v", q, err)
		}
	}
	db.Close()
	s := storetest.MustOpen(t, path, store.Options{})
	f := &ovFixture{t: t, ctx: t.Context(), s: s}
	f.wantCountsKept("after legacy adoption")
	b := f.board()
	wantAge(t, "legacy queued", b[1].AgeSeconds, 3*3600)
	wantAge(t, "legacy running", b[2].AgeSeconds, 2*3600)
	wantAge(t, "legacy failed", b[3].AgeSeconds, 3600)
	wantAction(t, "legacy running", b[2].NextAction,
		"restart any lane: its startup recovery closes these as failed (a legacy running job with no lane; inkwell serve)")
	wantAction(t, "legacy failed", b[3].NextAction, "inspect the error, then inkwell retry 3")
	o := f.overview()
	wantActionPrefix(t, "running", o["running"].NextAction,
		"restart that lane: its startup recovery closes these as failed (1 on lane (none: legacy) never registered)")
	if o["queued"].OldestAge != "3h00m" && o["queued"].OldestAge != "3h01m" {
		t.Errorf("legacy queued oldest_age = %q, want 3h00m", o["queued"].OldestAge)
	}
	const adopted = "adopted from a legacy database as they were (the old Inkwell kept no result or charge)"
	wantAction(t, "legacy done", o["done"].NextAction, "nothing to do: "+adopted)

	// Legacy jobs that Inkwell itself runs to done get their result and
	// charge like any other; only the adopted done row goes without.
	if _, err := s.RetryIfFailed(f.ctx, 3, store.ActorCLI); err != nil {
		t.Fatalf("RetryIfFailed(3): %v", err)
	}
	f.lane("east")
	for range 2 {
		c := f.claim("east")
		if err := s.CompleteIfRunning(f.ctx, store.CompleteParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID,
			Text: "ink", Account: "default", AmountMicros: 10, ProviderRequestID: fmt.Sprint("req-", c.Job.ID)}); err != nil {
			t.Fatalf("CompleteIfRunning(job %d): %v", c.Job.ID, err)
		}
	}
	o = f.overview()
	if o["done"].Jobs != 3 {
		t.Errorf("done jobs = %d, want 3", o["done"].Jobs)
	}
	f.wantCountsKept("after the legacy jobs ran")
	wantAction(t, "done", o["done"].NextAction, "nothing to do: each has its result and charge, but for 1 "+adopted)
}

// TestStore_OverviewCounts: job_overview's counts are kept by triggers in
// job_counts, in the transaction of each write. After every kind of
// write, the kept counts equal a full count of the rows.
func TestStore_OverviewCounts(t *testing.T) {
	t.Parallel()
	runOverview(t, func(f *ovFixture) {
		f.clk.At(time.Minute)
		f.wantCountsKept("empty")
		east := f.lane("east")
		for i := range 6 {
			f.accept(fmt.Sprint("k", i))
		}
		f.accept("k0") // a re-send writes nothing
		f.wantCountsKept("after accept")
		var cs []*store.Claimed
		for range 5 {
			cs = append(cs, f.claim("east"))
		}
		f.wantCountsKept("after claim")
		if err := f.s.CompleteIfRunning(f.ctx, store.CompleteParams{JobID: cs[0].Job.ID, AttemptID: cs[0].Attempt.ID,
			Text: "ink", Account: "default", AmountMicros: 10, ProviderRequestID: "req-0"}); err != nil {
			t.Fatalf("CompleteIfRunning: %v", err)
		}
		f.wantCountsKept("after complete")
		f.fail(cs[1], inkwell.ClassRejected, refusedError)
		f.fail(cs[2], inkwell.ClassProviderError, "provider: HTTP 500 from the provider")
		f.fail(cs[3], inkwell.ClassShutdown, inkwell.ErrShutdownGrace)
		f.fail(cs[4], inkwell.ClassRejected, "payload unreadable: unexpected end of JSON input")
		f.wantCountsKept("after fail")
		for _, c := range cs[1:3] {
			if _, err := f.s.RetryIfFailed(f.ctx, c.Job.ID, store.ActorCLI); err != nil {
				t.Fatalf("RetryIfFailed(%d): %v", c.Job.ID, err)
			}
		}
		f.wantCountsKept("after retry")
		orphan := f.claim("east")
		east.Release() // the lane dies mid-call
		l, err := f.s.LockLane(f.ctx, "east")
		if err != nil {
			t.Fatalf("LockLane: %v", err)
		}
		defer l.Release()
		if rep, err := f.s.Recover(f.ctx, l, false); err != nil || rep.JobsFailed != 1 {
			t.Fatalf("Recover = %+v, %v; want job %d failed", rep, err, orphan.Job.ID)
		}
		f.wantCountsKept("after recovery")
		o := f.overview()
		for st, n := range map[string]int64{"queued": 2, "running": 0, "failed": 3, "done": 1} {
			if o[st].Jobs != n {
				t.Errorf("job_overview %s = %d, want %d", st, o[st].Jobs, n)
			}
		}
		// Writes no Inkwell code makes keep them exact too.
		for _, q := range []string{
			`DELETE FROM charges`,
			`UPDATE jobs SET status = 'failed', error = 'worker restarted', error_class = 'worker_restarted', finished_at = created_at WHERE status = 'queued'`,
			`UPDATE jobs SET error_class = 'provider_error' WHERE error_class = 'worker_restarted'`,
			`UPDATE jobs SET error = 'provider: HTTP 503' WHERE error_class = 'provider_error'`, // words move no count
			`UPDATE jobs SET gave_up_after = 3 WHERE error_class = 'provider_error'`,
			`UPDATE jobs SET pruned_at = finished_at WHERE status IN ('done', 'failed')`,
			`UPDATE jobs SET pruned_at = NULL, gave_up_after = NULL`,
			`UPDATE jobs SET started_at = NULL, error_class = 'cancelled' WHERE status = 'failed'`,
			`DELETE FROM jobs WHERE status = 'failed' AND id NOT IN (SELECT job_id FROM job_attempts)`,
		} {
			if _, err := f.s.WriteDB().ExecContext(f.ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			f.wantCountsKept("after " + q)
		}
	})
}

// wantCountsKept compares job_counts with a full count of jobs (by kind, as
// the triggers classify them, and by status, as job_overview shows them),
// results and charges.
func wantCountsKept(t *testing.T, s *store.Store, when string) {
	t.Helper()
	ctx := t.Context()
	kept := map[string]int64{}
	rows, err := s.DB().QueryContext(ctx, `SELECT kind, SUM(n) FROM job_counts GROUP BY kind`)
	if err != nil {
		t.Fatalf("%s: read job_counts: %v", when, err)
	}
	for rows.Next() {
		var kind string
		var n int64
		if err := rows.Scan(&kind, &n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			kept[kind] = n
		}
	}
	rows.Close()
	full := map[string]int64{}
	byStatus := map[string]int64{}
	rows, err = s.DB().QueryContext(ctx, `SELECT status, error_class, gave_up_after IS NOT NULL, pruned_at IS NOT NULL,
		started_at IS NOT NULL, request_hash, lane IS NOT NULL FROM jobs`)
	if err != nil {
		t.Fatalf("%s: read jobs: %v", when, err)
	}
	for rows.Next() {
		var r kindRow
		var class sql.NullString
		if err := rows.Scan(&r.status, &class, &r.gaveUp, &r.pruned, &r.started, &r.hash, &r.hasLane); err != nil {
			t.Fatal(err)
		}
		r.class = class.String
		status := r.status
		full[countKind(r)]++
		byStatus[status]++
	}
	rows.Close()
	for _, table := range []string{"results", "charges"} {
		var n int64
		if err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			full[table] = n
		}
	}
	if diff := cmp.Diff(full, kept); diff != "" {
		t.Errorf("%s: job_counts differs from a full count (-full +kept):\n%s", when, diff)
	}
	ov, err := s.Overview(ctx)
	if err != nil {
		t.Fatalf("%s: Overview: %v", when, err)
	}
	shown := map[string]int64{}
	for _, o := range ov {
		if o.Jobs != 0 {
			shown[o.Status] = o.Jobs
		}
	}
	if diff := cmp.Diff(byStatus, shown); diff != "" {
		t.Errorf("%s: job_overview differs from SELECT status, COUNT(*) FROM jobs GROUP BY status (-full +shown):\n%s", when, diff)
	}
}

// kindRow is what a jobs row's kind depends on.
type kindRow struct {
	status, class, hash              string
	gaveUp, pruned, started, hasLane bool
}

// countKind is the kind a jobs row is counted under (the migration's
// job_count_kind, written again here so that the test does not trust it).
func countKind(r kindRow) string {
	switch {
	case r.status == "failed" && r.pruned:
		return "failed_pruned"
	case r.status == "failed" && r.gaveUp:
		return "failed_gave_up"
	case r.status == "failed" && r.class == "cancelled" && r.started:
		return "failed_cancelled_running"
	case r.status == "failed" && r.class != "" && inkwell.ErrorClass(r.class).Valid():
		return "failed_" + r.class
	case r.status == "failed":
		return "failed_legacy"
	case r.status == "done" && r.hash == store.LegacyRequestHash && !r.hasLane:
		return "done_adopted"
	case r.status == "done" && r.pruned:
		return "done_pruned"
	}
	return r.status
}

// TestStore_OverviewMigrationBackFills: a database that holds rows when
// migration 0004 arrives gets its counts and its retried jobs' queued_at
// from those rows, in the migration.
func TestStore_OverviewMigrationBackFills(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		dsn, driver := b.DSN, "sqlite"
		if b.Name == "postgres" { // b.DSN holds the migrated schema: start from nothing
			dsn, driver = storetest.EmptyPostgresDSN(t), "pgx"
		}
		db, err := sql.Open(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		dir := filepath.Join("migrations", b.Name)
		files, _ := filepath.Glob(filepath.Join(dir, "000[123]_*.sql"))
		if len(files) != 3 {
			t.Fatalf("migrations 0001-0003 of %s: found %v", b.Name, files)
		}
		for i, file := range files {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(string(body)); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if i == 0 {
				mustExecAll(t, db, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`)
			}
			mustExecAll(t, db, fmt.Sprintf(`INSERT INTO schema_migrations VALUES (%d, 'v%d', '2026-01-01T00:00:00.000000Z')`, i+1, i+1))
		}
		hourAgo := time.Now().UTC().Add(-time.Hour).Format(store.TimeLayout)
		tenAgo := time.Now().UTC().Add(-10 * time.Minute).Format(store.TimeLayout)
		mustExecAll(t, db,
			`INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, error, lane, created_at, started_at, finished_at) VALUES
				(1, 'k1', 'h', '{}', 'done', NULL, 'east', '`+hourAgo+`', '`+hourAgo+`', '`+hourAgo+`'),
				(2, 'k2', 'h', '{}', 'failed', 'worker restarted', 'east', '`+hourAgo+`', '`+hourAgo+`', '`+hourAgo+`'),
				(3, 'k3', 'h', '{}', 'queued', NULL, NULL, '`+hourAgo+`', NULL, NULL),
				(4, 'k4', 'h', '{}', 'queued', NULL, 'east', '`+hourAgo+`', NULL, NULL),
				(5, 'legacy-5', 'legacy', '{}', 'done', NULL, NULL, NULL, NULL, NULL)`,
			`INSERT INTO job_attempts (id, job_id, attempt_number, status, error, lane, started_at, finished_at) VALUES
				(1, 1, 1, 'done', NULL, 'east', '`+hourAgo+`', '`+hourAgo+`'),
				(2, 2, 1, 'failed', 'worker restarted', 'east', '`+hourAgo+`', '`+hourAgo+`'),
				(3, 4, 1, 'failed', 'provider: HTTP 500', 'east', '`+hourAgo+`', '`+tenAgo+`')`,
			`INSERT INTO results (job_id, attempt_id, text, created_at) VALUES (1, 1, 'ink', '`+hourAgo+`')`,
			`INSERT INTO charges (job_id, attempt_id, account, amount_micros, provider_request_id, created_at) VALUES (1, 1, 'a', 1, 'r', '`+hourAgo+`')`,
		)
		db.Close()
		s := storetest.MustOpen(t, dsn, store.Options{})
		if v, err := s.SchemaVersion(t.Context()); err != nil || v < 4 {
			t.Fatalf("SchemaVersion = %d, %v; want 4 or more", v, err)
		}
		wantCountsKept(t, s, "after migration 0004")
		f := &ovFixture{t: t, ctx: t.Context(), s: s}
		o := f.overview()
		wantAge(t, "queued (job 3, accepted an hour ago)", o["queued"].OldestAgeSeconds, 3600)
		if o["queued"].OldestJobID == nil || *o["queued"].OldestJobID != 3 {
			t.Errorf("oldest queued = %v, want job 3", deref(o["queued"].OldestJobID))
		}
		// Job 4 was retried after an attempt that ended ten minutes ago.
		wantAge(t, "retried job 4", f.board()[4].AgeSeconds, 600)
		wantAction(t, "done", o["done"].NextAction, "nothing to do: each has its result and charge, but for 1 adopted from a legacy database as they were (the old Inkwell kept no result or charge)")
	})
}

func mustExecAll(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestStore_BoardReadsOnlyWhatItShows: Board with a limit picks its rows
// by id and reads only those; it returns exactly the first rows of the
// whole board, and every queued job's place ("N queued ahead") is its
// place, on both sides of the 1000th job (counted on the index before it,
// ranked once per statement after it).
func TestStore_BoardReadsOnlyWhatItShows(t *testing.T) {
	t.Parallel()
	runOverview(t, func(f *ovFixture) {
		f.clk.At(time.Minute)
		f.lane("east")
		for i := range 4 {
			f.accept(fmt.Sprint("k", i))
		}
		running := f.claim("east")
		prunedFailed := f.claim("east")
		f.fail(prunedFailed, inkwell.ClassProviderError, "provider: HTTP 500")
		f.fail(f.claim("east"), inkwell.ClassRejected, "payload unreadable: unexpected end of JSON input")
		// Retention pruned the older failed job: it goes last.
		if _, err := f.s.WriteDB().ExecContext(f.ctx, fmt.Sprintf(`UPDATE jobs SET pruned_at = %s WHERE id = %d`, f.dbTime(0), prunedFailed.Job.ID)); err != nil {
			t.Fatal(err)
		}
		series := `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 1100) SELECT i FROM c`
		if f.s.Dialect() == "postgres" {
			series = `SELECT i FROM generate_series(1, 1100) AS i`
		}
		// Their turns run against their ids (the last inserted is claimed
		// first), so claim order is not id order, near the head or deep.
		if _, err := f.s.WriteDB().ExecContext(f.ctx, `INSERT INTO jobs (idempotency_key, request_hash, payload, status, created_at, claim_turn)
			SELECT 'bulk-' || i, 'h', '{}', 'queued', `+f.dbTime(0)+`, 1100 - i FROM (`+series+`) s`); err != nil {
			t.Fatalf("queue 1100 jobs: %v", err)
		}
		all, err := f.s.Board(f.ctx, 0)
		if err != nil {
			t.Fatalf("Board(0): %v", err)
		}
		if len(all) != 1+1101+2 || all[0].ID != running.Job.ID {
			t.Fatalf("Board(0) has %d rows, first %+v; want 1104, the running job first", len(all), all[0])
		}
		if last := all[len(all)-1]; last.ID != prunedFailed.Job.ID || last.PrunedAt == nil || all[len(all)-2].PrunedAt != nil {
			t.Errorf("Board(0) ends with job %d (pruned at %v); want the pruned failed job %d last, after the other failed one",
				last.ID, last.PrunedAt, prunedFailed.Job.ID)
		}
		for i, r := range all[2 : 1+1101] {
			want := fmt.Sprintf("wait: %d queued ahead; live lanes claim round robin across accounts", i+1)
			if r.Status != "queued" || r.NextAction != want {
				t.Fatalf("board row %d = %+v, want queued, %q", i+2, r, want)
			}
		}
		wantAction(t, "queue head", all[1].NextAction, "wait: lane east claims next, when its running job ends")
		filter := func(statuses ...string) []store.BoardRow {
			var out []store.BoardRow
			for _, r := range all {
				if len(statuses) == 0 || slices.Contains(statuses, r.Status) {
					out = append(out, r)
				}
			}
			return out
		}
		for _, tc := range []struct {
			limit    int
			statuses []string
		}{
			{1, nil}, {10, nil}, {50, []string{"running", "queued"}}, {100, []string{"failed"}}, {1000, nil},
			{3, []string{"failed", "running"}}, {5, []string{"done"}}, {1001, []string{"queued"}}, {1, []string{"failed"}}, {2, []string{"failed"}},
		} {
			got, err := f.s.Board(f.ctx, tc.limit, tc.statuses...)
			if err != nil {
				t.Fatalf("Board(%d, %v): %v", tc.limit, tc.statuses, err)
			}
			want := filter(tc.statuses...)
			want = want[:min(tc.limit, len(want))]
			// Ages tick with the wall clock between the two reads.
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(store.BoardRow{}, "AgeSeconds", "Age")); diff != "" {
				t.Errorf("Board(%d, %v) is not the first rows of the whole board (-want +got):\n%s", tc.limit, tc.statuses, diff)
			}
		}
		// One deep job, alone: its place is still its place.
		deep := all[1+1000]
		r, err := f.s.BoardRowByID(f.ctx, deep.ID)
		if err != nil || r == nil || r.NextAction != deep.NextAction {
			t.Errorf("BoardRowByID(%d) = %+v, %v; want %q", deep.ID, r, err, deep.NextAction)
		}
		f.wantCountsKept("after a bulk insert")
	})
}

// TestStore_ViewsInClaimOrder: since lanes claim by turn (claim_fair.go,
// migration 0013), the views read the queue in claim order, (claim_turn,
// id), not in id order (migration 0014): a job's place counts the jobs
// before it in that order, the board lists queued jobs in it, and a job
// retried long ago, its id old but its turn late, is neither the queue's
// head nor what makes the queue look stuck.
func TestStore_ViewsInClaimOrder(t *testing.T) {
	t.Parallel()
	acceptAs := func(f *ovFixture, account, name string) int64 {
		f.t.Helper()
		payload := fmt.Sprintf(`{"prompt":%q,"account":%q,"max_words":50}`, "write about "+name, account)
		job, _, err := f.s.Accept(f.ctx, store.AcceptParams{Account: account, IdempotencyKey: name,
			RequestHash: inkwell.RequestHash([]byte(payload)), Payload: []byte(payload)})
		if err != nil {
			f.t.Fatalf("Accept(%s): %v", name, err)
		}
		return job.ID
	}
	queuedIDs := func(rows []store.BoardRow) []int64 {
		var ids []int64
		for _, r := range rows {
			if r.Status == "queued" {
				ids = append(ids, r.ID)
			}
		}
		return ids
	}
	t.Run("PlacesAcrossAccounts", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(time.Minute)
			f.lane("east")
			// Turns: a1 0, a2 1, a3 2, then b1 0 (no turn served yet): claim order
			// a1, b1, a2, a3, where id order is a1, a2, a3, b1.
			a1, a2, a3 := acceptAs(f, "a", "a1"), acceptAs(f, "a", "a2"), acceptAs(f, "a", "a3")
			b1 := acceptAs(f, "b", "b1")
			b := f.board()
			wantAction(t, "a1 (the head)", b[a1].NextAction, "wait: lane east claims next")
			wantAction(t, "b1", b[b1].NextAction, "wait: 1 queued ahead; live lanes claim round robin across accounts")
			wantAction(t, "a2", b[a2].NextAction, "wait: 2 queued ahead; live lanes claim round robin across accounts")
			wantAction(t, "a3", b[a3].NextAction, "wait: 3 queued ahead; live lanes claim round robin across accounts")
			want := []int64{a1, b1, a2, a3}
			all, err := f.s.Board(f.ctx, 0)
			if err != nil {
				t.Fatalf("Board(0): %v", err)
			}
			if diff := cmp.Diff(want, queuedIDs(all)); diff != "" {
				t.Errorf("Board(0)'s queued jobs are not in claim order (-want +got):\n%s", diff)
			}
			for _, limit := range []int{2, 10} {
				got, err := f.s.Board(f.ctx, limit, "queued")
				if err != nil {
					t.Fatalf("Board(%d, queued): %v", limit, err)
				}
				if diff := cmp.Diff(want[:min(limit, len(want))], queuedIDs(got)); diff != "" {
					t.Errorf("Board(%d, queued) is not the first queued jobs in claim order (-want +got):\n%s", limit, diff)
				}
			}
			// The lane takes them in that order.
			for i, id := range want {
				if c := f.claim("east"); c.Job.ID != id {
					t.Errorf("claim %d took job %d, want %d (claim order)", i+1, c.Job.ID, id)
				}
			}
		})
	})
	t.Run("RetriedOldJobIsNotTheHead", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(time.Minute)
			f.lane("east")
			// Five minutes ago: a1 (turn 0) ran and failed, its retry went
			// after a2 (turn 1), to turn 2: it has been queued 5 minutes.
			f.clk.At(-5 * time.Minute)
			a1, a2 := acceptAs(f, "a", "a1"), acceptAs(f, "a", "a2")
			f.fail(f.claim("east"), inkwell.ClassProviderError, "provider: HTTP 500")
			if _, err := f.s.RetryIfFailed(f.ctx, a1, store.ActorCLI); err != nil {
				t.Fatalf("RetryIfFailed: %v", err)
			}
			// Now: b sends two jobs. b1 enters in the turn the claims have
			// reached (turn 0, a1's), b2 in turn 1 beside a2. The lane ran
			// b1 and a2 (both failed too): b2 is the head, and a1, whose id
			// is the queue's oldest, waits its turn behind it.
			f.clk.At(0)
			b1, b2 := acceptAs(f, "b", "b1"), acceptAs(f, "b", "b2")
			for _, want := range []int64{b1, a2} {
				if c := f.claim("east"); c.Job.ID != want {
					t.Fatalf("claim took job %d, want %d", c.Job.ID, want)
				} else {
					f.fail(c, inkwell.ClassProviderError, "provider: HTTP 500")
				}
			}
			o := f.overview()["queued"]
			wantAction(t, "queued row", o.NextAction, "wait: lane east claims next")
			// The oldest queued job is still a1: it has been queued longest.
			if o.OldestJobID == nil || *o.OldestJobID != a1 {
				t.Errorf("queued row's oldest job = %v, want a1 (%d)", deref(o.OldestJobID), a1)
			}
			b := f.board()
			wantAction(t, "b2 (the head)", b[b2].NextAction, "wait: lane east claims next")
			wantAction(t, "a1 (retried, turn 2)", b[a1].NextAction, "wait: 1 queued ahead; live lanes claim round robin across accounts")
			var head sql.NullInt64
			var stuck bool
			if err := f.s.DB().QueryRowContext(f.ctx, `SELECT head_id, stuck FROM queue_state`).Scan(&head, &stuck); err != nil {
				t.Fatalf("queue_state: %v", err)
			}
			if head.Int64 != b2 || stuck {
				t.Errorf("queue_state: head %v, stuck %v; want b2 (%d), not stuck", head, stuck, b2)
			}
			if c := f.claim("east"); c.Job.ID != b2 {
				t.Errorf("claim took job %d, want the head b2 (%d)", c.Job.ID, b2)
			}
		})
	})
}

// TestStore_SQLiteKeepsStatistics: Inkwell keeps SQLite's planner
// statistics itself (PRAGMA optimize when serve or migrate opens a
// current schema); a read-only open (inkwell status) writes nothing.
func TestStore_SQLiteKeepsStatistics(t *testing.T) {
	t.Parallel()
	path := storetest.SQLitePath(t)
	open := func(opts store.Options) *store.Store {
		s, err := store.Open(t.Context(), path, opts)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return s
	}
	analyzed := func(s *store.Store) (n int) {
		err := s.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM sqlite_master WHERE name = 'sqlite_stat1'`).Scan(&n)
		if err == nil && n > 0 {
			err = s.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM sqlite_stat1 WHERE tbl = 'jobs'`).Scan(&n)
		}
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	s := open(store.Options{})
	if _, err := s.WriteDB().ExecContext(t.Context(), `INSERT INTO jobs (idempotency_key, request_hash, payload, status, created_at)
		WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 2000)
		SELECT 'k' || i, 'h', '{}', 'queued', '2026-01-01T00:00:00.000000Z' FROM c`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(store.Options{NoMigrate: true})
	if n := analyzed(s); n != 0 {
		t.Errorf("a read-only open analyzed jobs (%d sqlite_stat1 rows); it must write nothing", n)
	}
	s.Close()
	s = open(store.Options{})
	defer s.Close()
	if n := analyzed(s); n == 0 {
		t.Error("reopening a current schema left jobs without statistics; want PRAGMA optimize to analyze it")
	}
}

// BenchmarkStore_Overview measures the operator views on a database with
// a long history: n jobs, of which 1% queued, 1% failed and the rest done,
// each finished one with its attempt, each done one with its result and
// charge. /metrics reads Overview and LiveLanes at every scrape; the
// dashboard reads all three.
func BenchmarkStore_Overview(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		for _, backend := range []string{"sqlite", "postgres"} {
			b.Run(fmt.Sprintf("%s/jobs=%d", backend, n), func(b *testing.B) {
				dsn := filepath.Join(b.TempDir(), "bench.db")
				if backend == "postgres" {
					dsn = storetest.PostgresDSN(b)
				}
				s, err := store.Open(b.Context(), dsn, store.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				fillHistory(b, s, n)
				b.Run("Overview", func(b *testing.B) {
					for b.Loop() {
						if _, err := s.Overview(b.Context()); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run("Board50", func(b *testing.B) {
					for b.Loop() {
						if _, err := s.Board(b.Context(), 50); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run("LiveLanes", func(b *testing.B) {
					for b.Loop() {
						if _, err := s.LiveLanes(b.Context()); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		}
	}
}

// fillHistory writes n jobs straight into the tables, in one statement
// per table, since going through Accept and Complete would take minutes.
// Nothing analyzes them: the views must not need statistics (Inkwell keeps
// SQLite's at open, PostgreSQL's autovacuum gets to it in its own time).
func fillHistory(b *testing.B, s *store.Store, n int) {
	b.Helper()
	series := `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1) SELECT i FROM n`
	now := `strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || ($1 - i) || ' seconds')`
	if s.Dialect() == "postgres" {
		series = `SELECT i FROM generate_series(1, $1::int) AS i`
		now = `statement_timestamp() - make_interval(secs => $1 - i)`
	}
	status := `CASE WHEN i % 100 = 0 THEN 'queued' WHEN i % 100 = 1 THEN 'failed' ELSE 'done' END`
	stmts := []string{
		`INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, error, lane, created_at, started_at, finished_at)
		 SELECT i, 'bench-' || i, 'h', '{"prompt":"a haiku about ink","account":"default","max_words":50}', ` + status + `,
		   CASE WHEN i % 100 = 1 THEN 'provider: HTTP 500' END, CASE WHEN i % 100 = 0 THEN NULL ELSE 'east' END,
		   ` + now + `, CASE WHEN i % 100 = 0 THEN NULL ELSE ` + now + ` END, CASE WHEN i % 100 = 0 THEN NULL ELSE ` + now + ` END
		 FROM (` + series + `) s`,
		`INSERT INTO job_attempts (job_id, attempt_number, status, error, lane, started_at, finished_at)
		 SELECT id, 1, status, error, lane, started_at, finished_at FROM jobs WHERE status <> 'queued'`,
		// Each done job has its result and charge, as Complete writes them:
		// the done row checks that they are there.
		`INSERT INTO results (job_id, attempt_id, text, created_at)
		 SELECT job_id, id, 'ink', finished_at FROM job_attempts WHERE status = 'done'`,
		`INSERT INTO charges (job_id, attempt_id, account, amount_micros, provider_request_id, created_at)
		 SELECT job_id, id, 'default', 10, 'req-' || job_id, finished_at FROM job_attempts WHERE status = 'done'`,
	}
	for _, q := range stmts {
		q = strings.ReplaceAll(q, "$1", fmt.Sprint(n))
		if _, err := s.DB().ExecContext(b.Context(), q); err != nil {
			b.Fatalf("fill %d jobs: %v\n%s", n, err, q)
		}
	}
	l, err := s.LockLane(b.Context(), "east")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Release() })
	if err := s.RegisterLane(b.Context(), l); err != nil {
		b.Fatal(err)
	}
}

// TestStore_ViewsByClassMigrationBackFills: a database at schema 5 that
// holds failed jobs of every kind when migration 0006 arrives gets its
// counts by class from those rows, in the migration.
func TestStore_ViewsByClassMigrationBackFills(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		dsn, driver := b.DSN, "sqlite"
		if b.Name == "postgres" {
			dsn, driver = storetest.EmptyPostgresDSN(t), "pgx"
		}
		db, err := sql.Open(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		files, _ := filepath.Glob(filepath.Join("migrations", b.Name, "000[12345]_*.sql"))
		if len(files) != 5 {
			t.Fatalf("migrations 0001-0005 of %s: found %v", b.Name, files)
		}
		for i, file := range files {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(string(body)); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if i == 0 {
				mustExecAll(t, db, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`)
			}
			mustExecAll(t, db, fmt.Sprintf(`INSERT INTO schema_migrations VALUES (%d, 'v%d', '2026-01-01T00:00:00.000000Z')`, i+1, i+1))
		}
		ago := time.Now().UTC().Add(-time.Hour).Format(store.TimeLayout)
		ahead := time.Now().UTC().Add(time.Hour).Format(store.TimeLayout)
		mustExecAll(t, db,
			`INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, error, error_class, gave_up_after, pruned_at, not_before,
				lane, created_at, started_at, finished_at) VALUES
				(1, 'k1', 'h', '{}', 'done', NULL, NULL, NULL, '`+ago+`', NULL, 'east', '`+ago+`', '`+ago+`', '`+ago+`'),
				(2, 'k2', 'h', '{}', 'failed', 'x', 'provider_error', NULL, '`+ago+`', NULL, 'east', '`+ago+`', '`+ago+`', '`+ago+`'),
				(3, 'k3', 'h', '{}', 'failed', 'gave up after 5 attempts: x', 'rate_limited', 5, NULL, NULL, 'east', '`+ago+`', '`+ago+`', '`+ago+`'),
				(4, 'k4', 'h', '{}', 'failed', 'cancelled by x while ...', 'cancelled', NULL, NULL, NULL, 'east', '`+ago+`', '`+ago+`', '`+ago+`'),
				(5, 'k5', 'h', '{}', 'failed', 'cancelled by x', 'cancelled', NULL, NULL, NULL, NULL, '`+ago+`', NULL, '`+ago+`'),
				(6, 'k6', 'h', '{}', 'failed', 'boom', NULL, NULL, NULL, NULL, 'east', '`+ago+`', '`+ago+`', '`+ago+`'),
				(7, 'k7', 'h', '{}', 'failed', 'provider: provider call: timeout: x', 'timeout', NULL, NULL, NULL, 'east', '`+ago+`', '`+ago+`', '`+ago+`'),
				(8, 'k8', 'h', '{}', 'queued', 'provider: 503', 'provider_error', NULL, NULL, '`+ahead+`', 'east', '`+ago+`', NULL, NULL)`,
			`INSERT INTO job_attempts (id, job_id, attempt_number, status, lane, started_at, finished_at) VALUES (1, 1, 1, 'done', 'east', '`+ago+`', '`+ago+`')`,
			`INSERT INTO charges (job_id, attempt_id, account, amount_micros, provider_request_id, created_at) VALUES (1, 1, 'a', 1, 'r', '`+ago+`')`,
		)
		db.Close()
		s := storetest.MustOpen(t, dsn, store.Options{})
		if v, err := s.SchemaVersion(t.Context()); err != nil || v < 6 {
			t.Fatalf("SchemaVersion = %d, %v; want 6 or more", v, err)
		}
		wantCountsKept(t, s, "after migration 0006")
		kept := map[string]int64{}
		rows, err := s.DB().QueryContext(t.Context(), `SELECT kind, SUM(n) FROM job_counts GROUP BY kind`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k string
			var n int64
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			kept[k] = n
		}
		rows.Close()
		for kind, n := range map[string]int64{"done_pruned": 1, "failed_pruned": 1, "failed_gave_up": 1, "failed_cancelled_running": 1,
			"failed_cancelled": 1, "failed_legacy": 1, "failed_timeout": 1, "queued": 1, "done": 0} {
			if kept[kind] != n {
				t.Errorf("job_counts %s = %d, want %d", kind, kept[kind], n)
			}
		}
		f := &ovFixture{t: t, ctx: t.Context(), s: s}
		o := f.overview()
		wantActionPrefix(t, "queued", o["queued"].NextAction, "no live worker lane: start inkwell serve (no lane has ever registered); 1 waiting for back-off, next at ")
		wantActionPrefix(t, "failed", o["failed"].NextAction, "gave up after 5 attempts (the last rate_limited): automatic retry stopped; check the provider")
		if got := o["failed"].NextAction; !strings.Contains(got, "; 1 timeout: ") || !strings.Contains(got, "; 1 legacy ") ||
			!strings.Contains(got, "; 1 cancelled while the provider call was in flight") || !strings.Contains(got, "; 1 pruned by retention") {
			t.Errorf("failed = %q, want its timeout, legacy, cancelled in flight and pruned jobs", got)
		}
		wantAction(t, "done", o["done"].NextAction, "nothing to do: each has its result and charge; "+
			"1 pruned by retention (their prompt and text removed; key, attempts and charge kept): nothing to do")
	})
}
