package store_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestRecover_AfterMigrationFromV2: a database as Inkwell left it at
// schema version 2 (before the lane's process identity, error classes,
// accounts, batches …) holds a job running on lane local with its running
// attempt, a job running on local with no attempt at all, a failed job, a
// done job (result and charge), and a queued job; the lanes row names a
// pid that no longer runs, on this host. It is migrated to the newest
// schema and recovered:
//   - the running attempt -> failed "worker restarted", class
//     worker_restarted, linked to the run; its job failed the same way;
//   - the running job without any attempt gets exactly one back-filled
//     failed attempt (number 1, started_at the job's);
//   - nothing else changes; the run's counts say 1 closed, 1 back-filled,
//     2 failed; its evidence names the previous holder and says its record
//     has no process start time;
//   - a second recovery changes no job or attempt and records zero counts.
func TestRecover_AfterMigrationFromV2(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		dsn, old := openAtVersion(t, b, 2)
		host, _ := os.Hostname()
		const at = `'2026-11-30T00:00:00.000000Z'`
		mustExecAll(t, old.DB(),
			`INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, lane, created_at, started_at, finished_at) VALUES
			 (1, 'k1', 'h1', '{"prompt":"p1"}', 'running', 'local', `+at+`, `+at+`, NULL),
			 (2, 'k2', 'h2', '{"prompt":"p2"}', 'running', 'local', `+at+`, '2026-11-30T00:00:05.000000Z', NULL),
			 (3, 'k3', 'h3', '{"prompt":"p3"}', 'failed', 'local', `+at+`, `+at+`, `+at+`),
			 (4, 'k4', 'h4', '{"prompt":"p4"}', 'done', 'local', `+at+`, `+at+`, `+at+`),
			 (5, 'k5', 'h5', '{"prompt":"p5"}', 'queued', NULL, `+at+`, NULL, NULL)`,
			`INSERT INTO job_attempts (id, job_id, attempt_number, status, error, lane, started_at, finished_at) VALUES
			 (1, 1, 1, 'running', NULL, 'local', `+at+`, NULL),
			 (2, 3, 1, 'failed', 'provider: provider call: server error: 500', 'local', `+at+`, `+at+`),
			 (3, 4, 1, 'done', NULL, 'local', `+at+`, `+at+`)`,
			`INSERT INTO results (id, job_id, attempt_id, text, created_at) VALUES (1, 4, 3, 'paid', `+at+`)`,
			`INSERT INTO charges (id, job_id, attempt_id, account, amount_micros, provider_request_id, created_at) VALUES (1, 4, 3, 'default', 7, 'req-4', `+at+`)`,
			fmt.Sprintf(`INSERT INTO lanes (name, incarnation, pid, host, started_at, heartbeat_at) VALUES ('local', 'old-inc', 4194000, '%s', %s, %s)`, host, at, at))
		if b.Name == "postgres" {
			mustExecAll(t, old.DB(),
				`SELECT setval(pg_get_serial_sequence('jobs', 'id'), 100)`,
				`SELECT setval(pg_get_serial_sequence('job_attempts', 'id'), 100)`,
				`SELECT setval(pg_get_serial_sequence('results', 'id'), 100)`,
				`SELECT setval(pg_get_serial_sequence('charges', 'id'), 100)`)
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
		s := storetest.MustOpen(t, dsn, store.Options{}) // migrates 0003 …
		// Recovery closes attempts and jobs; results and charges are the
		// past it never touches.
		paid := dumpOf(t, s.DB(), "results", "charges")
		l := mustLockLane(t, s, "local")
		rep, err := s.Recover(t.Context(), l, false)
		if err != nil {
			t.Fatalf("Recover: %v", err)
		}
		if rep.AttemptsClosed != 1 || rep.AttemptsBackfilled != 1 || rep.JobsFailed != 2 || len(rep.Anomalies) != 0 {
			t.Errorf("report %+v; want 1 closed, 1 back-filled, 2 failed, no anomalies", rep)
		}
		run := mustRecoveryRun(t, s, rep.RunID)
		if run.AttemptsClosed != 1 || run.AttemptsBackfilled != 1 || run.JobsFailed != 2 {
			t.Errorf("recovery_runs row %+v; want counts 1/1/2", run)
		}
		ev, _ := json.Marshal(rep.Evidence)
		if !strings.Contains(string(ev), "4194000") {
			t.Errorf("evidence %s does not name the previous holder's pid", ev)
		}
		for _, id := range []int64{1, 2} {
			d := mustShow(t, s, id)
			if d.Job.Status != inkwell.StatusFailed || d.Job.Error != inkwell.ErrWorkerRestarted || d.Job.ErrorClass != inkwell.ClassWorkerRestarted || len(d.Attempts) != 1 {
				t.Errorf("job %d after recovery: %+v, %d attempts; want failed worker restarted with one attempt", id, d.Job, len(d.Attempts))
				continue
			}
			a := d.Attempts[0]
			if a.Status != inkwell.StatusFailed || a.Error != inkwell.ErrWorkerRestarted || a.RecoveryRunID == nil || *a.RecoveryRunID != rep.RunID || a.AttemptNumber != 1 {
				t.Errorf("job %d attempt %+v; want number 1, failed worker restarted, linked to run %d", id, a, rep.RunID)
			}
		}
		if d := mustShow(t, s, 2); d.Attempts[0].StartedAt == nil || d.Job.StartedAt == nil || !d.Attempts[0].StartedAt.Equal(*d.Job.StartedAt) {
			t.Errorf("back-filled attempt started %v, job started %v; want the job's", d.Attempts[0].StartedAt, d.Job.StartedAt)
		}
		for id, want := range map[int64]string{3: inkwell.StatusFailed, 4: inkwell.StatusDone, 5: inkwell.StatusQueued} {
			if d := mustShow(t, s, id); d.Job.Status != want || (id == 5 && len(d.Attempts) != 0) || (id != 5 && len(d.Attempts) != 1) {
				t.Errorf("job %d after recovery: %s with %d attempts; want %s untouched", id, d.Job.Status, len(d.Attempts), want)
			}
		}
		after := dumpOf(t, s.DB(), "jobs", "job_attempts", "results", "charges")
		rep2, err := s.Recover(t.Context(), l, false)
		if err != nil || rep2.AttemptsClosed != 0 || rep2.AttemptsBackfilled != 0 || rep2.JobsFailed != 0 {
			t.Errorf("second recovery: %+v, %v; want zero counts", rep2, err)
		}
		assertSameDump(t, after, dumpOf(t, s.DB(), "jobs", "job_attempts", "results", "charges"))
		assertSameDump(t, paid, dumpOf(t, s.DB(), "results", "charges"))
		assertIntact(t, s)
	})
}
