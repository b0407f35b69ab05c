package drill

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/store"
)

// Kind says when a snapshot was taken, which decides what it must show.
type Kind string

const (
	// KindCrash: serve has just died (SIGKILL); nothing runs.
	KindCrash Kind = "crash"
	// KindRecovered: a restarted serve has finished startup recovery and
	// is ready (its lane may already be claiming).
	KindRecovered Kind = "recovered"
	// KindQuiet: serve was stopped gracefully in the middle of a scenario.
	KindQuiet Kind = "quiet"
	// KindFinal: the end: every client is done and serve stopped gracefully.
	KindFinal Kind = "final"
)

// Snapshot is what the database (and the provider's ledger) said at one
// instant, read through SQL. Times are kept as the text the driver gave,
// because they are only compared for equality and presence.
type Snapshot struct {
	Label    string // "after crash at claim.after-commit:1", ...
	Kind     Kind
	Jobs     []JobRow
	Attempts []AttemptRow
	Results  []ResultRow
	Charges  []ChargeRow
	Runs     []RecoveryRunRow
	Lanes    []LaneRow
	// Integrity lists what the database's own checks reported; empty is ok.
	Integrity []string
	// Ledger is every entry of every provider simulator the drill runs.
	Ledger []providersim.LedgerEntry
	// Installation makes the provider keys of this database's jobs.
	Installation inkwell.Installation
	// Accounts and Reservations are the budgets' books (check_budget.go),
	// read from schema version 9 on; empty before.
	Accounts     []AccountRow
	Reservations []ReservationRow
	// Deliveries and WebhookAccounts are the webhook rows (webhooks.go).
	Deliveries      []DeliveryRow
	WebhookAccounts []WebhookAccountRow
}

// JobRow is one row of jobs.
type JobRow struct {
	ID                              int64
	Key, RequestHash, Payload       string
	Status                          string
	Error, Lane                     sql.NullString
	CreatedAt, StartedAt, Finished  sql.NullString
	ErrorClass, NotBefore, PrunedAt sql.NullString
	GaveUpAfter                     sql.NullInt64
}

// AttemptRow is one row of job_attempts.
type AttemptRow struct {
	ID, JobID     int64
	Number        int
	Status        string
	Error, Lane   sql.NullString
	ErrorClass    sql.NullString
	StartedAt     sql.NullString
	FinishedAt    sql.NullString
	RecoveryRunID sql.NullInt64
}

// ResultRow is one row of results.
type ResultRow struct {
	JobID, AttemptID int64
	Text             string
}

// ChargeRow is one row of charges. Model and the token counts are the
// answer's (migration 0016): NULL for an answer without usage.
type ChargeRow struct {
	JobID, AttemptID               int64
	Account                        string
	AmountMicros                   int64
	ProviderRequestID              string
	Model                          sql.NullString
	PromptTokens, CompletionTokens sql.NullInt64
}

// RecoveryRunRow is one row of recovery_runs.
type RecoveryRunRow struct {
	ID                                         int64
	Lane, Incarnation, LockMethod, Evidence    string
	PrevPID                                    sql.NullInt64
	AttemptsClosed, AttemptsBackfilled, Failed int64
	Anomalies                                  sql.NullString
}

// LaneRow is one row of lanes.
type LaneRow struct {
	Name, Incarnation string
	PID               int64
	StoppedAt         sql.NullString
	StopReason        sql.NullString
}

// Inspect reads every row Inkwell keeps in the database at dsn, in one
// read transaction so the tables agree with each other, and runs the
// database's own integrity checks. It writes nothing.
func Inspect(ctx context.Context, dsn string) (Snapshot, error) {
	st, err := store.Open(ctx, dsn, store.Options{NoMigrate: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return Snapshot{}, fmt.Errorf("inspect: %w", err)
	}
	defer st.Close()
	tx, err := st.BeginSnapshot(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("inspect: begin: %w", err)
	}
	defer tx.Rollback()
	var s Snapshot
	for _, read := range []func(context.Context, *sql.Tx, *Snapshot) error{
		readJobs, readAttempts, readResults, readCharges, readRuns, readLanes, readBudgets, readDeliveries,
	} {
		if err := read(ctx, tx, &s); err != nil {
			return Snapshot{}, fmt.Errorf("inspect: %w", err)
		}
	}
	if s.Integrity, err = st.Integrity(ctx, tx); err != nil {
		return Snapshot{}, fmt.Errorf("inspect: %w", err)
	}
	s.Integrity = append(s.Integrity, keptCountProblems(ctx, tx)...) // check_counts.go
	if s.Installation, err = st.Installation(ctx); err != nil {
		return Snapshot{}, fmt.Errorf("inspect: %w", err)
	}
	return s, nil
}

// The queries take no parameters, so one text serves both dialects.
const (
	qJobs = `SELECT id, idempotency_key, request_hash, payload, status, error, lane, created_at, started_at, finished_at,
			error_class, not_before, pruned_at, gave_up_after
		FROM jobs ORDER BY id`
	qAttempts = `SELECT id, job_id, attempt_number, status, error, lane, started_at, finished_at, recovery_run_id, error_class
		FROM job_attempts ORDER BY job_id, attempt_number, id`
	qResults = `SELECT job_id, attempt_id, text FROM results ORDER BY job_id`
	qCharges = `SELECT job_id, attempt_id, account, amount_micros, provider_request_id, model, prompt_tokens, completion_tokens
		FROM charges ORDER BY job_id`
	qRuns = `SELECT id, lane, incarnation, lock_method, evidence, prev_pid, attempts_closed, attempts_backfilled, jobs_failed, anomalies
		FROM recovery_runs ORDER BY id`
	qLanes = `SELECT name, incarnation, pid, stopped_at, stop_reason FROM lanes ORDER BY name`
)

func readJobs(ctx context.Context, tx *sql.Tx, s *Snapshot) error {
	return each(ctx, tx, qJobs, func(rows *sql.Rows) error {
		var j JobRow
		err := rows.Scan(&j.ID, &j.Key, &j.RequestHash, &j.Payload, &j.Status, &j.Error, &j.Lane, &j.CreatedAt, &j.StartedAt, &j.Finished,
			&j.ErrorClass, &j.NotBefore, &j.PrunedAt, &j.GaveUpAfter)
		s.Jobs = append(s.Jobs, j)
		return err
	})
}

func readAttempts(ctx context.Context, tx *sql.Tx, s *Snapshot) error {
	return each(ctx, tx, qAttempts, func(rows *sql.Rows) error {
		var a AttemptRow
		err := rows.Scan(&a.ID, &a.JobID, &a.Number, &a.Status, &a.Error, &a.Lane, &a.StartedAt, &a.FinishedAt, &a.RecoveryRunID, &a.ErrorClass)
		s.Attempts = append(s.Attempts, a)
		return err
	})
}

func readResults(ctx context.Context, tx *sql.Tx, s *Snapshot) error {
	return each(ctx, tx, qResults, func(rows *sql.Rows) error {
		var r ResultRow
		err := rows.Scan(&r.JobID, &r.AttemptID, &r.Text)
		s.Results = append(s.Results, r)
		return err
	})
}

func readCharges(ctx context.Context, tx *sql.Tx, s *Snapshot) error {
	return each(ctx, tx, qCharges, func(rows *sql.Rows) error {
		var c ChargeRow
		err := rows.Scan(&c.JobID, &c.AttemptID, &c.Account, &c.AmountMicros, &c.ProviderRequestID, &c.Model, &c.PromptTokens, &c.CompletionTokens)
		s.Charges = append(s.Charges, c)
		return err
	})
}

func readRuns(ctx context.Context, tx *sql.Tx, s *Snapshot) error {
	return each(ctx, tx, qRuns, func(rows *sql.Rows) error {
		var r RecoveryRunRow
		err := rows.Scan(&r.ID, &r.Lane, &r.Incarnation, &r.LockMethod, &r.Evidence, &r.PrevPID,
			&r.AttemptsClosed, &r.AttemptsBackfilled, &r.Failed, &r.Anomalies)
		s.Runs = append(s.Runs, r)
		return err
	})
}

func readLanes(ctx context.Context, tx *sql.Tx, s *Snapshot) error {
	return each(ctx, tx, qLanes, func(rows *sql.Rows) error {
		var l LaneRow
		err := rows.Scan(&l.Name, &l.Incarnation, &l.PID, &l.StoppedAt, &l.StopReason)
		s.Lanes = append(s.Lanes, l)
		return err
	})
}

func each(ctx context.Context, tx *sql.Tx, query string, scan func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("%.40s...: %w", query, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("%.40s...: %w", query, err)
		}
	}
	return rows.Err()
}
