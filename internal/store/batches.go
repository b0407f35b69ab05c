package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
)

// Batches (docs/batches.md): accept many jobs at once, one per line, in one
// transaction. This file holds the batch's writes (accept, cancel);
// batches_read.go its reads. A batch's jobs are ordinary jobs (queued, claimed, run and ended
// by the lane as any other); they carry batch_id and batch_custom_id.

// BatchLine is one validated, normalized line of a batch: a job request
// as POST /v1/jobs would store it, and the line's custom_id.
type BatchLine struct {
	CustomID    string
	RequestHash string
	Payload     []byte // normalized request JSON
	// ReserveMicros is the line's worst-case cost (AcceptParams'), reserved
	// against the account's budget with the rest of the batch.
	ReserveMicros int64
}

// BatchParams is one validated batch, every line checked.
type BatchParams struct {
	Account        string // who pays for every line (api.decideAccount)
	IdempotencyKey string // the batch key
	RequestHash    string // BatchHash of the lines
	Lines          []BatchLine
	// MaxQueued is admission for the batch as a whole: when the queued
	// jobs and the batch's lines together would be more than this, the
	// batch is refused (ETOOMANY) and nothing is written; a re-send of a
	// stored batch is answered as always. 0: no limit.
	MaxQueued int
	// Refuse, when set, refuses a new batch with this error and writes
	// nothing (the account's rpm: api.admit); a re-send of a stored batch
	// is still answered, as AcceptParams.Refuse does for one job.
	Refuse error
	// The OpenAI form's (docs/batches.md): the file the lines came from,
	// the url every line names, "24h", and the metadata as JSON (nil:
	// none). Empty for the JSONL form, but Endpoint when its lines agree.
	InputFileID, Endpoint, CompletionWindow string
	Metadata                                []byte
}

// Batch is one row of batches.
type Batch struct {
	ID             int64
	Account        string
	IdempotencyKey string
	RequestHash    string
	Lines          int
	CreatedAt      time.Time
	// The OpenAI form's, as BatchParams has them ("" and nil when not).
	InputFileID, Endpoint, CompletionWindow string
	Metadata                                []byte
	// CancellingAt is when a cancel was first asked, CancelledAt when a
	// cancel had ended every job of the batch (CancelBatch).
	CancellingAt, CancelledAt *time.Time
}

// BatchJobKey is the idempotency key of a batch line's job: the batch's
// id, which stands for (account, batch key), and the line's custom_id.
// It is the one place that derives it. The spaces make it a key no
// Idempotency-Key header can carry (printable ASCII without spaces), so a
// job sent alone never takes a batch line's key, and the digits of the id
// end at the first space, so two (batch, custom_id) pairs never share one.
func BatchJobKey(batchID int64, customID string) string {
	return "batch " + strconv.FormatInt(batchID, 10) + " " + customID
}

// BatchHash is the fingerprint of a batch: every line's custom_id and
// request hash, in order, each length-prefixed so that no two batches
// share one by moving bytes between fields.
func BatchHash(lines []BatchLine) string {
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%d:%s%d:%s", len(l.CustomID), l.CustomID, len(l.RequestHash), l.RequestHash)
	}
	return inkwell.RequestHash([]byte(b.String()))
}

// AcceptBatch stores a new batch and one queued job per line, in one
// transaction, or returns the batch already stored under the same
// (account, key). created is false for a re-send. A re-send with other
// lines is refused with EKEYREUSED; a batch the queue has no room for
// with ETOOMANY; a batch whose lines' worst cases together pass the
// account's budget with EBUDGET (the batch is reserved whole or not at
// all, as Accept reserves one job: budgets.go); a line whose job key is
// taken (a legacy row) with EKEYREUSED; a new batch when p.Refuse is set
// with that error. Every refusal writes nothing.
func (s *Store) AcceptBatch(ctx context.Context, p BatchParams) (b Batch, created bool, err error) {
	if len(p.Lines) == 0 {
		return Batch{}, false, inkwell.Errorf(inkwell.EINVALID, "a batch needs at least one line")
	}
	if err := s.refuseWhileLost(); err != nil {
		return Batch{}, false, err
	}
	now := s.now()
	err = s.inTxHooks(ctx, func(tx *sql.Tx) error {
		b, created, err = s.acceptBatchTx(ctx, tx, p, now)
		return err
	}, crashpoint.AcceptBeforeCommit, crashpoint.AcceptAfterCommit)
	if err != nil {
		return Batch{}, false, err
	}
	return b, created, nil
}

func (s *Store) acceptBatchTx(ctx context.Context, tx *sql.Tx, p BatchParams, now time.Time) (Batch, bool, error) {
	const insert = `INSERT INTO batches (account, idempotency_key, request_hash, lines, created_at, input_file_id, endpoint, completion_window, metadata)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (account, idempotency_key) DO NOTHING
		RETURNING ` + batchColumns
	b, err := scanBatch(s.txQueryRow(ctx, tx, insert, p.Account, p.IdempotencyKey, p.RequestHash, len(p.Lines), s.ts(now),
		nullString(p.InputFileID), nullString(p.Endpoint), nullString(p.CompletionWindow), nullBytes(p.Metadata)))
	if errors.Is(err, sql.ErrNoRows) {
		return s.batchResent(ctx, tx, p)
	}
	if err != nil {
		return Batch{}, false, fmt.Errorf("accept batch: insert: %w", err)
	}
	if p.Refuse != nil {
		return Batch{}, false, p.Refuse // the transaction rolls back: not even the batch row stays
	}
	if err := s.admitBatch(ctx, tx, p); err != nil {
		return Batch{}, false, err
	}
	var total int64
	for _, l := range p.Lines {
		total += l.ReserveMicros
	}
	held, refusal, err := s.reserveTx(ctx, tx, b.Account, total)
	if err != nil {
		return Batch{}, false, err
	}
	if refusal != nil {
		return Batch{}, false, refusal // the transaction rolls back: not even the batch row stays
	}
	if err := s.insertBatchJobs(ctx, tx, b.ID, b.Account, held, p.Lines, now); err != nil {
		return Batch{}, false, err
	}
	return b, true, nil
}

// batchResent answers a batch key already stored for the account: the
// same lines are the same batch; other lines are refused.
func (s *Store) batchResent(ctx context.Context, tx *sql.Tx, p BatchParams) (Batch, bool, error) {
	const q = `SELECT ` + batchColumns + ` FROM batches WHERE account = $1 AND idempotency_key = $2`
	b, err := scanBatch(s.txQueryRow(ctx, tx, q, p.Account, p.IdempotencyKey))
	if err != nil {
		return Batch{}, false, fmt.Errorf("accept batch: load existing: %w", err)
	}
	if b.RequestHash != p.RequestHash {
		return Batch{}, false, inkwell.Errorf(inkwell.EKEYREUSED,
			"batch idempotency key %q was already used for a different batch (batch %d, %d lines): send a new key", p.IdempotencyKey, b.ID, b.Lines)
	}
	return b, false, nil
}

// admitBatch is admission for a whole batch: its lines must fit under
// the limit beside the jobs queued already.
func (s *Store) admitBatch(ctx context.Context, tx *sql.Tx, p BatchParams) error {
	if p.MaxQueued <= 0 {
		return nil
	}
	if !s.dialect.oneWriter {
		// Batch admissions take turns, across processes, until they
		// commit: each counts the queue with the batches admitted before
		// it in (READ COMMITTED counts only what has committed, and eight
		// batches created at once were all admitted past the limit).
		if _, err := s.txExec(ctx, tx, `SELECT pg_advisory_xact_lock(`+batchAdmissionLockKey+`)`); err != nil {
			return fmt.Errorf("accept batch: wait for the queue's admission: %w", err)
		}
	}
	queued, err := s.queuedNow(ctx, tx)
	if err != nil {
		return fmt.Errorf("accept batch: %w", err)
	}
	if queued+int64(len(p.Lines)) > int64(p.MaxQueued) {
		return inkwell.Errorf(inkwell.ETOOMANY, "the queue has no room for this batch (%d jobs queued, %d lines, the limit is %d): nothing was stored; send the same batch again later, or in smaller batches",
			queued, len(p.Lines), p.MaxQueued)
	}
	return nil
}

// batchAdmissionLockKey serializes batch admissions under a queue limit
// on PostgreSQL (admitBatch): a transaction advisory key pair in
// Inkwell's own namespace ('inkq', 0), apart from the migrations'
// ('inkm') and the lanes' ('inkw').
const batchAdmissionLockKey = "1768844145, 0"

// batchInsertRows is how many jobs one INSERT writes (5 parameters a
// row). More rows a statement means fewer statements, but modernc SQLite
// finds each numbered parameter's name by a linear search, so a
// statement's binding costs the square of its parameters: 100 rows (506
// parameters) is about the fastest on both dialects.
const batchInsertRows = 100

// insertBatchJobs inserts one queued job per line, batchInsertRows per
// statement, the full-size statement prepared once. ON CONFLICT without
// a target takes whichever unique key a line would break (the job key;
// whatever scope keys have), and a short count refuses the whole batch.
func (s *Store) insertBatchJobs(ctx context.Context, tx *sql.Tx, batchID int64, account string, reserved bool, lines []BatchLine, now time.Time) error {
	// The batch's lines enter the queue one after another, from the turn
	// a single job of the account would get (claim_fair.go): the account
	// is served one line per turn, as if it had sent them one by one.
	var turn int64
	if err := s.txQueryRow(ctx, tx, `SELECT `+turnFor("$1"), account).Scan(&turn); err != nil {
		return fmt.Errorf("accept batch: the lines' turn: %w", err)
	}
	var full *sql.Stmt
	if len(lines) >= batchInsertRows {
		q, _ := batchInsert(batchID, account, reserved, lines[:batchInsertRows], nil, 0)
		st, err := tx.PrepareContext(ctx, s.dialect.rebind(q))
		if err != nil {
			return fmt.Errorf("accept batch: prepare: %w", err)
		}
		defer st.Close()
		full = st
	}
	for start := 0; start < len(lines); start += batchInsertRows {
		chunk := lines[start:min(start+batchInsertRows, len(lines))]
		q, args := batchInsert(batchID, account, reserved, chunk, s.ts(now), turn+int64(start))
		var res sql.Result
		var err error
		if len(chunk) == batchInsertRows {
			res, err = full.ExecContext(ctx, args...)
		} else {
			res, err = tx.ExecContext(ctx, s.dialect.rebind(q), args...)
		}
		if err != nil {
			return fmt.Errorf("accept batch: insert jobs %d-%d: %w", start+1, start+len(chunk), err)
		}
		if got, err := res.RowsAffected(); err != nil || got != int64(len(chunk)) {
			return s.batchKeyTaken(ctx, tx, batchID, account, chunk, err)
		}
	}
	return nil
}

// batchInsert is the INSERT of one chunk: $1 the time, $2 the batch, $3
// the account that pays, $4 and $5 the reservation's account and state
// (NULL, NULL when the account has no budget row: no reservation), $6
// the chunk's first turn (each line the next: claim_fair.go), then five
// parameters per line.
func batchInsert(batchID int64, account string, reserved bool, chunk []BatchLine, now any, turn int64) (string, []any) {
	var q strings.Builder
	q.WriteString(`INSERT INTO jobs (idempotency_key, request_hash, payload, batch_custom_id, reservation_micros, status, created_at, batch_id, account, reservation_account, reservation_state, claim_turn) VALUES `)
	var resAccount, resState any
	if reserved {
		resAccount, resState = account, ReservationOpen
	}
	args := make([]any, 0, 6+5*len(chunk))
	args = append(args, now, batchID, account, resAccount, resState, turn)
	for i, l := range chunk {
		if i > 0 {
			q.WriteString(", ")
		}
		n := len(args)
		micros := int64(0)
		if reserved {
			micros = l.ReserveMicros
		}
		fmt.Fprintf(&q, "($%d, $%d, $%d, $%d, $%d, 'queued', $1, $2, $3, $4, $5, CAST($6 AS BIGINT) + %d)", n+1, n+2, n+3, n+4, n+5, i)
		args = append(args, BatchJobKey(batchID, l.CustomID), l.RequestHash, string(l.Payload), l.CustomID, micros)
	}
	q.WriteString(` ON CONFLICT DO NOTHING`)
	return q.String(), args
}

// batchKeyTaken explains a chunk that inserted fewer rows than it has
// lines: a line's job key was stored before (by a row this batch did not
// write: the spaces keep every job sent alone out of a batch's keys, so
// only a row adopted from elsewhere can hold one).
func (s *Store) batchKeyTaken(ctx context.Context, tx *sql.Tx, batchID int64, account string, chunk []BatchLine, err error) error {
	if err != nil {
		return fmt.Errorf("accept batch: count inserted jobs: %w", err)
	}
	for _, l := range chunk {
		key := BatchJobKey(batchID, l.CustomID)
		var id int64
		var owner sql.NullInt64
		err := s.txQueryRow(ctx, tx, `SELECT id, batch_id FROM jobs WHERE account = $1 AND idempotency_key = $2`, account, key).Scan(&id, &owner)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("accept batch: look up key %q: %w", key, err)
		}
		if owner.Int64 != batchID {
			return inkwell.Errorf(inkwell.EKEYREUSED, "custom_id %q: its job key %q is held by job %d, which is not of this batch: nothing was stored", l.CustomID, key, id)
		}
	}
	return inkwell.Errorf(inkwell.EKEYREUSED, "a line's job key is held by a job of another batch: nothing was stored")
}

const batchColumns = `id, account, idempotency_key, request_hash, lines, created_at,
	input_file_id, endpoint, completion_window, metadata, cancelling_at, cancelled_at`

func scanBatch(row rowScanner) (Batch, error) {
	var b Batch
	var created, cancelling, cancelled nullTime
	var file, endpoint, window, metadata sql.NullString
	if err := row.Scan(&b.ID, &b.Account, &b.IdempotencyKey, &b.RequestHash, &b.Lines, &created,
		&file, &endpoint, &window, &metadata, &cancelling, &cancelled); err != nil {
		return b, err
	}
	b.CreatedAt, b.CancellingAt, b.CancelledAt = created.Time, cancelling.Ptr(), cancelled.Ptr()
	b.InputFileID, b.Endpoint, b.CompletionWindow = file.String, endpoint.String, window.String
	if metadata.Valid {
		b.Metadata = []byte(metadata.String)
	}
	return b, nil
}

// nullBytes is JSON text as a column value, NULL when nil.
func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// queuedNow is how many jobs are queued, from job_counts (exact, kept by
// triggers in the same transaction).
func (s *Store) queuedNow(ctx context.Context, tx *sql.Tx) (int64, error) {
	var n int64
	if err := s.txQueryRow(ctx, tx, `SELECT COALESCE(SUM(n), 0) FROM job_counts WHERE kind = 'queued'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count queued jobs: %w", err)
	}
	return n, nil
}

// BatchCancelled is what CancelBatch did.
type BatchCancelled struct {
	// Ended are the jobs the cancel ended: their long-polls may answer.
	Ended []int64
	// Attempts are the running attempts it closed: a lane running their
	// provider calls should abort them (their completions are fenced out).
	Attempts []int64
}

// CancelBatch cancels batch id for by (docs/batches.md "Cancel"): its queued
// jobs in one transaction with the mark, then each running one through
// Cancel. ECONFLICT for a batch that ended uncancelled; refusals write nothing.
func (s *Store) CancelBatch(ctx context.Context, id int64, by string) (BatchCancelled, error) {
	var out BatchCancelled
	if err := s.refuseWhileLost(); err != nil {
		return out, err
	}
	now := s.nowTS() // before the transaction: see RetryIfFailed
	err := s.inTxHooks(ctx, func(tx *sql.Tx) (err error) {
		out.Ended, err = s.cancelQueuedTx(ctx, tx, id, by, now)
		return err
	}, "", crashpoint.CancelAfterCommit)
	if err != nil {
		return BatchCancelled{}, err
	}
	running, err := s.batchUnended(ctx, id)
	if err != nil {
		return out, err
	}
	if len(running) == 0 {
		// A job running at the first transaction may have ended since:
		// the batch is then cancelled now, not left cancelling.
		return out, s.inTx(ctx, func(tx *sql.Tx) error { return s.markCancelledTx(ctx, tx, id) })
	}
	for _, jobID := range running {
		c, err := s.Cancel(ctx, jobID, by)
		switch {
		case inkwell.ErrorCode(err) == inkwell.ECONFLICT:
			continue // its completion committed first: it is done
		case err != nil:
			return out, err
		}
		out.Ended = append(out.Ended, jobID)
		if c.Attempt != 0 {
			out.Attempts = append(out.Attempts, c.Attempt)
		}
	}
	return out, s.inTx(ctx, func(tx *sql.Tx) error { return s.markCancelledTx(ctx, tx, id) })
}

// cancelQueuedTx is CancelBatch's first transaction: the mark, and every
// queued job ended as Cancel ends one (released, announced, audited).
// It returns the jobs it ended.
func (s *Store) cancelQueuedTx(ctx context.Context, tx *sql.Tx, id int64, by string, now any) ([]int64, error) {
	b, err := scanBatch(s.txQueryRow(ctx, tx, `SELECT `+batchColumns+` FROM batches WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, "batch %d", id)
	}
	if err := s.lockAccountsTx(ctx, tx, []string{b.Account}, nil); err != nil { // lock order: budgets.go
		return nil, err
	}
	if !s.dialect.oneWriter {
		// Cancels of one batch at once (a client's retry racing its first
		// send) take turns on its row, after the accounts (lock order), and
		// each reads it again as the one before left it: a second cancel is
		// a re-send, answered with the batch, not a conflict. (SQLite's
		// transaction holds the one write lock: its first read stands.)
		if b, err = scanBatch(s.txQueryRow(ctx, tx, `SELECT `+batchColumns+` FROM batches WHERE id = $1 FOR UPDATE`, id)); err != nil {
			return nil, notFound(err, "batch %d", id)
		}
	}
	if b.CancellingAt == nil {
		if err := s.markCancellingTx(ctx, tx, b, now); err != nil {
			return nil, err
		}
	}
	const cancelJobs = `UPDATE jobs SET status = 'failed', error = $1, error_class = 'cancelled', finished_at = $2, not_before = NULL, claim_turn = 0
		WHERE batch_id = $3 AND status = 'queued'
		RETURNING id`
	rows, err := s.txQuery(ctx, tx, cancelJobs, "cancelled by "+named(by)+" with its batch", now, id)
	if err != nil {
		return nil, fmt.Errorf("cancel batch %d: %w", id, err)
	}
	ids, err := scanIDs(rows)
	if err != nil {
		return nil, fmt.Errorf("cancel batch %d: %w", id, err)
	}
	for start := 0; start < len(ids); start += batchCancelChunk {
		chunk := jobIDList(ids[start:min(start+batchCancelChunk, len(ids))])
		if err := s.releaseUnbilledTx(ctx, tx, b.Account, chunk); err != nil {
			return nil, err
		}
		if err := s.auditCancelTx(ctx, tx, now, by, chunk); err != nil {
			return nil, err
		}
	}
	if len(ids) > 0 {
		if err := s.notifyEnded(ctx, tx, ids); err != nil {
			return nil, err
		}
	}
	return ids, s.markCancelledTx(ctx, tx, id)
}

// markCancellingTx records the first cancel of batch b, which must still
// have a job to cancel: a batch whose jobs have all ended is refused.
func (s *Store) markCancellingTx(ctx context.Context, tx *sql.Tx, b Batch, now any) error {
	var unended int64
	if err := s.txQueryRow(ctx, tx, `SELECT COUNT(*) FROM jobs WHERE batch_id = $1 AND status IN ('queued', 'running')`, b.ID).Scan(&unended); err != nil {
		return fmt.Errorf("cancel batch %d: count its jobs: %w", b.ID, err)
	}
	if unended == 0 {
		return inkwell.Errorf(inkwell.ECONFLICT, "batch %d has ended: each of its %d jobs is done or failed, so there is nothing to cancel (its output and errors stay readable)", b.ID, b.Lines)
	}
	return s.execOne(ctx, tx, `UPDATE batches SET cancelling_at = $2 WHERE id = $1 AND cancelling_at IS NULL`, b.ID, now)
}

// markCancelledTx sets cancelled_at on a cancelling batch none of whose
// jobs is queued or running any more; otherwise it changes nothing.
func (s *Store) markCancelledTx(ctx context.Context, tx *sql.Tx, id int64) error {
	// The time is the statement's own on PostgreSQL (clockOr), not a
	// query on the pool from inside this transaction (see RetryIfFailed).
	mark := `UPDATE batches SET cancelled_at = ` + s.dialect.clockOr("$2") + `
		WHERE id = $1 AND cancelling_at IS NOT NULL AND cancelled_at IS NULL
		  AND NOT EXISTS (SELECT 1 FROM jobs WHERE batch_id = $1 AND status IN ('queued', 'running'))`
	if _, err := s.txExec(ctx, tx, mark, id, s.clockArg()); err != nil {
		return fmt.Errorf("cancel batch %d: mark it cancelled: %w", id, err)
	}
	return nil
}

// batchCancelChunk is how many job ids one statement of a batch cancel
// names, well under either dialect's limit on a statement's size.
const batchCancelChunk = 1000

// releaseUnbilledTx is releaseIfUnbilledTx (budgets.go) for the jobs of ids,
// a SQL list of the store's own integers, all of account: statements run
// unprepared, as each list is used once.
func (s *Store) releaseUnbilledTx(ctx context.Context, tx *sql.Tx, account, ids string) error {
	unbilled := `jobs.id IN (` + ids + `) AND jobs.reservation_state = 'open' AND jobs.reservation_account = $1
		AND NOT EXISTS (SELECT 1 FROM job_attempts a WHERE a.job_id = jobs.id
		                AND (a.error_class IS NULL OR a.error_class NOT IN (` + notBilledSQL + `)))`
	unreserve := `UPDATE accounts SET reserved_micros = reserved_micros - (SELECT COALESCE(SUM(jobs.reservation_micros), 0) FROM jobs WHERE ` + unbilled + `)
		WHERE name = $1 AND budget_micros IS NOT NULL`
	release := `UPDATE jobs SET reservation_state = 'released' WHERE ` + unbilled
	for _, q := range []string{unreserve, release} { // in this order: the first reads the set the second changes
		if _, err := tx.ExecContext(ctx, s.dialect.rebind(q), account); err != nil {
			return fmt.Errorf("cancel batch: release the reservations of account %q: %w", account, err)
		}
	}
	return nil
}

// auditCancelTx writes one audit row per job of ids, a SQL list.
func (s *Store) auditCancelTx(ctx context.Context, tx *sql.Tx, at any, by, ids string) error {
	insert := `INSERT INTO audit_log (at, actor, action, job_id, detail) SELECT $1, $2, '` + AuditCancel + `', id, 'was queued; with its batch' FROM jobs WHERE id IN (` + ids + `)`
	if _, err := tx.ExecContext(ctx, s.dialect.rebind(insert), at, named(by)); err != nil {
		return fmt.Errorf("audit batch cancel: %w", err)
	}
	return nil
}

// batchUnended is the jobs of batch id still queued or running.
func (s *Store) batchUnended(ctx context.Context, id int64) ([]int64, error) {
	rows, err := s.rdb.QueryContext(ctx, s.dialect.rebind(`SELECT id FROM jobs WHERE batch_id = $1 AND status IN ('queued', 'running') ORDER BY id`), id)
	if err != nil {
		return nil, s.classify(fmt.Errorf("cancel batch %d: its running jobs: %w", id, err))
	}
	return scanIDs(rows)
}

// scanIDs reads a one-column result of ids and closes it.
func scanIDs(rows *sql.Rows) ([]int64, error) {
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// jobIDList is ids as a SQL list, "1, 2, 3".
func jobIDList(ids []int64) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	return b.String()
}
