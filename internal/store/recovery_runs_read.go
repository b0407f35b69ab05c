package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Reads of the recovery_runs table, in one place. Recovery itself, the only
// writer, is in recover.go (and rescue.go).

// RecoveryRun is one row of recovery_runs. (The HTTP API's form of it is
// api.RecoveryRun.)
type RecoveryRun struct {
	ID                 int64
	Lane               string
	StartedAt          time.Time
	LockMethod         string
	Evidence           string // JSON: Evidence
	AttemptsClosed     int64
	AttemptsBackfilled int64
	JobsFailed         int64
	Anomalies          string
}

// RecoveryRunByID returns one recovery run.
func (s *Store) RecoveryRunByID(ctx context.Context, id int64) (RecoveryRun, error) {
	const q = `SELECT id, lane, started_at, lock_method, evidence, attempts_closed, attempts_backfilled, jobs_failed, anomalies
		FROM recovery_runs WHERE id = $1`
	var r RecoveryRun
	var started nullTime
	var anomalies sql.NullString
	err := s.rdb.QueryRowContext(ctx, s.dialect.rebind(q), id).Scan(&r.ID, &r.Lane, &started, &r.LockMethod, &r.Evidence,
		&r.AttemptsClosed, &r.AttemptsBackfilled, &r.JobsFailed, &anomalies)
	r.StartedAt, r.Anomalies = started.Time, anomalies.String
	return r, notFound(err, "recovery run %d", id)
}

// LastRecoveryRun returns the most recent recovery run of any lane, or nil
// when none has run.
func (s *Store) LastRecoveryRun(ctx context.Context) (*RecoveryRun, error) {
	var id int64
	err := s.rdb.QueryRowContext(ctx, `SELECT id FROM recovery_runs ORDER BY id DESC LIMIT 1`).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.classify(fmt.Errorf("last recovery run: %w", err))
	}
	r, err := s.RecoveryRunByID(ctx, id)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// RecoveredAttempt is an attempt a recovery run closed (or back-filled).
type RecoveredAttempt struct {
	JobID         int64
	AttemptID     int64
	AttemptNumber int
	Lane          string
}

// RecoveredAttempts returns the attempts recovery run runID closed or
// back-filled, by job id: the rows that run changed, one per job.
func (s *Store) RecoveredAttempts(ctx context.Context, runID int64) ([]RecoveredAttempt, error) {
	const q = `SELECT job_id, id, attempt_number, lane FROM job_attempts WHERE recovery_run_id = $1 ORDER BY job_id`
	rows, err := s.rdb.QueryContext(ctx, s.dialect.rebind(q), runID)
	if err != nil {
		return nil, s.classify(fmt.Errorf("jobs of recovery run %d: %w", runID, err))
	}
	defer rows.Close()
	var out []RecoveredAttempt
	for rows.Next() {
		var a RecoveredAttempt
		var lane sql.NullString
		if err := rows.Scan(&a.JobID, &a.AttemptID, &a.AttemptNumber, &lane); err != nil {
			return nil, fmt.Errorf("jobs of recovery run %d: %w", runID, err)
		}
		a.Lane = lane.String
		out = append(out, a)
	}
	return out, rows.Err()
}
