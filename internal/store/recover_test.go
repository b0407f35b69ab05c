package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Recovery is tested on hand-built databases: the rows a dead process could
// have left are written with plain SQL, the store is closed and opened again
// (as after a restart), and then one Recover runs.

// orphans is the state a dead holder of lane "local" left behind.
type orphans struct {
	running, runningSecond int64 // running jobs with a running attempt (the second has a failed attempt 1 before it)
	legacy, noAttempt      int64 // running jobs without any attempt: lane NULL (legacy) and lane local
	queued, failed, done   int64 // finished or waiting jobs: never touched
	otherLane, otherLegacy int64 // running on lane "other": not this lane's orphans
	legacyStarted          time.Time
	noAttemptStarted       time.Time
}

// recoveredJobs are the jobs one recovery of lane local must fail.
func (o orphans) recoveredJobs() []int64 {
	return []int64{o.running, o.runningSecond, o.legacy, o.noAttempt}
}

func (o orphans) untouchedJobs() []int64 {
	return []int64{o.queued, o.failed, o.done, o.otherLane, o.otherLegacy}
}

// buildOrphans writes the rows of a crash: open, write, close, as the dead
// process would have. It returns the DSN's fixture.
func buildOrphans(t *testing.T, dsn string) orphans {
	t.Helper()
	s := mustOpenRaw(t, dsn)
	defer s.Close()
	b := fixture{t: t, s: s}
	t0 := time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC)
	var o orphans
	o.running = b.job("running", "local", t0)
	b.attempt(o.running, 1, "running", "local", t0, nil, nil)
	o.runningSecond = b.job("running", "local", t0)
	b.attempt(o.runningSecond, 1, "failed", "local", t0, t0.Add(time.Second), "provider: 500")
	b.attempt(o.runningSecond, 2, "running", "local", t0.Add(2*time.Second), nil, nil)
	o.legacyStarted = t0.Add(-time.Hour)
	o.legacy = b.job("running", nil, o.legacyStarted)
	o.noAttemptStarted = t0.Add(time.Minute)
	o.noAttempt = b.job("running", "local", o.noAttemptStarted)
	o.queued = b.job("queued", nil, nil)
	o.failed = b.finishedJob("failed", "local", t0, "provider: timeout")
	b.attempt(o.failed, 1, "failed", "local", t0, t0.Add(time.Second), "provider: timeout")
	o.done = b.finishedJob("done", "local", t0, nil)
	a := b.attempt(o.done, 1, "done", "local", t0, t0.Add(time.Second), nil)
	b.resultAndCharge(o.done, a, t0.Add(time.Second))
	o.otherLane = b.job("running", "other", t0)
	b.attempt(o.otherLane, 1, "running", "other", t0, nil, nil)
	o.otherLegacy = b.job("running", "other", t0)
	b.deadHolder("local", 4242, "old-host", t0.Add(5*time.Second))
	return o
}

func TestStore_Recover(t *testing.T) {
	t.Parallel()
	t.Run("ClosesOrphansOfTheLane", func(t *testing.T) {
		t.Parallel()
		storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
			o := buildOrphans(t, b.DSN)
			clock := newClock()
			s := storetest.MustOpen(t, b.DSN, store.Options{NowFunc: clock.Now})
			before := dumpAll(t, s)
			beforeJobs := jobsByID(t, s)
			beforeAttempts := attemptsByJob(t, s)

			lock := mustLockLane(t, s, "local")
			rep, err := s.Recover(t.Context(), lock, false)
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			now := clock.Now()
			after := dumpAll(t, s)
			afterJobs := jobsByID(t, s)
			afterAttempts := attemptsByJob(t, s)

			// The dead holder ran on another host: on SQLite its process
			// cannot be checked, so its row is not marked (the flock closes
			// its orphans, and proves no more); on PostgreSQL the advisory
			// lock proves its session ended.
			stopped := ""
			if lock.Method != "flock" {
				stopped = fmt.Sprintf("session ended: recovery run %d took its lane lock (%s) and closed its orphans", rep.RunID, lock.Method)
			}
			want := store.RecoveryReport{RunID: rep.RunID, Lane: "local", AttemptsClosed: 2, AttemptsBackfilled: 2, JobsFailed: 4, Evidence: rep.Evidence,
				PreviousStopped: stopped}
			if diff := cmp.Diff(want, rep); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
			// The counts are the rows that changed, no more, no less.
			changedJobs, changedAttempts, newAttempts := changedRows(before, after)
			if int64(changedJobs) != rep.JobsFailed || int64(changedAttempts) != rep.AttemptsClosed || int64(newAttempts) != rep.AttemptsBackfilled {
				t.Errorf("rows changed: %d jobs, %d attempts, %d new attempts; report says %d, %d, %d",
					changedJobs, changedAttempts, newAttempts, rep.JobsFailed, rep.AttemptsClosed, rep.AttemptsBackfilled)
			}
			for _, tbl := range []string{"results", "charges"} {
				if diff := cmp.Diff(before[tbl], after[tbl]); diff != "" {
					t.Errorf("recovery changed %s (-before +after):\n%s", tbl, diff)
				}
			}
			// The dead holder's lanes row is stopped, naming the run, where
			// that is proven, and nothing else of it changes.
			wantLanes := [][]string{}
			for _, row := range before["lanes"] {
				var r []string
				for _, col := range row { // NULL cells are left out: they follow heartbeat_at
					r = append(r, col)
					if strings.HasPrefix(col, "heartbeat_at=") && stopped != "" {
						r = append(r, "stopped_at="+now.UTC().Format("2006-01-02T15:04:05.000000Z"), "stop_reason="+stopped)
					}
				}
				wantLanes = append(wantLanes, r)
			}
			if diff := cmp.Diff(wantLanes, after["lanes"]); diff != "" {
				t.Errorf("lanes after recovery (-want +got):\n%s", diff)
			}

			for _, id := range o.recoveredJobs() {
				j, was := afterJobs[id], beforeJobs[id]
				if j.Status != inkwell.StatusFailed || j.Error != inkwell.ErrWorkerRestarted || !timeIs(j.FinishedAt, now) {
					t.Errorf("job %d = %+v, want failed %q finished %v", id, j, inkwell.ErrWorkerRestarted, now)
				}
				if !cmp.Equal(j.StartedAt, was.StartedAt) || j.Lane != was.Lane || j.IdempotencyKey != was.IdempotencyKey {
					t.Errorf("job %d: recovery changed more than status, error and finished_at:\n%s", id, cmp.Diff(was, j))
				}
				last := afterAttempts[id][len(afterAttempts[id])-1]
				if last.Status != inkwell.StatusFailed || last.Error != inkwell.ErrWorkerRestarted || !timeIs(last.FinishedAt, now) ||
					last.RecoveryRunID == nil || *last.RecoveryRunID != rep.RunID {
					t.Errorf("job %d last attempt = %+v, want failed %q finished %v in recovery run %d", id, last, inkwell.ErrWorkerRestarted, now, rep.RunID)
				}
			}
			// Closed attempts keep their number, lane and start.
			for _, id := range []int64{o.running, o.runningSecond} {
				was, got := beforeAttempts[id], afterAttempts[id]
				if len(got) != len(was) {
					t.Fatalf("job %d: %d attempts, want %d", id, len(got), len(was))
				}
				if diff := cmp.Diff(was[:len(was)-1], got[:len(got)-1]); diff != "" {
					t.Errorf("job %d: earlier finished attempts changed (-before +after):\n%s", id, diff)
				}
				l, w := got[len(got)-1], was[len(was)-1]
				if l.ID != w.ID || l.AttemptNumber != w.AttemptNumber || l.Lane != w.Lane || !cmp.Equal(l.StartedAt, w.StartedAt) {
					t.Errorf("job %d: closed attempt %+v, was %+v", id, l, w)
				}
			}
			// Back-filled attempts: exactly one, number 1, started when the job did.
			for id, started := range map[int64]time.Time{o.legacy: o.legacyStarted, o.noAttempt: o.noAttemptStarted} {
				got := afterAttempts[id]
				if len(got) != 1 || got[0].AttemptNumber != 1 || !timeIs(got[0].StartedAt, started) || got[0].Lane != afterJobs[id].Lane {
					t.Errorf("job %d attempts = %+v, want one back-filled attempt number 1 started %v on lane %q", id, got, started, afterJobs[id].Lane)
				}
			}
			for _, id := range o.untouchedJobs() {
				if diff := cmp.Diff(rowsOf(before, id), rowsOf(after, id)); diff != "" {
					t.Errorf("job %d was touched (-before +after):\n%s", id, diff)
				}
			}
			if n := count(t, s, `SELECT COUNT(*) FROM job_attempts WHERE recovery_run_id = $1`, rep.RunID); int64(n) != rep.AttemptsClosed+rep.AttemptsBackfilled {
				t.Errorf("attempts linked to run %d = %d, want %d", rep.RunID, n, rep.AttemptsClosed+rep.AttemptsBackfilled)
			}
			run := mustRecoveryRun(t, s, rep.RunID)
			if run.Lane != "local" || run.AttemptsClosed != rep.AttemptsClosed || run.AttemptsBackfilled != rep.AttemptsBackfilled || run.JobsFailed != rep.JobsFailed || run.Anomalies != "" {
				t.Errorf("recovery_runs row = %+v, want the report's lane and counts %+v", run, rep)
			}
			var ev store.Evidence
			if err := json.Unmarshal([]byte(run.Evidence), &ev); err != nil {
				t.Fatalf("evidence %q is not JSON: %v", run.Evidence, err)
			}
			if ev.LockMethod == "" || ev.LockMethod != run.LockMethod || ev.Proof == "" || ev.Recoverer.PID != lock.Self.PID || ev.Recoverer.Incarnation != lock.Self.Incarnation {
				t.Errorf("evidence = %+v, want the lock method, a proof and this process as recoverer", ev)
			}
			if ev.LaneRow == nil || ev.LaneRow.PID != 4242 || ev.LaneRow.Host != "old-host" {
				t.Errorf("evidence previous holder = %+v, want pid 4242 on old-host (the lanes row)", ev.LaneRow)
			}
			if got := count(t, s, `SELECT COUNT(*) FROM recovery_runs WHERE id = $1 AND prev_pid = 4242 AND prev_host = 'old-host' AND prev_heartbeat_at IS NOT NULL`, rep.RunID); got != 1 {
				t.Errorf("recovery_runs row does not name the previous holder's pid, host and heartbeat")
			}
		})
	})
	t.Run("TwiceChangesNothing", func(t *testing.T) {
		t.Parallel()
		storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
			buildOrphans(t, b.DSN)
			s := mustOpenRaw(t, b.DSN)
			lock := mustLockLaneNoCleanup(t, s, "local")
			first, err := s.Recover(t.Context(), lock, false)
			if err != nil {
				t.Fatalf("first Recover: %v", err)
			}
			lock.Release()
			s.Close()

			s = storetest.MustOpen(t, b.DSN, store.Options{})
			before := dumpOf(t, s.DB(), "jobs", "job_attempts", "results", "charges")
			second, err := s.Recover(t.Context(), mustLockLane(t, s, "local"), false)
			if err != nil {
				t.Fatalf("second Recover: %v", err)
			}
			assertSameDump(t, before, dumpOf(t, s.DB(), "jobs", "job_attempts", "results", "charges"))
			if second.AttemptsClosed+second.AttemptsBackfilled+second.JobsFailed != 0 || len(second.Anomalies) != 0 {
				t.Errorf("second run = %+v, want zero counts and no anomalies", second)
			}
			if second.RunID == first.RunID || countRows(t, s, "recovery_runs") != 2 {
				t.Errorf("second run id %d (first %d), %d recovery_runs rows; want a row per run", second.RunID, first.RunID, countRows(t, s, "recovery_runs"))
			}
			run := mustRecoveryRun(t, s, second.RunID)
			if run.AttemptsClosed+run.AttemptsBackfilled+run.JobsFailed != 0 {
				t.Errorf("second recovery_runs row = %+v, want zero counts", run)
			}
		})
	})
	t.Run("DryRunChangesNothing", func(t *testing.T) {
		t.Parallel()
		storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
			buildOrphans(t, b.DSN)
			addAnomalies(t, b.DSN)
			s := storetest.MustOpen(t, b.DSN, store.Options{})
			lock := mustLockLane(t, s, "local")
			before := dumpAll(t, s)
			dry, err := s.Recover(t.Context(), lock, true)
			if err != nil {
				t.Fatalf("dry Recover: %v", err)
			}
			assertSameDump(t, before, dumpAll(t, s))
			if !dry.DryRun || dry.RunID != 0 {
				t.Errorf("dry report DryRun=%v RunID=%d, want true and 0 (no row was kept)", dry.DryRun, dry.RunID)
			}
			done, err := s.Recover(t.Context(), lock, false)
			if err != nil {
				t.Fatalf("real Recover: %v", err)
			}
			if dry.AttemptsClosed != done.AttemptsClosed || dry.AttemptsBackfilled != done.AttemptsBackfilled || dry.JobsFailed != done.JobsFailed || !slices.Equal(dry.Anomalies, done.Anomalies) {
				t.Errorf("dry run reported %+v, the real run did %+v", dry, done)
			}
			if done.JobsFailed == 0 {
				t.Errorf("the real run failed no job; the fixture has orphans")
			}
		})
	})
	t.Run("AnomaliesAreReportedAndLeftAlone", func(t *testing.T) {
		t.Parallel()
		storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
			o := buildOrphans(t, b.DSN)
			an := addAnomalies(t, b.DSN)
			s := storetest.MustOpen(t, b.DSN, store.Options{})
			before := dumpAll(t, s)
			rep, err := s.Recover(t.Context(), mustLockLane(t, s, "local"), false)
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			after := dumpAll(t, s)
			for _, id := range an.jobs() {
				if diff := cmp.Diff(rowsOf(before, id), rowsOf(after, id)); diff != "" {
					t.Errorf("anomalous job %d was rewritten (-before +after):\n%s", id, diff)
				}
			}
			if len(rep.Anomalies) != 3 {
				t.Errorf("anomalies = %q, want 3", rep.Anomalies)
			}
			for _, id := range an.jobs() {
				if !slices.ContainsFunc(rep.Anomalies, func(a string) bool { return strings.Contains(a, fmt.Sprintf("job %d ", id)) }) {
					t.Errorf("anomalies %q do not name job %d", rep.Anomalies, id)
				}
			}
			run := mustRecoveryRun(t, s, rep.RunID)
			if run.Anomalies != strings.Join(rep.Anomalies, "\n") {
				t.Errorf("recovery_runs.anomalies = %q, want the report's %q", run.Anomalies, rep.Anomalies)
			}
			// The honest orphans are still recovered.
			if rep.JobsFailed != int64(len(o.recoveredJobs())) {
				t.Errorf("jobs failed = %d, want %d", rep.JobsFailed, len(o.recoveredJobs()))
			}
		})
	})
	t.Run("EmptyDatabaseWritesARun", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			rep, err := s.Recover(t.Context(), mustLockLane(t, s, "local"), false)
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			if rep.RunID == 0 || rep.AttemptsClosed+rep.AttemptsBackfilled+rep.JobsFailed != 0 {
				t.Errorf("report = %+v, want a run with zero counts", rep)
			}
			if rep.Evidence.LaneRow != nil {
				t.Errorf("evidence names a previous holder %+v on a fresh database", rep.Evidence.LaneRow)
			}
			if got := countRows(t, s, "recovery_runs"); got != 1 {
				t.Errorf("recovery_runs rows = %d, want 1", got)
			}
		})
	})
	t.Run("ReleasedLockIsRefused", func(t *testing.T) {
		t.Parallel()
		storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
			buildOrphans(t, b.DSN)
			s := storetest.MustOpen(t, b.DSN, store.Options{})
			lock := mustLockLane(t, s, "local")
			lock.Release()
			before := dumpAll(t, s)
			if _, err := s.Recover(t.Context(), lock, false); err == nil {
				t.Fatalf("Recover with a released lock succeeded; it must prove the holder dead first")
			}
			assertSameDump(t, before, dumpAll(t, s))
		})
	})
}

// anomalies are rows that break the invariants on lane local.
type anomalies struct {
	failedWithRunning, queuedWithRunning int64 // a running attempt under a job that is not running
	runningNoRunning                     int64 // a running job whose attempts are all finished
}

func (a anomalies) jobs() []int64 {
	return []int64{a.failedWithRunning, a.queuedWithRunning, a.runningNoRunning}
}

func addAnomalies(t *testing.T, dsn string) anomalies {
	t.Helper()
	s := mustOpenRaw(t, dsn)
	defer s.Close()
	b := fixture{t: t, s: s}
	t0 := time.Date(2026, 2, 2, 9, 0, 0, 0, time.UTC)
	var a anomalies
	a.failedWithRunning = b.finishedJob("failed", "local", t0, "provider: 500")
	b.attempt(a.failedWithRunning, 1, "running", "local", t0, nil, nil)
	a.queuedWithRunning = b.job("queued", "local", nil)
	b.attempt(a.queuedWithRunning, 1, "running", "local", t0, nil, nil)
	a.runningNoRunning = b.job("running", "local", t0)
	b.attempt(a.runningNoRunning, 1, "failed", "local", t0, t0.Add(time.Second), "provider: 500")
	return a
}

// fixture writes rows with plain SQL, dialect-neutrally.
type fixture struct {
	t *testing.T
	s *store.Store
	n int
}

func (f *fixture) key() string {
	f.n++
	return fmt.Sprintf("fixture-%d-%d", time.Now().UnixNano(), f.n)
}

// job inserts a job; lane and started may be nil (SQL NULL).
func (f *fixture) job(status string, lane any, started any) int64 {
	f.t.Helper()
	return f.insertJob(status, lane, started, nil, nil)
}

func (f *fixture) finishedJob(status string, lane any, started time.Time, errText any) int64 {
	f.t.Helper()
	return f.insertJob(status, lane, started, started.Add(time.Second), errText)
}

func (f *fixture) insertJob(status string, lane, started, finished, errText any) int64 {
	f.t.Helper()
	const q = `INSERT INTO jobs (idempotency_key, request_hash, payload, status, error, lane, created_at, started_at, finished_at)
		VALUES ($1, 'h', '{"prompt":"p"}', $2, $3, $4, $5, $6, $7) RETURNING id`
	var id int64
	created := time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC)
	if err := f.s.DB().QueryRowContext(context.Background(), rebind(f.s, q), f.key(), status, errText, lane,
		tsArg(f.s, created), f.tsOrNil(started), f.tsOrNil(finished)).Scan(&id); err != nil {
		f.t.Fatalf("insert %s job: %v", status, err)
	}
	return id
}

func (f *fixture) attempt(jobID int64, n int, status string, lane any, started time.Time, finished, errText any) int64 {
	f.t.Helper()
	const q = `INSERT INTO job_attempts (job_id, attempt_number, status, error, lane, started_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`
	var id int64
	if err := f.s.DB().QueryRowContext(context.Background(), rebind(f.s, q), jobID, n, status, errText, lane,
		tsArg(f.s, started), f.tsOrNil(finished)).Scan(&id); err != nil {
		f.t.Fatalf("insert attempt %d of job %d: %v", n, jobID, err)
	}
	return id
}

func (f *fixture) resultAndCharge(jobID, attemptID int64, at time.Time) {
	f.t.Helper()
	mustExec(f.t, f.s, `INSERT INTO results (job_id, attempt_id, text, created_at) VALUES ($1, $2, 'text', $3)`, jobID, attemptID, tsArg(f.s, at))
	mustExec(f.t, f.s, `INSERT INTO charges (job_id, attempt_id, account, amount_micros, provider_request_id, created_at)
		VALUES ($1, $2, 'default', 100, 'req-1', $3)`, jobID, attemptID, tsArg(f.s, at))
}

// deadHolder writes the lanes row of a process that died holding the lane.
func (f *fixture) deadHolder(lane string, pid int, host string, beat time.Time) {
	f.t.Helper()
	mustExec(f.t, f.s, `INSERT INTO lanes (name, incarnation, pid, host, started_at, heartbeat_at) VALUES ($1, 'dead-incarnation', $2, $3, $4, $5)`,
		lane, pid, host, tsArg(f.s, beat.Add(-time.Hour)), tsArg(f.s, beat))
}

func (f *fixture) tsOrNil(v any) any {
	if t, ok := v.(time.Time); ok {
		return tsArg(f.s, t)
	}
	return nil
}

// mustOpenRaw opens a store that the caller closes (to reopen it later).
func mustOpenRaw(t *testing.T, dsn string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), dsn, store.Options{Logger: storetest.TestLogger(t)})
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	return s
}

func mustLockLaneNoCleanup(t *testing.T, s *store.Store, lane string) *store.LaneLock {
	t.Helper()
	l, err := s.LockLane(t.Context(), lane)
	if err != nil {
		t.Fatalf("LockLane %s: %v", lane, err)
	}
	return l
}

func mustRecoveryRun(t *testing.T, s *store.Store, id int64) store.RecoveryRun {
	t.Helper()
	r, err := s.RecoveryRunByID(t.Context(), id)
	if err != nil {
		t.Fatalf("RecoveryRunByID %d: %v", id, err)
	}
	return r
}

func jobsByID(t *testing.T, s *store.Store) map[int64]inkwell.Job {
	t.Helper()
	out := map[int64]inkwell.Job{}
	for _, id := range ids(t, s, `SELECT id FROM jobs`) {
		j, err := s.Job(t.Context(), id)
		if err != nil {
			t.Fatalf("Job %d: %v", id, err)
		}
		out[id] = j
	}
	return out
}

func attemptsByJob(t *testing.T, s *store.Store) map[int64][]inkwell.Attempt {
	t.Helper()
	out := map[int64][]inkwell.Attempt{}
	for _, id := range ids(t, s, `SELECT id FROM jobs`) {
		a, err := s.Attempts(t.Context(), id)
		if err != nil {
			t.Fatalf("Attempts %d: %v", id, err)
		}
		out[id] = a
	}
	return out
}

func ids(t *testing.T, s *store.Store, q string) []int64 {
	t.Helper()
	rows, err := s.DB().QueryContext(t.Context(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// changedRows counts jobs rows that differ, attempt rows that differ and
// attempt rows that are new between two dumps (rows keyed by their id).
func changedRows(before, after dump) (jobs, attempts, newAttempts int) {
	byID := func(rows [][]string) map[string]string {
		m := map[string]string{}
		for _, r := range rows {
			m[r[0]] = strings.Join(r, "|")
		}
		return m
	}
	bj, aj := byID(before["jobs"]), byID(after["jobs"])
	for id, row := range aj {
		if bj[id] != row {
			jobs++
		}
	}
	ba, aa := byID(before["job_attempts"]), byID(after["job_attempts"])
	for id, row := range aa {
		old, ok := ba[id]
		switch {
		case !ok:
			newAttempts++
		case old != row:
			attempts++
		}
	}
	return jobs, attempts, newAttempts
}

// rowsOf picks, from a dump, the job row and the attempt, result and charge
// rows of one job.
func rowsOf(d dump, jobID int64) [][]string {
	var out [][]string
	idCol := fmt.Sprintf("id=%d", jobID)
	jobCol := fmt.Sprintf("job_id=%d", jobID)
	for _, r := range d["jobs"] {
		if r[0] == idCol {
			out = append(out, r)
		}
	}
	for _, tbl := range []string{"job_attempts", "results", "charges"} {
		for _, r := range d[tbl] {
			if slices.Contains(r, jobCol) {
				out = append(out, r)
			}
		}
	}
	return out
}
