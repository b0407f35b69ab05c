package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
)

// Evidence is what a recovery run acted on, written to recovery_runs.evidence.
type Evidence struct {
	LockMethod string   `json:"lock_method"`
	LockPath   string   `json:"lock_path,omitempty"`
	Proof      string   `json:"proof"`
	Recoverer  Holder   `json:"recoverer"`
	LockFile   *Holder  `json:"previous_holder_per_lock_file,omitempty"`
	LaneRow    *LaneRow `json:"previous_holder_per_lanes_row,omitempty"`
	// PreviousProcess is the second fact behind a flock: why the previous
	// holder's process is known to be gone, or why it could not be checked.
	PreviousProcess string `json:"previous_process,omitempty"`
	// RescuedBy is the running lane that proved this lane dead and closed
	// its orphans (rescue on proof, PostgreSQL); empty at startup recovery.
	RescuedBy string `json:"rescued_by_lane,omitempty"`
}

// RecoveryReport is what one recovery run did (or, dry, would do).
type RecoveryReport struct {
	RunID              int64
	Lane               string
	DryRun             bool
	AttemptsClosed     int64
	AttemptsBackfilled int64
	JobsFailed         int64
	Anomalies          []string
	Evidence           Evidence
	// PreviousStopped is the stop_reason this run wrote on the dead
	// incarnation's lanes row; empty when the row was already stopped,
	// was this process's own, or there was none.
	PreviousStopped string
}

// errDryRun rolls a dry run's transaction back after it has counted.
var errDryRun = errors.New("dry run")

// Recover is startup recovery (docs/design.md §3) for the lane whose lock l
// holds: it closes the orphans of the lane's previous holder, which the
// lock proves dead, in one transaction, in this order:
//
//  0. open a recovery_runs row naming the evidence;
//  1. running attempts (of this lane) of running jobs -> failed, "worker restarted";
//  2. running jobs (of this lane, or of no lane: legacy) with no attempt row
//     at all -> one back-filled failed attempt, number 1;
//  3. the running jobs whose attempts steps 1-2 just closed -> failed;
//  4. the dead incarnation's lanes row, if not stopped -> stopped, naming
//     this run (the lock proved it dead, so status stops calling it alive);
//  5. the counts on the recovery_runs row; commit.
//
// Every closed row is linked to the run. Rows that break the invariants
// are reported in Anomalies and left exactly as they are. Run again, it
// finds nothing: it only touches running rows. With dryRun it does the same
// work and rolls it back, so the counts are exactly what a real run would do.
func (s *Store) Recover(ctx context.Context, l *LaneLock, dryRun bool) (RecoveryReport, error) {
	if err := l.Check(); err != nil {
		return RecoveryReport{}, fmt.Errorf("recover: %w", err)
	}
	rep := RecoveryReport{Lane: l.Lane, DryRun: dryRun}
	now := s.nowTS() // before the transaction: see RetryIfFailed
	err := s.inTxHooks(ctx, func(tx *sql.Tx) error {
		if err := s.recoverTx(ctx, tx, l, now, &rep); err != nil {
			return err
		}
		if dryRun {
			return errDryRun
		}
		return nil
	}, crashpoint.RecoverBeforeCommit, "")
	if dryRun && errors.Is(err, errDryRun) {
		rep.RunID = 0
		return rep, nil
	}
	if err != nil {
		return RecoveryReport{}, fmt.Errorf("recover lane %s: %w", l.Lane, err)
	}
	return rep, nil
}

func (s *Store) recoverTx(ctx context.Context, tx *sql.Tx, l *LaneLock, now any, rep *RecoveryReport) error {
	// The run opens and closes under the lock's fence (PostgreSQL; empty on
	// SQLite): no row means the lock was lost, and the run writes nothing.
	// Held by one session at both ends, it was held throughout, since a
	// session never takes its lock again: no new holder could claim between.
	fence, err := s.lockFence(l)
	if err != nil {
		return err
	}
	openRun := `INSERT INTO recovery_runs (lane, incarnation, started_at, lock_method, evidence,
			prev_pid, prev_host, prev_incarnation, prev_heartbeat_at)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 WHERE true` + fence + ` RETURNING id`
	// Step 1: the attempts the dead holder left running.
	const closeAttempts = `UPDATE job_attempts SET status = 'failed', error = $1, error_class = 'worker_restarted', finished_at = $2, recovery_run_id = $3
		WHERE status = 'running' AND lane = $4
		  AND job_id IN (SELECT id FROM jobs WHERE status = 'running')`
	// Step 2: legacy running jobs that never had an attempt get exactly one.
	const backfill = `INSERT INTO job_attempts (job_id, attempt_number, status, error, error_class, lane, started_at, finished_at, recovery_run_id)
		SELECT j.id, 1, 'failed', $1, 'worker_restarted', j.lane, j.started_at, $2, $3
		FROM jobs j
		WHERE j.status = 'running' AND (j.lane = $4 OR j.lane IS NULL)
		  AND NOT EXISTS (SELECT 1 FROM job_attempts a WHERE a.job_id = j.id)`
	// Step 3: only the jobs whose attempt this run closed or back-filled:
	// each job transition rests on an attempt row that names this run.
	const failJobs = `UPDATE jobs SET status = 'failed', error = $1, error_class = 'worker_restarted', finished_at = $2
		WHERE status = 'running'
		  AND id IN (SELECT job_id FROM job_attempts WHERE recovery_run_id = $3)`
	// Step 4: the lock and the process check proved that incarnation dead;
	// its row says so from now on, not after its heartbeat grows old.
	stopPrevious := `UPDATE lanes SET stopped_at = $1, stop_reason = $2
		WHERE name = $3 AND incarnation = $4 AND stopped_at IS NULL` + fence
	closeRun := `UPDATE recovery_runs SET attempts_closed = $1, attempts_backfilled = $2, jobs_failed = $3, anomalies = $4
		WHERE id = $5` + fence

	prevRow, err := s.laneTx(ctx, tx, l.Lane)
	if err != nil {
		return err
	}
	// The lock proves its previous holder's lock gone; its process must be
	// proven gone too wherever the lock can be taken from a live one.
	findings, live := previousHolders(l, prevRow)
	if live != nil {
		if why := l.hold.takenFromLive(*live); why != "" {
			return s.liveHolderError(l.Lane, *live, prevRow, why)
		}
		// Taken from a live holder only when it is this very process
		// (pgLock.takenFromLive): its lock session ended under it.
		findings = append(findings, fmt.Sprintf("previous holder (pid %d on host %s) is this process, whose lock session ended", live.PID, live.Host))
	}
	if l.PreviousProcess == "" {
		// On PostgreSQL the flock's proof (provePreviousGone) never ran:
		// what was found of the previous holder here is the evidence.
		l.PreviousProcess = strings.Join(findings, "; ")
	}
	rep.Evidence = s.evidence(l, prevRow)
	evJSON, _ := json.Marshal(rep.Evidence)
	var prevPID sql.NullInt64
	var prevHost, prevInc sql.NullString
	var prevBeat any
	if prevRow != nil {
		prevPID = sql.NullInt64{Int64: int64(prevRow.PID), Valid: true}
		prevHost = sql.NullString{String: prevRow.Host, Valid: true}
		prevInc = sql.NullString{String: prevRow.Incarnation, Valid: true}
		prevBeat = s.ts(prevRow.HeartbeatAt)
	}
	err = tx.QueryRowContext(ctx, s.dialect.rebind(openRun), l.Lane, l.Self.Incarnation, now, l.Method, string(evJSON),
		prevPID, prevHost, prevInc, prevBeat).Scan(&rep.RunID)
	if errors.Is(err, sql.ErrNoRows) {
		return errLockLost(l, "recovery")
	}
	if err != nil {
		return fmt.Errorf("open recovery run: %w", err)
	}
	if rep.Anomalies, err = s.recoveryAnomalies(ctx, tx, l.Lane); err != nil {
		return err
	}
	if rep.AttemptsClosed, err = s.exec(ctx, tx, closeAttempts, inkwell.ErrWorkerRestarted, now, rep.RunID, l.Lane); err != nil {
		return fmt.Errorf("close running attempts: %w", err)
	}
	if rep.AttemptsBackfilled, err = s.exec(ctx, tx, backfill, inkwell.ErrWorkerRestarted, now, rep.RunID, l.Lane); err != nil {
		return fmt.Errorf("back-fill legacy attempts: %w", err)
	}
	if rep.JobsFailed, err = s.exec(ctx, tx, failJobs, inkwell.ErrWorkerRestarted, now, rep.RunID); err != nil {
		return fmt.Errorf("fail running jobs: %w", err)
	}
	if rep.JobsFailed > 0 {
		if err := s.notifyEnded(ctx, tx, nil); err != nil { // the run does not name its jobs: waiters look
			return err
		}
	}
	if reason := deadHolderReason(l, prevRow, runLabel(rep)); reason != "" {
		n, err := s.exec(ctx, tx, stopPrevious, now, reason, l.Lane, prevRow.Incarnation)
		if err != nil {
			return fmt.Errorf("mark the dead holder's lanes row stopped: %w", err)
		}
		if n == 1 {
			rep.PreviousStopped = reason
		}
	}
	var anomalies any
	if len(rep.Anomalies) > 0 {
		anomalies = strings.Join(rep.Anomalies, "\n")
	}
	n, err := s.exec(ctx, tx, closeRun, rep.AttemptsClosed, rep.AttemptsBackfilled, rep.JobsFailed, anomalies, rep.RunID)
	if err != nil {
		return fmt.Errorf("close recovery run: %w", err)
	}
	if n != 1 {
		return errLockLost(l, "recovery")
	}
	return nil
}

// deadHolderReason is the stop_reason recovery writes on the lanes row of
// the incarnation whose lock it took, or "" when that row is not to be
// marked: there is none, it is stopped already, or it is this process's
// own; or its process is not proven gone. A flock proves the holder's
// process gone only with the process check (checkHolder: its pid gone,
// another process's now, or the host rebooted), never for a holder on
// another host or one recorded without its identity, whose orphans the
// flock alone lets recovery close, nor for this very process; PostgreSQL's
// advisory lock proves its session ended.
func deadHolderReason(l *LaneLock, row *LaneRow, run string) string {
	if row == nil || row.StoppedAt != nil || row.Incarnation == l.Self.Incarnation {
		return ""
	}
	switch {
	case l.RescuedBy != "":
		return fmt.Sprintf("session ended: lane %s took its lock and closed its orphans (%s)", l.RescuedBy, run)
	case l.Method != "flock":
		// The advisory lock proves the session ended, whatever its
		// process does now: a live one stops its lane (Lost), and at its
		// next heartbeat finds this row stopped.
		return fmt.Sprintf("session ended: %s took its lane lock (%s) and closed its orphans", run, l.Method)
	}
	if lv := checkHolder(row.holder()); lv.Known && !lv.Alive && !lv.Self {
		return fmt.Sprintf("dead: %s took its lane lock (flock) and found its process gone (%s)", run, lv.Why)
	}
	return "" // a flock proves nothing of a process it cannot see gone
}

// runLabel names a recovery run in a stop_reason: "recovery run N", or,
// in a dry run, whose id is rolled back with it, "this recovery run".
func runLabel(rep *RecoveryReport) string {
	if rep.DryRun {
		return "this recovery run"
	}
	return fmt.Sprintf("recovery run %d", rep.RunID)
}

func (s *Store) evidence(l *LaneLock, prev *LaneRow) Evidence {
	return Evidence{LockMethod: l.Method, LockPath: l.Path, Proof: l.hold.proof(l), Recoverer: l.Self, LockFile: l.Previous, LaneRow: prev,
		PreviousProcess: l.PreviousProcess, RescuedBy: l.RescuedBy}
}

// recoveryAnomalies finds, before any change, the rows of this lane that
// break the invariants. Recovery reports them and leaves them alone.
func (s *Store) recoveryAnomalies(ctx context.Context, tx *sql.Tx, lane string) ([]string, error) {
	// Both queries read only running rows through the partial indexes, and
	// must do so on a database that has no statistics yet (SQLite has none
	// until something analyzes it; PostgreSQL until autovacuum gets to it),
	// where a planner that knows nothing of the sizes picks plans that read
	// the whole history at every start (410 ms at 1 M jobs on SQLite, 2.4 s
	// on PostgreSQL). So they sort by +id, which no index provides (by id,
	// SQLite would rather walk jobs in id order than sort a few rows), and
	// "has an attempt" is a scalar subquery, one index probe per running
	// job (as EXISTS, PostgreSQL makes it a semi-join that reads every
	// attempt).
	const attemptNotRunningJob = `SELECT a.id, a.job_id, j.status FROM job_attempts a JOIN jobs j ON j.id = a.job_id
		WHERE a.status = 'running' AND a.lane = $1 AND j.status <> 'running' ORDER BY +a.id`
	const runningJobNoRunningAttempt = `SELECT j.id FROM jobs j
		WHERE j.status = 'running' AND (j.lane = $1 OR j.lane IS NULL)
		  AND (SELECT a.id FROM job_attempts a WHERE a.job_id = j.id LIMIT 1) IS NOT NULL
		  AND NOT EXISTS (SELECT 1 FROM job_attempts a WHERE a.job_id = j.id AND a.status = 'running' AND a.lane = $1)
		ORDER BY +j.id`
	var out []string
	rows, err := tx.QueryContext(ctx, s.dialect.rebind(attemptNotRunningJob), lane)
	if err != nil {
		return nil, fmt.Errorf("recovery anomalies: %w", err)
	}
	for rows.Next() {
		var aid, jid int64
		var st string
		if err := rows.Scan(&aid, &jid, &st); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, fmt.Sprintf("attempt %d is running but its job %d is %s; left unchanged", aid, jid, st))
	}
	rows.Close()
	rows, err = tx.QueryContext(ctx, s.dialect.rebind(runningJobNoRunningAttempt), lane)
	if err != nil {
		return nil, fmt.Errorf("recovery anomalies: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var jid int64
		if err := rows.Scan(&jid); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("job %d is running on this lane but has no running attempt here; left unchanged", jid))
	}
	return out, rows.Err()
}
