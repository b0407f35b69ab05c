package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/inkwell/inkwell"
)

// Reads of batches and their jobs, on the read pool. Nothing here writes.

// BatchStatus is a batch with how many of its jobs are in each status.
type BatchStatus struct {
	Batch
	Counts map[string]int64 // every job status, 0 when none
	// LastEndedAt is when its last job to end ended (nil: none has).
	LastEndedAt *time.Time
}

// Unended is how many of its jobs are queued or running.
func (st BatchStatus) Unended() int64 {
	return st.Counts[inkwell.StatusQueued] + st.Counts[inkwell.StatusRunning]
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
		return BatchStatus{}, s.classify(notFound(err, "batch %d", id))
	}
	sts, err := s.batchCounts(ctx, tx, []Batch{b})
	if err != nil {
		return BatchStatus{}, err
	}
	return sts[0], nil
}

// BatchPage is a page of BatchList.
type BatchPage struct {
	Batches []BatchStatus // newest first
	HasMore bool          // older batches follow the last one
}

// BatchList returns at most limit batches older than before (0: the
// newest), newest first, of account ("": every account's), each counted as
// BatchStatusOf counts it, from one consistent read.
func (s *Store) BatchList(ctx context.Context, account string, before int64, limit int) (BatchPage, error) {
	tx, err := s.rdb.BeginTx(ctx, s.dialect.snapshot)
	if err != nil {
		return BatchPage{}, s.classify(fmt.Errorf("list batches: %w", err))
	}
	defer tx.Rollback()
	if before <= 0 {
		before = math.MaxInt64
	}
	q := `SELECT ` + batchColumns + ` FROM batches WHERE id < $1 AND ($2 = '' OR account = $2) ORDER BY id DESC LIMIT $3`
	rows, err := tx.QueryContext(ctx, s.dialect.rebind(q), before, account, limit+1)
	if err != nil {
		return BatchPage{}, s.classify(fmt.Errorf("list batches: %w", err))
	}
	var bs []Batch
	for rows.Next() {
		b, err := scanBatch(rows)
		if err != nil {
			rows.Close()
			return BatchPage{}, fmt.Errorf("list batches: %w", err)
		}
		bs = append(bs, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return BatchPage{}, s.classify(fmt.Errorf("list batches: %w", err))
	}
	page := BatchPage{HasMore: len(bs) > limit, Batches: []BatchStatus{}}
	if page.HasMore {
		bs = bs[:limit]
	}
	if len(bs) > 0 {
		page.Batches, err = s.batchCounts(ctx, tx, bs)
	}
	return page, err
}

// batchCounts counts the jobs of bs by status in one query, and finds
// when each batch's last ended job ended.
func (s *Store) batchCounts(ctx context.Context, tx *sql.Tx, bs []Batch) ([]BatchStatus, error) {
	out := make([]BatchStatus, len(bs))
	at := map[int64]int{}
	ids := make([]int64, len(bs))
	for i, b := range bs {
		out[i] = BatchStatus{Batch: b, Counts: map[string]int64{}}
		for _, status := range inkwell.JobStatuses {
			out[i].Counts[status] = 0
		}
		at[b.ID], ids[i] = i, b.ID
	}
	// The ids are the store's own integers; the query runs once per list.
	q := `SELECT batch_id, status, COUNT(*), MAX(finished_at) FROM jobs WHERE batch_id IN (` + jobIDList(ids) + `) GROUP BY batch_id, status`
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return nil, s.classify(fmt.Errorf("count jobs of batches: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var id, n int64
		var status string
		var last nullTime
		if err := rows.Scan(&id, &status, &n, &last); err != nil {
			return nil, fmt.Errorf("count jobs of batches: %w", err)
		}
		st := &out[at[id]]
		st.Counts[status] = n
		ended := status == inkwell.StatusDone || status == inkwell.StatusFailed
		if ended && last.Valid && (st.LastEndedAt == nil || last.Time.After(*st.LastEndedAt)) {
			st.LastEndedAt = last.Ptr()
		}
	}
	return out, rows.Err()
}

// BatchJob is one ended job of a batch, with its line's custom_id and
// (when done) its result, the provider's whole answer in it, and charge.
type BatchJob struct {
	CustomID string
	Job      inkwell.Job
	Result   *inkwell.Result
	Charge   *inkwell.Charge
}

// BatchEnded calls fn for each job of batch id whose status is status
// (done or failed), in job id order (which is line order), from one
// consistent read. It stops at fn's first error and returns it. The batch
// must exist (ENOTFOUND).
func (s *Store) BatchEnded(ctx context.Context, id int64, status string, fn func(BatchJob) error) error {
	if status != inkwell.StatusDone && status != inkwell.StatusFailed {
		return inkwell.Errorf(inkwell.EINVALID, "a batch's ended jobs are done or failed, not %q", status)
	}
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
		WHERE jobs.batch_id = $1 AND jobs.status = $2
		ORDER BY jobs.id`
	rows, err := tx.QueryContext(ctx, s.dialect.rebind(q), id, status)
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
	results.response, results.model, results.finish_reason, results.prompt_tokens, results.completion_tokens,
	charges.attempt_id, charges.account, charges.amount_micros, charges.provider_request_id, charges.created_at`

func scanBatchJob(row rowScanner) (BatchJob, error) {
	var bj BatchJob
	var custom sql.NullString
	var resAttempt, chAttempt, amount, in, out sql.NullInt64
	var text, response, model, finish, account, providerID sql.NullString
	var resAt, chAt nullTime
	job, err := scanJob(withExtra{row: row, extra: []any{&custom, &resAttempt, &text, &resAt, &response, &model, &finish, &in, &out,
		&chAttempt, &account, &amount, &providerID, &chAt}})
	if err != nil {
		return bj, err
	}
	bj.CustomID, bj.Job = custom.String, job
	if resAttempt.Valid {
		bj.Result = &inkwell.Result{JobID: job.ID, AttemptID: resAttempt.Int64, Text: text.String, CreatedAt: resAt.Time,
			Model: model.String, FinishReason: finish.String, PromptTokens: int64Ptr(in), CompletionTokens: int64Ptr(out)}
		if response.Valid {
			bj.Result.Response = json.RawMessage(response.String)
		}
	}
	if chAttempt.Valid {
		bj.Charge = &inkwell.Charge{JobID: job.ID, AttemptID: chAttempt.Int64, Account: account.String, AmountMicros: amount.Int64,
			ProviderRequestID: providerID.String, CreatedAt: chAt.Time}
	}
	return bj, nil
}
