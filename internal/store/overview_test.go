package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	return l
}

func (f *ovFixture) claim(lane string) *store.Claimed {
	f.t.Helper()
	c, err := f.s.Claim(f.ctx, lane)
	if err != nil || c == nil {
		f.t.Fatalf("Claim(%s) = %v, %v; want a claimed job", lane, c, err)
	}
	return c
}

func (f *ovFixture) fail(c *store.Claimed, msg string) {
	f.t.Helper()
	if err := f.s.FailIfRunning(f.ctx, store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: msg}); err != nil {
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

func TestStore_Overview(t *testing.T) {
	t.Parallel()
	t.Run("Columns", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			want := map[string][]string{
				"job_overview":  {"status", "jobs", "oldest_job_id", "oldest_age_seconds", "oldest_age", "next_action"},
				"job_board":     {"id", "status", "lane", "attempt", "since", "age_seconds", "age", "error", "next_action"},
				"lane_liveness": {"lane", "state", "alive", "heartbeat_age_seconds", "heartbeat_age", "running_jobs", "heartbeat_at", "pid", "host", "incarnation", "started_at", "stopped_at", "stop_reason"},
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
			wantAction(t, "board job 2", b[j2.ID].NextAction, "wait: 1 queued ahead; live lanes claim in id order")
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
			f.fail(c, "provider: HTTP 503")
			if _, err := f.s.RetryIfFailed(f.ctx, c.Job.ID); err != nil {
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
			wantAction(t, "running", o.NextAction, "wait: running on live lane east")
			r := f.board()[c.Job.ID]
			if r.Lane != "east" || r.Attempt != 1 {
				t.Errorf("board row = %+v, want lane east, attempt 1", r)
			}
			wantActionPrefix(t, "board", r.NextAction, "wait: running on live lane east (attempt 1, heartbeat ")
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
			wantActionPrefix(t, "running", o.NextAction,
				"restart that lane: its startup recovery closes these as failed (1 on lane east silent, last heartbeat 1h0")
			wantActionPrefix(t, "board", f.board()[c.Job.ID].NextAction,
				"restart that lane: its startup recovery closes these as failed (lane east silent, last heartbeat 1h0")
			if run, err := f.s.LastRecoveryRun(f.ctx); err != nil || run != nil {
				t.Fatalf("LastRecoveryRun before any = %v, %v; want nil, nil", run, err)
			}

			// Do what the action says: the lane restarts and recovers.
			l.Release()
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
			wantAction(t, "failed", ov["failed"].NextAction, fmt.Sprintf("inspect the error, then inkwell retry %d; "+
				"1 failed after the provider call had begun (1 by a worker restart: the provider may already have billed them): "+
				"the retry reuses the job's provider key, so the provider answers from its record", c.Job.ID))
			wantAction(t, "board", f.board()[c.Job.ID].NextAction, fmt.Sprintf("inspect the error, then inkwell retry %d "+
				"(the worker died during the attempt, so the provider may already have billed it; "+
				"the retry reuses the job's provider key, so the provider answers from its record)", c.Job.ID))

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
			f.lane("east")
			f.accept("k1")
			c := f.claim("east")
			f.clk.At(time.Minute)
			f.lane("west")
			want := "restart that lane: its startup recovery closes these as failed (lane east silent, last heartbeat 1h0"
			got := f.board()[c.Job.ID].NextAction
			wantActionPrefix(t, "board", got, want)
			// Only PostgreSQL lanes rescue each other (worker/rescue.go).
			const rescue = "; live lanes rescue them by themselves once that lane's lock session ends"
			if has := strings.HasSuffix(got, rescue); has != (f.s.Dialect() == "postgres") {
				t.Errorf("%s board action %q: ends with the rescue clause = %v, want %v", f.s.Dialect(), got, has, !has)
			}
			ov := f.overview()["running"].NextAction
			if has := strings.Contains(ov, rescue); has != (f.s.Dialect() == "postgres") {
				t.Errorf("%s overview action %q: has the rescue clause = %v, want %v", f.s.Dialect(), ov, has, !has)
			}
		})
	})
	t.Run("FailedBeforeAndAfterTheProviderCall", func(t *testing.T) {
		t.Parallel()
		runOverview(t, func(f *ovFixture) {
			f.clk.At(time.Minute)
			f.lane("east")
			for _, k := range []string{"k1", "k2", "k3", "k4"} {
				f.accept(k)
			}
			refused, unreadable, provider, shutdown := f.claim("east"), f.claim("east"), f.claim("east"), f.claim("east")
			f.fail(refused, refusedError)
			f.fail(unreadable, "payload unreadable: unexpected end of JSON input")
			f.fail(provider, "provider: HTTP 500 from the provider")
			f.fail(shutdown, inkwell.ErrShutdownGrace)
			b := f.board()
			wantAction(t, "refused", b[refused.Job.ID].NextAction, fmt.Sprintf("inspect the error and fix its cause "+
				"(the API key, the model or the request) before inkwell retry %d (the provider refused the request: a retry as it is fails the same way)", refused.Job.ID))
			wantAction(t, "payload unreadable", b[unreadable.Job.ID].NextAction,
				fmt.Sprintf("inspect the error, then inkwell retry %d", unreadable.Job.ID))
			for _, c := range []*store.Claimed{provider, shutdown} {
				wantAction(t, b[c.Job.ID].Error, b[c.Job.ID].NextAction, fmt.Sprintf("inspect the error, then inkwell retry %d "+
					"(failed after the provider call had begun; the retry reuses the job's provider key, so the provider answers from its record)", c.Job.ID))
			}
			o := f.overview()["failed"]
			if o.Jobs != 4 {
				t.Errorf("failed jobs = %d, want 4", o.Jobs)
			}
			// The first failed job is the refused one: the headline says to
			// fix its cause, and the refusal is not counted as retry-safe.
			wantAction(t, "failed", o.NextAction, fmt.Sprintf("inspect the error and fix its cause, then inkwell retry %d (and 3 more: SELECT * FROM job_board); "+
				"1 refused by the provider (HTTP 4xx): fix the API key, the model or the request first, or the retry fails the same way; "+
				"2 failed after the provider call had begun: the retry reuses the job's provider key, so the provider answers from its record", refused.Job.ID))
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
	if _, err := s.RetryIfFailed(f.ctx, 3); err != nil {
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
	wantAction(t, "done", o["done"].NextAction, "nothing to do: each has its result and charge, but for 1 "+adopted)
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
// per table, since going through Accept and Complete would take minutes,
// then analyzes them.
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
		// A live database has statistics (PostgreSQL's autovacuum analyzes
		// after bulk changes); without them PostgreSQL overestimates the
		// views' cost and JIT-compiles them, which is most of the time.
		`ANALYZE`,
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
