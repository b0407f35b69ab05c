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
// transaction. This file holds the batch's one write; batches_read.go its
// reads. A batch's jobs are ordinary jobs (queued, claimed, run and ended
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
}

// Batch is one row of batches.
type Batch struct {
	ID             int64
	Account        string
	IdempotencyKey string
	RequestHash    string
	Lines          int
	CreatedAt      time.Time
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
	const insert = `INSERT INTO batches (account, idempotency_key, request_hash, lines, created_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (account, idempotency_key) DO NOTHING
		RETURNING ` + batchColumns
	b, err := scanBatch(s.txQueryRow(ctx, tx, insert, p.Account, p.IdempotencyKey, p.RequestHash, len(p.Lines), s.ts(now)))
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

const batchColumns = `id, account, idempotency_key, request_hash, lines, created_at`

func scanBatch(row rowScanner) (Batch, error) {
	var b Batch
	var created nullTime
	if err := row.Scan(&b.ID, &b.Account, &b.IdempotencyKey, &b.RequestHash, &b.Lines, &created); err != nil {
		return b, err
	}
	b.CreatedAt = created.Time
	return b, nil
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
