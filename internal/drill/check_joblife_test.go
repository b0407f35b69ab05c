package drill

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// mustFail claims the queued job id and fails its attempt with class; with
// retryAt it reschedules the job, with gaveUp it fails it saying automatic
// retry gave up after that many attempts.
func (w *world) mustFail(class inkwell.ErrorClass, retryAt *time.Time, gaveUp int) {
	w.t.Helper()
	st := w.open()
	defer st.Close()
	ctx := context.Background()
	c, err := claimAs(st, "drill")
	if err != nil || c == nil {
		w.t.Fatalf("claim: %v %v", c, err)
	}
	err = st.FailIfRunning(ctx, store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "provider: made to fail (" + string(class) + ")",
		Class: class, RetryAt: retryAt, GaveUpAfter: gaveUp})
	if err != nil {
		w.t.Fatal(err)
	}
}

// mustCancel cancels job id, as the API does for a client's cancel, and
// logs the client's request.
func (w *world) mustCancel(id int64) {
	w.t.Helper()
	st := w.open()
	defer st.Close()
	if _, err := st.Cancel(context.Background(), id, "drill test"); err != nil {
		w.t.Fatal(err)
	}
	w.sent = append(w.sent, Sent{Seq: len(w.sent) + 1, Path: fmt.Sprintf("%s/%d/cancel", pathJobs, id), JobID: id, Outcome: OutcomeOK, Status: 200})
}

// mustPrune prunes every finished job with raw SQL, as `inkwell prune`
// does: prompt and text go, pruned_at is set, everything else stays.
func (w *world) mustPrune() {
	w.t.Helper()
	w.mustExec(`UPDATE jobs SET payload = '{"prompt":"","pruned":true}', pruned_at = '2026-12-01T00:00:00.000000Z' WHERE status IN ('done', 'failed')`,
		`UPDATE results SET text = '' WHERE job_id IN (SELECT id FROM jobs WHERE pruned_at IS NOT NULL)`)
}

// dropImmutable lets a test change a finished attempt, as a bug in a
// migration that lost the trigger would.
const dropImmutable = `DROP TRIGGER job_attempts_finished_immutable`

// TestCheck_JobLifeHealthyWorlds: a rescheduled job, one that gave up, a
// cancelled one, a pruned one and one retried by a client after a failure
// that is not retry-safe break nothing.
func TestCheck_JobLifeHealthyWorlds(t *testing.T) {
	t.Parallel()
	w := mustWorld(t) // job 1 done
	later := time.Now().Add(time.Hour)
	w.mustAccept("k2")
	w.mustFail(inkwell.ClassProviderError, &later, 0) // job 2 queued, waiting
	w.mustAccept("k3")
	w.mustFail(inkwell.ClassRateLimited, nil, 1) // job 3 gave up after 1
	id := w.mustAccept("k4")
	w.mustCancel(id) // job 4 cancelled while queued
	id = w.mustAccept("k5")
	w.mustFail(inkwell.ClassRejected, nil, 0) // job 5 failed, retried by a client, done
	st := w.open()
	if _, err := st.RetryIfFailed(context.Background(), id, store.ActorCLI); err != nil {
		t.Fatal(err)
	}
	st.Close()
	w.sent = append(w.sent, Sent{Seq: len(w.sent) + 1, Path: fmt.Sprintf("%s/%d/retry", pathJobs, id), JobID: id, Outcome: OutcomeOK, Status: 200})
	before := w.mustSnap(KindQuiet, "before")
	// Job 2's back-off ends; a lane runs it and job 5.
	w.mustExec(`UPDATE jobs SET not_before = '2000-01-01T00:00:00.000000Z' WHERE id = 2`)
	st = w.open()
	for range 2 {
		c, err := claimAs(st, "drill")
		if err != nil || c == nil {
			t.Fatalf("claim: %v %v", c, err)
		}
		w.mustCall(st, c, true)
	}
	st.Close()
	s := w.mustSnap(KindQuiet, "after")
	w.mustPrune()
	pruned := w.mustSnap(KindQuiet, "pruned")
	e := w.evidence(before, s, pruned)
	e.Requests = append(e.Requests, Sent{Seq: 99, Path: pathJobs, Key: "k1", JobID: 1, Outcome: OutcomeOK, Status: 200, AfterPrune: true, Pruned: true})
	final := pruned
	final.Kind, final.Label = KindFinal, "final"
	e.Snapshots = append(e.Snapshots, final)
	var vs []Violation
	for _, v := range Check(e) {
		if v.Invariant != InvAllDone || (v.JobID != 3) { // job 3 gave up: failed at the end, as it should be here
			vs = append(vs, v)
		}
	}
	if len(vs) != 0 {
		t.Errorf("healthy job-life world: %d violations:\n%s", len(vs), joinViolations(vs))
	}
	for _, j := range pruned.Jobs {
		if !j.PrunedAt.Valid && j.Status != inkwell.StatusQueued {
			t.Errorf("job %d (%s) was not pruned by the test's prune", j.ID, j.Status)
		}
	}
}

// TestCheck_JobLifeBrokenWorlds: each way of breaking §9's rules is caught,
// naming job and invariant.
func TestCheck_JobLifeBrokenWorlds(t *testing.T) {
	t.Parallel()
	later := time.Now().Add(time.Hour)
	tests := []struct {
		name   string
		setup  func(w *world) // before the first snapshot
		break_ func(w *world) // between the two snapshots
		job    int64
		inv    string
		extra  []Sent // more requests in the evidence
	}{
		{"FailedJobWithoutClass", func(w *world) { w.mustAccept("k2"); w.mustFail(inkwell.ClassRejected, nil, 0) },
			func(w *world) { w.mustExec(`UPDATE jobs SET error_class = NULL WHERE id = 2`) }, 2, InvErrorClass, nil},
		{"FailedAttemptWithoutClass", func(w *world) { w.mustAccept("k2"); w.mustFail(inkwell.ClassRejected, nil, 0) },
			func(w *world) {
				w.mustExec(dropImmutable, `UPDATE job_attempts SET error_class = NULL WHERE job_id = 2`)
			}, 2, InvErrorClass, nil},
		{"DoneAttemptWithClass", func(w *world) {},
			func(w *world) {
				w.mustExec(dropImmutable, `UPDATE job_attempts SET error_class = 'timeout' WHERE job_id = 1`)
			}, 1, InvErrorClass, nil},
		{"RestartedWithoutRecovery", func(w *world) { w.mustAccept("k2"); w.mustFail(inkwell.ClassProviderError, nil, 0) },
			func(w *world) {
				w.mustExec(dropImmutable, `UPDATE job_attempts SET error_class = 'worker_restarted' WHERE job_id = 2`,
					`UPDATE jobs SET error_class = 'worker_restarted' WHERE id = 2`)
			}, 2, InvRestartedClass, nil},
		{"RecoveryClosedWithAnotherClass", func(w *world) { w.mustAccept("k2"); w.mustFail(inkwell.ClassProviderError, nil, 0) },
			func(w *world) {
				w.mustExec(dropImmutable, `INSERT INTO recovery_runs (lane, incarnation, started_at, lock_method, evidence, attempts_closed, attempts_backfilled, jobs_failed)
					VALUES ('drill', 'x', '2026-01-01T00:00:00.000000Z', 'flock', '{"proof":"made up"}', 1, 0, 1)`,
					`UPDATE job_attempts SET recovery_run_id = (SELECT MAX(id) FROM recovery_runs) WHERE job_id = 2`)
			}, 2, InvRestartedClass, nil},
		{"RequeuedAfterRejected", func(w *world) { w.mustAccept("k2"); w.mustFail(inkwell.ClassRejected, nil, 0) },
			func(w *world) {
				// Re-queued with no client retry, then run to done.
				w.mustExec(`UPDATE jobs SET status = 'queued', error = NULL, error_class = NULL, finished_at = NULL WHERE id = 2`)
				st := w.open()
				defer st.Close()
				c, err := claimAs(st, "drill")
				if err != nil || c == nil {
					w.t.Fatalf("claim: %v %v", c, err)
				}
				w.mustCall(st, c, true)
			}, 2, InvRetrySafe, nil},
		{"RescheduledForRejected", func(w *world) { w.mustAccept("k2"); w.mustFail(inkwell.ClassProviderError, &later, 0) },
			func(w *world) {
				w.mustExec(dropImmutable, `UPDATE job_attempts SET error_class = 'rejected' WHERE job_id = 2`, `UPDATE jobs SET error_class = 'rejected' WHERE id = 2`)
			}, 2, InvNotBefore, nil},
		{"NotBeforeWithoutAFailedAttempt", func(w *world) { w.mustAccept("k2") },
			func(w *world) { w.mustExec(`UPDATE jobs SET not_before = '2030-01-01T00:00:00.000000Z' WHERE id = 2`) }, 2, InvNotBefore, nil},
		{"NotBeforeOnADoneJob", func(w *world) {},
			func(w *world) { w.mustExec(`UPDATE jobs SET not_before = '2030-01-01T00:00:00.000000Z' WHERE id = 1`) }, 1, InvNotBefore, nil},
		{"GaveUpCountsWrong", func(w *world) { w.mustAccept("k2"); w.mustFail(inkwell.ClassProviderError, nil, 1) },
			func(w *world) { w.mustExec(`UPDATE jobs SET gave_up_after = 2 WHERE id = 2`) }, 2, InvGaveUp, nil},
		{"GaveUpOnRejected", func(w *world) { w.mustAccept("k2"); w.mustFail(inkwell.ClassRejected, nil, 0) },
			func(w *world) { w.mustExec(`UPDATE jobs SET gave_up_after = 1 WHERE id = 2`) }, 2, InvGaveUp, nil},
		{"CancelledJobRanAgain", func(w *world) { w.mustCancel(w.mustAccept("k2")) },
			func(w *world) {
				w.mustExec(`UPDATE jobs SET status = 'queued', error = NULL, error_class = NULL, finished_at = NULL WHERE id = 2`)
				st := w.open()
				defer st.Close()
				c, err := claimAs(st, "drill")
				if err != nil || c == nil {
					w.t.Fatalf("claim: %v %v", c, err)
				}
			}, 2, InvCancelled, nil},
		{"CancelledNobodyAsked", func(w *world) { w.mustAccept("k2") },
			func(w *world) {
				st := w.open()
				defer st.Close()
				if _, err := st.Cancel(context.Background(), 2, "nobody"); err != nil {
					w.t.Fatal(err)
				}
			}, 2, InvCancelAsked, nil},
		{"Cancel200ButNotCancelled", func(w *world) { w.mustAccept("k2") }, func(w *world) {}, 2, InvCancelAsked,
			[]Sent{{Seq: 50, Path: pathJobs + "/2/cancel", JobID: 2, Outcome: OutcomeOK, Status: 200}}},
		{"PruneDroppedTheCharge", func(w *world) {},
			func(w *world) { w.mustPrune(); w.mustExec(`DELETE FROM charges WHERE job_id = 1`) }, 1, InvPruned, nil},
		{"PruneKeptTheText", func(w *world) {},
			func(w *world) { w.mustPrune(); w.mustExec(`UPDATE results SET text = 'still here' WHERE job_id = 1`) }, 1, InvPruned, nil},
		{"PruneKeptThePrompt", func(w *world) {},
			func(w *world) {
				w.mustExec(`UPDATE jobs SET pruned_at = '2026-12-01T00:00:00.000000Z', payload = payload || ' ' WHERE id = 1`, `UPDATE results SET text = ''`)
			},
			1, InvPruned, nil},
		{"PrunedJobRanAgain", func(w *world) { w.mustPrune() },
			func(w *world) {
				w.mustExec(`INSERT INTO job_attempts (job_id, attempt_number, status, error, error_class, lane, started_at, finished_at)
					VALUES (1, 2, 'failed', 'made up', 'provider_error', 'drill', '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:01.000000Z')`)
			}, 1, InvPrunedNotRerun, nil},
		{"PrunedKeyAnsweredCreated", func(w *world) { w.mustPrune() }, func(w *world) {}, 1, InvPrunedNotRerun,
			[]Sent{{Seq: 50, Path: pathJobs, Key: "k1", JobID: 1, Outcome: OutcomeOK, Status: 201, AfterPrune: true, Pruned: true}}},
		{"PrunedKeyAnsweredUnpruned", func(w *world) { w.mustPrune() }, func(w *world) {}, 1, InvPrunedNotRerun,
			[]Sent{{Seq: 50, Path: pathJobs, Key: "k1", JobID: 1, Outcome: OutcomeOK, Status: 200, AfterPrune: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := mustWorld(t)
			tt.setup(w)
			before := w.mustSnap(KindQuiet, "before")
			if vs := Check(w.evidence(before)); len(vs) != 0 {
				t.Fatalf("before breaking: %d violations:\n%s", len(vs), joinViolations(vs))
			}
			tt.break_(w)
			e := w.evidence(before, w.mustSnap(KindFinal, "final"))
			e.Requests = append(e.Requests, tt.extra...)
			wantViolation(t, Check(e), tt.job, tt.inv)
		})
	}
}
