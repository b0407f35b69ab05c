package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
)

// Prune is the prune transition (docs/design.md §2, §9): a job finished
// before a cut-off loses its prompt or messages (and every member that may
// hold what a user wrote: prunedPayload), its text and its answer,
// and gets pruned_at; its row, key, hash, attempts, result row and charge
// stay, so a re-send is still answered and nothing runs twice. It runs in
// small low-priority transactions, and on SQLite rewrites the rows it
// shrinks so the file can shrink too: docs/retention.md says how and why.
//
// A job of a batch is pruned only once its whole batch ended before the
// cut-off: the batch's output file is made from its jobs when it is read,
// and a client reads it once the batch has ended, so a line done early in
// a long batch keeps its answer until then (batchVerdicts).

// PruneOptions tune Prune. The zero value is the production default.
type PruneOptions struct {
	// DryRun counts the jobs Prune would prune and writes nothing.
	DryRun bool
	// MaxBatch is the most jobs one transaction prunes (default 1000).
	MaxBatch int
	// BatchTime is how long one batch should hold the writer (default
	// 20ms); the batch size follows the time each batch took.
	BatchTime time.Duration
	// Pause is the rest between two batches, when other writers (and, on
	// SQLite, other processes waiting in their busy handler) get in.
	// Default 50ms on SQLite, none on PostgreSQL; negative: none.
	Pause time.Duration
	// Progress, when set, is called about every ProgressEvery (default
	// 5s) while Prune runs, and once at the end.
	Progress      func(PruneProgress)
	ProgressEvery time.Duration
	// NoVacuum skips the incremental vacuum after the batches (SQLite).
	NoVacuum bool
	// By names who prunes, for audit_log (one row per job pruned, in the
	// batch's transaction): ActorCLI, ActorRetention, ….
	By string
}

// PruneProgress is how far a Prune has got.
type PruneProgress struct {
	Pruned  int64 // jobs pruned so far
	Matched int64 // jobs to prune, counted when Prune began
	Elapsed time.Duration
}

// PruneReport says what a Prune did (or, for a dry run, would do).
type PruneReport struct {
	Before  time.Time // jobs finished before this
	DryRun  bool
	Matched int64 // finished before Before and not pruned yet, when Prune began
	// Pruned is how many jobs this run pruned (done and failed); a dry run
	// prunes none and says what it would in Matched, MatchedDone, MatchedFailed.
	Pruned, PrunedDone, PrunedFailed int64
	MatchedDone, MatchedFailed       int64
	// HeldByBatch counts the jobs finished before Before but kept, as their
	// batch had a job that had not (its output is still to be read).
	HeldByBatch int64
	// Expired is the uploads past their expiry that this run deleted
	// (a dry run: would delete), whatever their age (DeleteExpiredFiles).
	Expired Expired
	Batches int
	// LongestBatch is the longest a batch (or a vacuum step, or a
	// checkpoint between them) held the writer, from its BEGIN until its
	// commit returned; SlowBatches counts those that held it over 50 ms,
	// which an accept may have waited behind.
	LongestBatch time.Duration
	SlowBatches  int
	Elapsed      time.Duration
	// SQLite only: the file's auto_vacuum mode ("none", "full",
	// "incremental"; "" on PostgreSQL), the pages incremental vacuum gave
	// back to the file system, the free pages left in the file (reused by
	// new rows), its page size, and its size in bytes before and after.
	AutoVacuum        string
	PagesVacuumed     int64
	FreePages         int64
	PageSize          int64
	FileBefore        int64
	FileAfter         int64
	VacuumInterrupted bool // the vacuum steps stopped early (ctx ended)
}

const (
	defaultPruneMaxBatch  = 1000
	defaultPruneBatchTime = 20 * time.Millisecond
	defaultPrunePause     = 50 * time.Millisecond
	defaultPruneProgress  = 5 * time.Second
	minPruneBatch         = 10
	firstPruneBatch       = 100
	// pruneChunk is how many jobs a SQLite batch rewrites between two looks
	// at the write gate (see pruneBatch): about 1 ms of work.
	pruneChunk = 20
	// vacuumStepPages is where an incremental vacuum step starts; like a
	// batch, its size then follows BatchTime.
	vacuumStepPages = 256
	maxVacuumStep   = 2048
)

// pruneRewritesRows: the database is a SQLite file, whose pages a shrinking
// UPDATE never frees (see the comment at the top).
func (s *Store) pruneRewritesRows() bool { return s.dialect.pruneRewrites }

// pruneMatch selects the jobs Prune takes. It repeats the partial index
// jobs_unpruned's own condition word for word, so both dialects read that
// index and never the finished history that is already pruned.
const pruneMatch = `status IN ('done', 'failed') AND pruned_at IS NULL AND finished_at < $1`

// Prune prunes every job finished before before and not pruned yet (see
// the comment above). It is idempotent: a pruned job is never taken again.
// When ctx ends it stops after the batch in flight (which commits or rolls
// back whole) and returns ctx's error with the report so far.
func (s *Store) Prune(ctx context.Context, before time.Time, opts PruneOptions) (PruneReport, error) {
	start := time.Now()
	rep := PruneReport{Before: before.UTC(), DryRun: opts.DryRun}
	if err := s.needPruneSchema(ctx); err != nil {
		return rep, err
	}
	opts = s.pruneDefaults(opts)
	verdicts := batchVerdicts{}
	if err := s.countPrunable(ctx, &rep, verdicts); err != nil {
		return rep, err
	}
	if s.pruneRewritesRows() {
		f, err := s.sqliteFileState(ctx)
		if err != nil {
			return rep, err
		}
		rep.AutoVacuum, rep.PageSize, rep.FreePages, rep.FileBefore, rep.FileAfter = f.autoVacuum, f.pageSize, f.free, f.size, f.size
	}
	// Expired uploads first, so that the vacuum steps below give their
	// pages back too. What it deleted is reported whatever follows; an
	// error of its own does not keep the jobs from being pruned (it is
	// returned with the run's), a stop does.
	expired, err := s.DeleteExpiredFiles(ctx, opts.DryRun, opts.By)
	rep.Expired = expired
	var expiredErr error
	if err != nil {
		expiredErr = fmt.Errorf("delete expired uploads: %w", err)
		if ctx.Err() != nil || opts.DryRun {
			if s.pruneRewritesRows() && !opts.DryRun {
				f, _ := s.sqliteFileState(context.WithoutCancel(ctx))
				rep.FreePages, rep.FileAfter = f.free, f.size
			}
			rep.Elapsed = time.Since(start)
			return rep, expiredErr
		}
		err = nil
	}
	if opts.DryRun {
		rep.Elapsed = time.Since(start)
		return rep, nil
	}
	progress := func(force bool) {}
	if opts.Progress != nil {
		last := time.Now()
		progress = func(force bool) {
			if force || time.Since(last) >= opts.ProgressEvery {
				last = time.Now()
				opts.Progress(PruneProgress{Pruned: rep.Pruned, Matched: rep.Matched, Elapsed: time.Since(start)})
			}
		}
	}
	n := min(firstPruneBatch, opts.MaxBatch)
	for rep.Matched > 0 {
		var got, done, failed int
		var held time.Duration
		var yielded bool
		got, done, failed, held, yielded, err = s.pruneBatch(ctx, before, n, opts.By, verdicts)
		if err != nil {
			break
		}
		rep.Batches++
		rep.Pruned += int64(got)
		rep.PrunedDone += int64(done)
		rep.PrunedFailed += int64(failed)
		rep.noteHeld(held)
		progress(false)
		if got < n && !yielded {
			break // none left (or, on PostgreSQL, the rest is locked by a concurrent writer: the next run takes it)
		}
		ckpt := s.checkpointInTurn(ctx)
		rep.noteHeld(ckpt)
		n = nextBatchSize(n, max(held, ckpt), opts.BatchTime, opts.MaxBatch)
		if err = rest(ctx, opts.Pause); err != nil {
			break
		}
	}
	if err == nil && s.pruneRewritesRows() && !opts.NoVacuum && (rep.Pruned > 0 || rep.Expired.Files > 0) {
		err = s.vacuumSteps(ctx, opts, &rep)
	}
	if s.pruneRewritesRows() && (rep.Pruned > 0 || rep.Expired.Files > 0) {
		f, ferr := s.sqliteFileState(context.WithoutCancel(ctx))
		if ferr != nil && err == nil {
			err = ferr
		}
		rep.FreePages, rep.FileAfter = f.free, f.size
	}
	rep.Elapsed = time.Since(start)
	if rep.Pruned > 0 || err == nil {
		progress(true)
	}
	return rep, errors.Join(err, expiredErr)
}

// PruneOlderThan prunes the jobs finished longer ago than age by the
// store's clock (the database's own on PostgreSQL, which wrote
// finished_at): serve's --retention and inkwell prune --older-than. An age
// of 0 takes every finished job.
func (s *Store) PruneOlderThan(ctx context.Context, age time.Duration, opts PruneOptions) (PruneReport, error) {
	if age < 0 {
		return PruneReport{}, inkwell.Errorf(inkwell.EINVALID, "prune: the age must be 0 or more, not %s", age)
	}
	return s.Prune(ctx, s.now().Add(-age), opts)
}

// slowBatch is the wait behind one batch that retention means to keep an
// accept under.
const slowBatch = 50 * time.Millisecond

func (r *PruneReport) noteHeld(held time.Duration) {
	r.LongestBatch = max(r.LongestBatch, held)
	if held > slowBatch {
		r.SlowBatches++
	}
}

func (s *Store) pruneDefaults(o PruneOptions) PruneOptions {
	if o.MaxBatch <= 0 {
		o.MaxBatch = defaultPruneMaxBatch
	}
	if o.BatchTime <= 0 {
		o.BatchTime = defaultPruneBatchTime
	}
	switch {
	case o.Pause < 0:
		o.Pause = 0
	case o.Pause == 0 && s.dialect.oneWriter:
		o.Pause = defaultPrunePause
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = defaultPruneProgress
	}
	return o
}

// needPruneSchema refuses a database whose schema is not this Inkwell's
// own: a prune writes columns and tables added by many migrations (pruned_at
// in 0005, audit_log in 0008, batch_id in 0011, results.response in
// 0016), and `inkwell prune` opens without migrating. A clear word
// instead of "no such column" halfway.
func (s *Store) needPruneSchema(ctx context.Context) error {
	if s.schemaCurrent(ctx) {
		return nil
	}
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		return s.classify(err)
	}
	migs, err := loadMigrations(s.dialect.name)
	if err != nil {
		return err
	}
	if newest := migs[len(migs)-1].version; v > newest {
		return inkwell.Errorf(inkwell.EINVALID, "the database schema is at version %d, newer than this inkwell knows (%d): prune with the newer inkwell that migrated it", v, newest)
	}
	return inkwell.Errorf(inkwell.EINVALID, "the database schema is at version %d, not this inkwell's %d; retention needs it current: run 'inkwell migrate' (or start 'inkwell serve') first", v, migs[len(migs)-1].version)
}

// countPrunable counts the jobs a Prune would take, by status, on the read
// pool (the jobs_unpruned index), and judges each batch they belong to
// (verdicts): the jobs of a batch not ended before the cut-off are counted
// in HeldByBatch instead.
func (s *Store) countPrunable(ctx context.Context, rep *PruneReport, verdicts batchVerdicts) error {
	rows, err := s.rdb.QueryContext(ctx, s.dialect.rebind(`SELECT status, batch_id, COUNT(*) FROM jobs WHERE `+pruneMatch+` GROUP BY status, batch_id`), s.ts(rep.Before))
	if err != nil {
		return s.classify(fmt.Errorf("prune: count jobs: %w", err))
	}
	type group struct {
		status string
		batch  sql.NullInt64
		n      int64
	}
	var groups []group
	for rows.Next() {
		var g group
		if err := rows.Scan(&g.status, &g.batch, &g.n); err != nil {
			rows.Close()
			return err
		}
		groups = append(groups, g)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if err := rows.Err(); err != nil {
		return s.classify(fmt.Errorf("prune: count jobs: %w", err))
	}
	for _, g := range groups {
		if g.batch.Valid {
			kept, err := verdicts.judge(g.batch.Int64, func() (batchVerdict, error) {
				return s.batchNotEnded(ctx, s.rdb.QueryRowContext, g.batch.Int64, rep.Before)
			})
			if err != nil {
				return s.classify(err)
			}
			if kept {
				rep.HeldByBatch += g.n
				continue
			}
		}
		if g.status == inkwell.StatusDone {
			rep.MatchedDone += g.n
		} else {
			rep.MatchedFailed += g.n
		}
		rep.Matched += g.n
	}
	return nil
}

// batchVerdicts is one Prune's word on each batch its jobs belong to:
// kept for a batch that had a job not finished before the cut-off (its
// jobs are kept), not kept for one that had ended by then, each with the
// batch's reopened count read in the same statement. Each batch is judged
// once a run, and a batch found kept stays kept for the rest of it.
type batchVerdicts map[int64]batchVerdict

type batchVerdict struct {
	kept     bool
	reopened int64 // batches.reopened when it was judged
}

// judge returns batch's verdict, asking notEnded the first time.
func (v batchVerdicts) judge(batch int64, notEnded func() (batchVerdict, error)) (bool, error) {
	if b, ok := v[batch]; ok {
		return b.kept, nil
	}
	b, err := notEnded()
	if err != nil {
		return false, err
	}
	v[batch] = b
	return b.kept, nil
}

// kept lists the batches whose jobs are kept, for a NOT IN (…) list: ids
// this code read from the database, never text from outside.
func (v batchVerdicts) kept() string {
	var b strings.Builder
	for id, verdict := range v {
		if !verdict.kept {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	return b.String()
}

// batchNotEndedSQL: batch $1 has a job not finished before $2 (queued,
// running, or finished since), read through jobs_batch_line, and the
// batch's reopened count, in one statement (one snapshot). It reads every
// line of the batch when the batch has ended, so a prune transaction asks
// it only when batchReopenedSQL says a line was put back since the batch
// was judged (dropKept).
const batchNotEndedSQL = `SELECT EXISTS (SELECT 1 FROM jobs WHERE batch_id = $1 AND (status NOT IN ('done', 'failed') OR finished_at IS NULL OR finished_at >= $2)),
	COALESCE((SELECT reopened FROM batches WHERE id = $1), 0)`

// batchNotEnded judges batch against before, read with queryRow (the read
// pool, or a prune's transaction).
func (s *Store) batchNotEnded(ctx context.Context, queryRow func(context.Context, string, ...any) *sql.Row, batch int64, before time.Time) (batchVerdict, error) {
	var v batchVerdict
	if err := queryRow(ctx, s.dialect.rebind(batchNotEndedSQL), batch, s.ts(before)).Scan(&v.kept, &v.reopened); err != nil {
		return v, fmt.Errorf("prune: has batch %d ended: %w", batch, err)
	}
	return v, nil
}

// batchReopenedSQL is a batch's reopened count (migration 0021: a trigger
// adds one each time a line of the batch goes from done or failed back to
// queued or running, the only way a batch that has ended can end again
// later). PostgreSQL reads it FOR SHARE: a retry of one of the batch's
// lines (its trigger updates the row) then waits for the prune's commit,
// or the prune for the retry's, and sees its count.
func (s *Store) batchReopenedSQL() string {
	q := `SELECT reopened FROM batches WHERE id = $1`
	if !s.dialect.oneWriter {
		q += ` FOR SHARE`
	}
	return q
}

// nextBatchSize scales the batch so that it holds the writer about target:
// at most twice as many rows as the last one, at least minPruneBatch.
func nextBatchSize(n int, held, target time.Duration, most int) int {
	next := 2 * n
	if held > 0 {
		next = min(next, int(float64(n)*float64(target)/float64(held)))
	}
	return max(minPruneBatch, min(next, most))
}

func rest(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type pruneRow struct {
	id      int64
	status  string
	payload string
	batch   sql.NullInt64
}

// pruneBatch prunes up to n jobs, oldest finished first, in one
// transaction at low priority. held is how long it held the writer.
//
// On SQLite it gives way: it rewrites the jobs a chunk at a time, and when
// another writer of this process is waiting at the gate (an accept, a
// claim, an outcome) it commits the chunks done so far and returns with
// yielded set, so that writer waits for one chunk and a commit of what is
// written, not for the whole batch. The batch's size follows the budget;
// the chunk bounds the wait behind it. A writer of another process cannot
// be seen here: it waits for the batch, as before.
//
// The jobs of a batch verdicts keeps are not selected; a batch no verdict
// names yet (its first job finished as the run began) is judged here.
func (s *Store) pruneBatch(ctx context.Context, before time.Time, n int, by string, verdicts batchVerdicts) (got, done, failed int, held time.Duration, yielded bool, err error) {
	// ORDER BY finished_at reads the index in order; PostgreSQL locks the
	// rows it takes (a retry of one of them waits, then finds it pruned)
	// and skips rows another writer holds.
	notKept := ""
	if list := verdicts.kept(); list != "" {
		notKept = ` AND (batch_id IS NULL OR batch_id NOT IN (` + list + `))`
	}
	sel := `SELECT id, status, payload, batch_id FROM jobs WHERE ` + pruneMatch + notKept + ` ORDER BY finished_at LIMIT $2` + s.dialect.claimLock
	prunedAt := s.nowTS()
	var t0 time.Time // the writer is ours from here (BEGIN) until the commit returns
	err = s.inTxAt(ctx, writeLow, func(tx *sql.Tx) error {
		t0 = time.Now()
		rows, err := s.txQuery(ctx, tx, sel, s.ts(before), n)
		if err != nil {
			return fmt.Errorf("prune: select jobs: %w", err)
		}
		var batch []pruneRow
		for rows.Next() {
			var r pruneRow
			if err := rows.Scan(&r.id, &r.status, &r.payload, &r.batch); err != nil {
				rows.Close()
				return err
			}
			batch = append(batch, r)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("prune: select jobs: %w", err)
		}
		selected := len(batch)
		if batch, err = s.dropKept(ctx, tx, batch, before, verdicts); err != nil {
			return err
		}
		// Rows of a batch judged just now and kept were left out: a short
		// batch then says nothing of what is left, so it counts as a
		// yield and the run goes on (their batch is not selected again).
		yielded = len(batch) < selected
		if len(batch) == 0 {
			return nil
		}
		if s.pruneRewritesRows() {
			for i := 0; i < len(batch); i += pruneChunk {
				if i > 0 && s.dialect.oneWriter && s.gate.othersWaiting() {
					batch, yielded = batch[:i], true
					break
				}
				if err = s.rewritePruned(ctx, tx, batch[i:min(i+pruneChunk, len(batch))], prunedAt); err != nil {
					break
				}
			}
		} else {
			err = s.updatePruned(ctx, tx, batch, prunedAt)
		}
		if err != nil {
			return err
		}
		if err := s.auditPruneTx(ctx, tx, prunedAt, by, idList(batch)); err != nil {
			return err
		}
		got = len(batch)
		for _, r := range batch {
			if r.status == inkwell.StatusDone {
				done++
			} else {
				failed++
			}
		}
		return nil
	}, "", "")
	if !t0.IsZero() {
		held = time.Since(t0)
	}
	if err != nil {
		return 0, 0, 0, held, false, err
	}
	return got, done, failed, held, yielded, nil
}

// dropKept leaves out of batch the jobs of batches kept. Each batch of
// the rows selected is judged again here, in the transaction that prunes
// them, whatever the run said of it before: a failed line retried since
// (inkwell retry) opens an ended batch again. The batch's reopened count
// says whether a line was put back since the batch was judged ended; only
// then is the batch judged anew, by reading its lines: a 50,000-line batch
// read whole in every prune transaction held SQLite's writer for tens of
// milliseconds each time (BenchmarkPruneBatch50k). A batch found kept
// stays kept for the rest of the run.
func (s *Store) dropKept(ctx context.Context, tx *sql.Tx, batch []pruneRow, before time.Time, verdicts batchVerdicts) ([]pruneRow, error) {
	now := map[int64]bool{} // judged in this transaction
	out := batch[:0]
	for _, r := range batch {
		if r.batch.Valid {
			id := r.batch.Int64
			kept, seen := now[id]
			if !seen {
				var err error
				if kept, err = s.judgeInTx(ctx, tx, id, before, verdicts); err != nil {
					return nil, err
				}
				now[id] = kept
			}
			if kept {
				continue
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// judgeInTx is batch id's verdict in tx: the run's own when the batch was
// judged ended and no line of it was put back since, else a new one.
func (s *Store) judgeInTx(ctx context.Context, tx *sql.Tx, id int64, before time.Time, verdicts batchVerdicts) (bool, error) {
	if v, ok := verdicts[id]; ok && !v.kept {
		var reopened int64
		if err := s.txQueryRow(ctx, tx, s.batchReopenedSQL(), id).Scan(&reopened); err != nil {
			return false, fmt.Errorf("prune: was batch %d reopened: %w", id, err)
		}
		if reopened == v.reopened {
			return false, nil
		}
	}
	v, err := s.batchNotEnded(ctx, tx.QueryRowContext, id, before)
	if err != nil {
		return false, err
	}
	verdicts[id] = v
	return v.kept, nil
}

// prunedPayload is the request as retention keeps it (see the comment at
// the top): only the members that say who paid, on which model, for how
// long an answer and how it was sampled, and the client's own metadata
// (prunedKeeps), as they were, keys in order; {} when the payload is not a
// JSON object. Everything else may carry what a user wrote: the prompt
// and messages, and also tools, a response format's schema, stop
// sequences, an end user's id ("user") and members passed to the provider
// unread (a "prediction" holds text).
func prunedPayload(payload string) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(payload), &m); err != nil || m == nil {
		return "{}"
	}
	for k := range m {
		if !prunedKeeps[k] {
			delete(m, k)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// prunedKeeps are the payload members a pruned job keeps.
var prunedKeeps = map[string]bool{
	"account": true, "model": true, "metadata": true,
	"max_words": true, "max_tokens": true, "max_completion_tokens": true,
	"temperature": true, "top_p": true, "seed": true, "n": true,
	"frequency_penalty": true, "presence_penalty": true,
	"service_tier": true, "reasoning_effort": true,
}

// idList writes ids for an IN (…) list. They are int64s this code read
// from the database, never text from outside.
func idList(batch []pruneRow) string {
	var b strings.Builder
	for i, r := range batch {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(r.id, 10))
	}
	return b.String()
}

// prunedUpdate prunes job $1 in place (PostgreSQL), found by primary key
// (the "IS TRUE" of doneJob; with the guard bare, a kept plan read all of
// jobs_unpruned for each job pruned).
const prunedUpdate = `UPDATE jobs SET payload = $2, pruned_at = $3 WHERE id = $1 AND (status IN ('done', 'failed') AND pruned_at IS NULL) IS TRUE`

// updatePruned prunes the batch in place (PostgreSQL). Each UPDATE repeats
// the guard: the rows are locked by the SELECT … FOR UPDATE, so it always
// holds; it is there so that a change to the select can never prune a job
// that is not finished.
func (s *Store) updatePruned(ctx context.Context, tx *sql.Tx, batch []pruneRow, prunedAt any) error {
	upd := prunedUpdate
	for _, r := range batch {
		if err := s.execOne(ctx, tx, upd, r.id, prunedPayload(r.payload), prunedAt); err != nil {
			return fmt.Errorf("prune job %d: %w", r.id, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE results SET text = '', response = NULL WHERE job_id IN (`+idList(batch)+`)`); err != nil {
		return fmt.Errorf("prune: empty results: %w", err)
	}
	return nil
}

// rewritePruned prunes the batch on SQLite by deleting and inserting again
// the job and result rows (see the comment at the top for why), every
// column copied as it was except payload, pruned_at and text. SELECT *
// carries whatever columns a later migration adds. (Every Inkwell column is
// declared INTEGER or TEXT, which the driver reads back as the value it
// stored; a column declared DATE, DATETIME or TIMESTAMP would come back as a
// time.Time and be written again in the driver's layout: keep times TEXT.) Foreign keys are
// deferred to the commit, when every row is back; the triggers that keep
// job_counts see one delete and one insert of the same row, which cancel.
func (s *Store) rewritePruned(ctx context.Context, tx *sql.Tx, batch []pruneRow, prunedAt any) error {
	in := idList(batch)
	payloads := make(map[int64]string, len(batch))
	for _, r := range batch {
		payloads[r.id] = prunedPayload(r.payload)
	}
	jobCols, jobRows, err := selectAll(ctx, tx, `SELECT * FROM jobs WHERE id IN (`+in+`)`)
	if err != nil {
		return fmt.Errorf("prune: read jobs: %w", err)
	}
	resCols, resRows, err := selectAll(ctx, tx, `SELECT * FROM results WHERE job_id IN (`+in+`)`)
	if err != nil {
		return fmt.Errorf("prune: read results: %w", err)
	}
	idAt, payloadAt, prunedAtAt := colIndex(jobCols, "id"), colIndex(jobCols, "payload"), colIndex(jobCols, "pruned_at")
	textAt := colIndex(resCols, "text")
	if idAt < 0 || payloadAt < 0 || prunedAtAt < 0 || textAt < 0 {
		return fmt.Errorf("prune: jobs or results lack a column prune writes (schema %v / %v)", jobCols, resCols)
	}
	for _, row := range jobRows {
		id, ok := row[idAt].(int64)
		if !ok {
			return fmt.Errorf("prune: job id %v is not an integer", row[idAt])
		}
		row[payloadAt], row[prunedAtAt] = payloads[id], prunedAt
	}
	responseAt := colIndex(resCols, "response")
	for _, row := range resRows {
		row[textAt] = ""
		if responseAt >= 0 {
			row[responseAt] = nil
		}
	}
	stmts := []string{
		`PRAGMA defer_foreign_keys = ON`, // this transaction only: SQLite clears it at COMMIT or ROLLBACK
		`DELETE FROM results WHERE job_id IN (` + in + `)`,
		`DELETE FROM jobs WHERE id IN (` + in + `)`,
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("prune: %s: %w", q, err)
		}
	}
	if err := insertAll(ctx, tx, "jobs", jobCols, jobRows); err != nil {
		return err
	}
	return insertAll(ctx, tx, "results", resCols, resRows)
}

func selectAll(ctx context.Context, tx *sql.Tx, q string) ([]string, [][]any, error) {
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, nil, err
	}
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, nil, err
		}
		out = append(out, vals)
	}
	return cols, out, rows.Err()
}

func insertAll(ctx context.Context, tx *sql.Tx, table string, cols []string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	q := `INSERT INTO ` + table + ` (` + strings.Join(cols, ", ") + `) VALUES (?` + strings.Repeat(", ?", len(cols)-1) + `)`
	st, err := tx.PrepareContext(ctx, q)
	if err != nil {
		return fmt.Errorf("prune: %s: %w", q, err)
	}
	defer st.Close()
	for _, row := range rows {
		if _, err := st.ExecContext(ctx, row...); err != nil {
			return fmt.Errorf("prune: insert %s row again: %w", table, err)
		}
	}
	return nil
}

func colIndex(cols []string, name string) int {
	for i, c := range cols {
		if strings.EqualFold(c, name) {
			return i
		}
	}
	return -1
}

// vacuumSteps hands the free pages back to the file system on a SQLite
// file with incremental auto-vacuum, a few hundred pages per transaction
// at low priority, resting between steps like the batches. On a file
// without it the free pages stay in the file, where new rows reuse them.
func (s *Store) vacuumSteps(ctx context.Context, opts PruneOptions, rep *PruneReport) error {
	f, err := s.sqliteFileState(ctx)
	if err != nil {
		return err
	}
	if f.autoVacuum != "incremental" {
		return nil
	}
	n := vacuumStepPages
	for f.free > 0 {
		var t0 time.Time
		err := s.inTxAt(ctx, writeLow, func(tx *sql.Tx) error {
			t0 = time.Now()
			_, err := tx.ExecContext(ctx, `PRAGMA incremental_vacuum(`+strconv.Itoa(n)+`)`)
			return err
		}, "", "")
		held := time.Since(t0)
		rep.noteHeld(held)
		if err != nil {
			rep.VacuumInterrupted = true
			return fmt.Errorf("prune: incremental vacuum: %w", err)
		}
		freeBefore := f.free
		if f, err = s.sqliteFileState(ctx); err != nil {
			return err
		}
		rep.PagesVacuumed += freeBefore - f.free
		if freeBefore-f.free <= 0 {
			break // nothing moved: never spin
		}
		ckpt := s.checkpointInTurn(ctx)
		rep.noteHeld(ckpt)
		n = max(minPruneBatch, min(2*n, int(float64(n)*float64(opts.BatchTime)/float64(max(held, ckpt, time.Microsecond))), maxVacuumStep))
		if err := rest(ctx, opts.Pause); err != nil {
			rep.VacuumInterrupted = true
			return err
		}
	}
	// The file shrinks when the WAL is copied back into it (checkpoint);
	// a passive one never waits for readers or writers.
	return s.withWriter(ctx, writeLow, func(conn *sql.Conn) error {
		_, err := conn.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`)
		return err
	})
}

// sqliteFile is a SQLite file's state as prune reports it.
type sqliteFile struct {
	autoVacuum           string // none, full, incremental
	free, pageSize, size int64  // free pages, bytes per page, bytes of the file
}

// sqliteFileState reads the SQLite file's auto_vacuum mode, free pages,
// page size and size. One read transaction that first reads a table: a
// connection answers PRAGMA auto_vacuum from the file header it read last,
// which a VACUUM on another connection may have changed since.
func (s *Store) sqliteFileState(ctx context.Context) (sqliteFile, error) {
	var f sqliteFile
	tx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return f, s.classify(err)
	}
	defer tx.Rollback()
	var mode, n int64
	for _, q := range []struct {
		sql string
		v   *int64
	}{
		{`SELECT COUNT(*) FROM schema_migrations`, &n},
		{`PRAGMA auto_vacuum`, &mode},
		{`PRAGMA freelist_count`, &f.free},
		{`PRAGMA page_size`, &f.pageSize},
	} {
		if err := tx.QueryRowContext(ctx, q.sql).Scan(q.v); err != nil {
			return f, s.classify(fmt.Errorf("%s: %w", q.sql, err))
		}
	}
	f.autoVacuum = map[int64]string{0: "none", 1: "full", 2: "incremental"}[mode]
	fi, err := os.Stat(s.path)
	if err != nil {
		return f, err
	}
	f.size = fi.Size()
	return f, nil
}

// checkpointInTurn copies the WAL back into a SQLite file between two
// batches, on the write connection, in its own turn at the write gate (low
// priority, like a batch), and returns how long it held the writer. Prune
// writes much more WAL than the jobs around it; left alone, the automatic
// checkpoint (every 1000 pages) runs inside whichever commit crosses the
// mark, often an accept's, and with synchronous=FULL its fsync of the file
// would hold that accept. Run from a reader connection beside the writer,
// the checkpoint's writes and fsync compete on the disk with every commit
// that happens to run then, unbounded and unmeasured. In its own turn no
// commit of this process runs beside it, and its hold is measured like a
// batch's: it copies the pages of the batch before it (and of the commits
// since), so the batch size that keeps a batch near the budget keeps the
// checkpoint near it too. A passive checkpoint never waits for readers.
// Failures change nothing and are ignored: the next one, or SQLite's own,
// does the work.
func (s *Store) checkpointInTurn(ctx context.Context) time.Duration {
	if !s.pruneRewritesRows() {
		return 0
	}
	var held time.Duration
	_ = s.withWriter(ctx, writeLow, func(conn *sql.Conn) error {
		t0 := time.Now()
		_, err := conn.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`)
		held = time.Since(t0)
		return err
	})
	return held
}

// withWriter runs fn on the write connection outside any transaction
// (VACUUM, checkpoints), after the write gate at priority p.
func (s *Store) withWriter(ctx context.Context, p writePriority, fn func(conn *sql.Conn) error) error {
	if s.dialect.oneWriter {
		if err := s.gate.acquire(ctx, p); err != nil {
			return fmt.Errorf("wait for the writer: %w", err)
		}
		defer s.gate.release()
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.classify(err)
	}
	defer conn.Close()
	return s.classify(fn(conn))
}

// VacuumReport is what Vacuum did to a SQLite file.
type VacuumReport struct {
	FileBefore, FileAfter        int64
	AutoVacuumBefore, AutoVacuum string
}

// Vacuum rebuilds a SQLite file with VACUUM: the free pages go back to the
// file system, and the file gets incremental auto-vacuum, so later prunes
// shrink it step by step. It rewrites the whole file and holds the write
// lock throughout (seconds per GB): every other writer, of this process
// or another, waits, and one that waits past its busy timeout fails. It
// needs free disk space of about the file's size. PostgreSQL: refused;
// autovacuum makes pruned space reusable there.
func (s *Store) Vacuum(ctx context.Context) (VacuumReport, error) {
	var rep VacuumReport
	if !s.pruneRewritesRows() {
		return rep, inkwell.Errorf(inkwell.EINVALID, "vacuum is for a SQLite file; on PostgreSQL autovacuum makes the space prune frees reusable (VACUUM FULL would shrink the tables but locks them)")
	}
	f, err := s.sqliteFileState(ctx)
	if err != nil {
		return rep, err
	}
	rep.FileBefore, rep.AutoVacuumBefore = f.size, f.autoVacuum
	err = s.withWriter(ctx, writeNormal, func(conn *sql.Conn) error {
		for _, q := range []string{`PRAGMA auto_vacuum = INCREMENTAL`, `VACUUM`, `PRAGMA wal_checkpoint(TRUNCATE)`} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	if f, err = s.sqliteFileState(ctx); err != nil {
		return rep, err
	}
	rep.FileAfter, rep.AutoVacuum = f.size, f.autoVacuum
	return rep, nil
}
