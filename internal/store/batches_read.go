package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/inkwell/inkwell"
)

// Reads of batches and their jobs, on the read pool. Nothing here writes.

// BatchStatus is a batch with how many of its jobs are in each status.
type BatchStatus struct {
	Batch
	Counts map[string]int64 // every job status, 0 when none
}

// BatchStatusOf returns batch id with its jobs counted by status, from one
// consistent read.
func (s *Store) BatchStatusOf(ctx context.Context, id int64) (BatchStatus, error) {
	tx, err := s.rdb.BeginTx(ctx, s.dialect.snapshot)
	if err != nil {
		return BatchStatus{}, s.classify(fmt.Errorf("batch %d: %w", id, err))
	}
	defer tx.Rollback()
	b, err := scanBatch(tx.QueryRowContext(ctx, s.dialect.rebind(`SELECT `+batchColumns+` FROM batches WHERE id = $1`), id))
	if err != nil {
		return BatchStatus{}, notFound(err, "batch %d", id)
	}
	st := BatchStatus{Batch: b, Counts: map[string]int64{}}
	for _, status := range inkwell.JobStatuses {
		st.Counts[status] = 0
	}
	rows, err := tx.QueryContext(ctx, s.dialect.rebind(`SELECT status, COUNT(*) FROM jobs WHERE batch_id = $1 GROUP BY status`), id)
	if err != nil {
		return BatchStatus{}, s.classify(fmt.Errorf("count jobs of batch %d: %w", id, err))
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			return BatchStatus{}, err
		}
		st.Counts[status] = n
	}
	return st, rows.Err()
}

// BatchJob is one ended job of a batch, with its line's custom_id and
// (when done) its result and charge.
type BatchJob struct {
	CustomID string
	Job      inkwell.Job
	Result   *inkwell.Result
	Charge   *inkwell.Charge
}

// BatchEnded calls fn for each job of batch id that is done or failed, in
// job id order (which is line order), from one consistent read. It stops
// at fn's first error and returns it. The batch must exist (ENOTFOUND).
func (s *Store) BatchEnded(ctx context.Context, id int64, fn func(BatchJob) error) error {
	tx, err := s.rdb.BeginTx(ctx, s.dialect.snapshot)
	if err != nil {
		return s.classify(fmt.Errorf("batch %d output: %w", id, err))
	}
	defer tx.Rollback()
	var one int
	if err := tx.QueryRowContext(ctx, s.dialect.rebind(`SELECT 1 FROM batches WHERE id = $1`), id).Scan(&one); err != nil {
		return notFound(err, "batch %d", id)
	}
	q := `SELECT ` + batchJobColumns + `
		FROM jobs
		LEFT JOIN results ON results.job_id = jobs.id
		LEFT JOIN charges ON charges.job_id = jobs.id
		WHERE jobs.batch_id = $1 AND jobs.status IN ('done', 'failed')
		ORDER BY jobs.id`
	rows, err := tx.QueryContext(ctx, s.dialect.rebind(q), id)
	if err != nil {
		return s.classify(fmt.Errorf("batch %d output: %w", id, err))
	}
	defer rows.Close()
	for rows.Next() {
		bj, err := scanBatchJob(rows)
		if err != nil {
			return fmt.Errorf("batch %d output: %w", id, err)
		}
		if err := fn(bj); err != nil {
			return err
		}
	}
	return rows.Err()
}

var batchJobColumns = qualified("jobs", jobColumns) + `, jobs.batch_custom_id,
	results.attempt_id, results.text, results.created_at,
	charges.attempt_id, charges.account, charges.amount_micros, charges.provider_request_id, charges.created_at`

func scanBatchJob(row rowScanner) (BatchJob, error) {
	var bj BatchJob
	var custom sql.NullString
	var resAttempt, chAttempt, amount sql.NullInt64
	var text, account, providerID sql.NullString
	var resAt, chAt nullTime
	job, err := scanJob(withExtra{row: row, extra: []any{&custom, &resAttempt, &text, &resAt, &chAttempt, &account, &amount, &providerID, &chAt}})
	if err != nil {
		return bj, err
	}
	bj.CustomID, bj.Job = custom.String, job
	if resAttempt.Valid {
		bj.Result = &inkwell.Result{JobID: job.ID, AttemptID: resAttempt.Int64, Text: text.String, CreatedAt: resAt.Time}
	}
	if chAttempt.Valid {
		bj.Charge = &inkwell.Charge{JobID: job.ID, AttemptID: chAttempt.Int64, Account: account.String, AmountMicros: amount.Int64,
			ProviderRequestID: providerID.String, CreatedAt: chAt.Time}
	}
	return bj, nil
}
