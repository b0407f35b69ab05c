package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/inkwell/inkwell"
)

// Reads of jobs and their attempts, results and charges: on the read pool,
// or (jobTx, jobByKeyTx) inside a transition's own transaction. Nothing
// here writes. Reads of lanes are in lanes_read.go, of recovery runs in
// recovery_runs_read.go, of the operator views in overview.go.

const jobColumns = `id, idempotency_key, request_hash, payload, status, error, error_class, lane, created_at, started_at, finished_at,
	not_before, gave_up_after, pruned_at, account`

// insertedJobColumns is jobColumns for a row an accept has just written:
// its payload is the accepting caller's own bytes, bound as they are, so
// it is not read back (an empty string in its place, where the caller
// puts its bytes): read back, a 2 KiB chat request cost two more copies
// of it per accept.
var insertedJobColumns = strings.Replace(jobColumns, "payload,", "'' AS payload,", 1)

type rowScanner interface{ Scan(dest ...any) error }

// queryAll runs query on the read pool and scans every row it returns.
// Errors name what was being read, and are classified as every read's are.
func queryAll[T any](ctx context.Context, s *Store, what string, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.classify(fmt.Errorf("%s: %w", what, err))
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	return out, s.classify(rows.Err())
}

func scanJob(row rowScanner) (inkwell.Job, error) {
	var j inkwell.Job
	var payload string
	var errText, class, lane sql.NullString
	var created, started, finished, notBefore, pruned nullTime
	var gaveUp sql.NullInt64
	if err := row.Scan(&j.ID, &j.IdempotencyKey, &j.RequestHash, &payload, &j.Status, &errText, &class, &lane,
		&created, &started, &finished, &notBefore, &gaveUp, &pruned, &j.Account); err != nil {
		return j, err
	}
	j.Payload = json.RawMessage(payload)
	j.Error, j.ErrorClass, j.Lane = errText.String, inkwell.ErrorClass(class.String), lane.String
	j.CreatedAt = created.Time
	j.StartedAt, j.FinishedAt = started.Ptr(), finished.Ptr()
	j.NotBefore, j.PrunedAt, j.GaveUpAfter = notBefore.Ptr(), pruned.Ptr(), int(gaveUp.Int64)
	return j, nil
}

func (s *Store) jobTx(ctx context.Context, tx *sql.Tx, id int64) (inkwell.Job, error) {
	j, err := scanJob(s.txQueryRow(ctx, tx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1`, id))
	return j, notFound(err, "job %d", id)
}

// jobByKeyTx is the job stored under key by account: keys are unique per
// account (migration 0008).
func (s *Store) jobByKeyTx(ctx context.Context, tx *sql.Tx, account, key string) (inkwell.Job, error) {
	j, err := scanJob(s.txQueryRow(ctx, tx, `SELECT `+jobColumns+` FROM jobs WHERE account = $1 AND idempotency_key = $2`, account, key))
	return j, notFound(err, "job with key %q of account %q", key, account)
}

// Job returns one job row.
func (s *Store) Job(ctx context.Context, id int64) (inkwell.Job, error) {
	return s.job(ctx, s.rdb, id)
}

// queryer is what reads need: the read pool or a read transaction.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) job(ctx context.Context, q queryer, id int64) (inkwell.Job, error) {
	j, err := scanJob(q.QueryRowContext(ctx, s.dialect.rebind(`SELECT `+jobColumns+` FROM jobs WHERE id = $1`), id))
	return j, notFound(err, "job %d", id)
}

// Show returns one job with its attempts (in order), result and charge.
func (s *Store) Show(ctx context.Context, id int64) (inkwell.JobDetail, error) {
	// One read transaction, so the four reads agree: never a running job
	// with a result, or a done attempt under a running job.
	tx, err := s.rdb.BeginTx(ctx, s.dialect.snapshot)
	if err != nil {
		return inkwell.JobDetail{}, s.classify(fmt.Errorf("show job %d: %w", id, err))
	}
	defer tx.Rollback()
	var d inkwell.JobDetail
	if d.Job, err = s.job(ctx, tx, id); err != nil {
		return d, err
	}
	if d.Attempts, err = s.attempts(ctx, tx, id); err != nil {
		return d, err
	}
	if d.Result, err = s.result(ctx, tx, id); err != nil {
		return d, err
	}
	d.Charge, err = s.charge(ctx, tx, id)
	return d, err
}

// Attempts returns a job's attempts by attempt_number.
func (s *Store) Attempts(ctx context.Context, jobID int64) ([]inkwell.Attempt, error) {
	return s.attempts(ctx, s.rdb, jobID)
}

// RetryCounts is what automatic retry counts of a job's finished
// attempts since its last retry by hand: all of them, and those answered
// 429 (class rate_limited); an attempt given back unsent (held_back) is
// neither.
type RetryCounts struct{ Attempts, RateLimited int }

// AutoRetryCounts counts a job's finished attempts that finished after its
// last retry by hand (audit_log's retry rows): a retry by hand gives the
// job its automatic retries again. Finished, not started: a claim's
// started_at is read before it waits for the write lock, so it may fall
// before the retry that queued the job; but every attempt before a retry
// had its failure committed before the retry read the job as failed (so
// before its at, read inside its transaction), and every attempt after it
// fails after a claim that waited for the retry's commit, all on the
// store's one clock. A job retried before audit_log existed (migration
// 0008) counts every attempt.
func (s *Store) AutoRetryCounts(ctx context.Context, jobID int64) (RetryCounts, error) {
	const query = `SELECT COUNT(*), COALESCE(SUM(CASE WHEN a.error_class = 'rate_limited' THEN 1 ELSE 0 END), 0)
		FROM job_attempts a
		WHERE a.job_id = $1 AND a.status <> 'running' AND a.held_back IS NOT TRUE
		  AND NOT EXISTS (SELECT 1 FROM audit_log r WHERE r.job_id = a.job_id AND r.action = 'retry' AND r.at >= a.finished_at)`
	var c RetryCounts
	if err := s.rdb.QueryRowContext(ctx, s.dialect.rebind(query), jobID).Scan(&c.Attempts, &c.RateLimited); err != nil {
		return c, s.classify(fmt.Errorf("count the attempts of job %d since its last retry by hand: %w", jobID, err))
	}
	return c, nil
}

func (s *Store) attempts(ctx context.Context, q queryer, jobID int64) ([]inkwell.Attempt, error) {
	const query = `SELECT id, job_id, attempt_number, status, error, error_class, lane, started_at, finished_at, recovery_run_id
		FROM job_attempts WHERE job_id = $1 ORDER BY attempt_number`
	rows, err := q.QueryContext(ctx, s.dialect.rebind(query), jobID)
	if err != nil {
		return nil, s.classify(fmt.Errorf("attempts of job %d: %w", jobID, err))
	}
	defer rows.Close()
	attempts := []inkwell.Attempt{}
	for rows.Next() {
		var a inkwell.Attempt
		var errText, class, lane sql.NullString
		var started, finished nullTime
		var run sql.NullInt64
		if err := rows.Scan(&a.ID, &a.JobID, &a.AttemptNumber, &a.Status, &errText, &class, &lane, &started, &finished, &run); err != nil {
			return nil, err
		}
		a.Error, a.ErrorClass, a.Lane = errText.String, inkwell.ErrorClass(class.String), lane.String
		a.StartedAt, a.FinishedAt = started.Ptr(), finished.Ptr()
		if run.Valid {
			a.RecoveryRunID = &run.Int64
		}
		attempts = append(attempts, a)
	}
	return attempts, rows.Err()
}

func (s *Store) result(ctx context.Context, q queryer, jobID int64) (*inkwell.Result, error) {
	const query = `SELECT job_id, attempt_id, text, created_at, response, model, finish_reason, prompt_tokens, completion_tokens
		FROM results WHERE job_id = $1`
	var r inkwell.Result
	var created nullTime
	var response, model, finish sql.NullString
	var in, out sql.NullInt64
	err := q.QueryRowContext(ctx, s.dialect.rebind(query), jobID).Scan(&r.JobID, &r.AttemptID, &r.Text, &created, &response, &model, &finish, &in, &out)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	r.CreatedAt = created.Time
	if response.Valid {
		r.Response = json.RawMessage(response.String)
	}
	r.Model, r.FinishReason = model.String, finish.String
	r.PromptTokens, r.CompletionTokens = int64Ptr(in), int64Ptr(out)
	return &r, err
}

func (s *Store) charge(ctx context.Context, q queryer, jobID int64) (*inkwell.Charge, error) {
	const query = `SELECT job_id, attempt_id, account, amount_micros, provider_request_id, created_at, model, prompt_tokens, completion_tokens
		FROM charges WHERE job_id = $1`
	var c inkwell.Charge
	var created nullTime
	var model sql.NullString
	var in, out sql.NullInt64
	err := q.QueryRowContext(ctx, s.dialect.rebind(query), jobID).Scan(&c.JobID, &c.AttemptID, &c.Account, &c.AmountMicros, &c.ProviderRequestID, &created, &model, &in, &out)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	c.CreatedAt = created.Time
	c.Model, c.PromptTokens, c.CompletionTokens = model.String, int64Ptr(in), int64Ptr(out)
	return &c, err
}

// int64Ptr is a nullable integer column as a pointer (nil for NULL).
func int64Ptr(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	return &n.Int64
}

// notFound translates sql.ErrNoRows into ENOTFOUND naming what was looked for.
func notFound(err error, format string, args ...any) error {
	if errors.Is(err, sql.ErrNoRows) {
		return inkwell.Errorf(inkwell.ENOTFOUND, format+" not found", args...)
	}
	return err
}
