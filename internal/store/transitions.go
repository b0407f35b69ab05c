package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
)

// This file holds every write to jobs.status and job_attempts.status except
// startup recovery (recover.go): one method per row of docs/design.md §2, each
// one short transaction whose guard is in its WHERE clause. On PostgreSQL a
// group's accepts and completions are each one statement over arrays, with
// the same guards (postgres_accept.go, postgres_complete.go). Prune, which
// changes no status, is in prune.go.

// AcceptParams is one validated, normalized request.
type AcceptParams struct {
	IdempotencyKey string
	RequestHash    string
	Payload        []byte // normalized request JSON
	// MaxQueued is admission: when this many jobs are queued already, a
	// new key is refused (ETOOMANY) and nothing is written; a re-send of a
	// stored key is answered as always. 0: no limit.
	MaxQueued int
	// Account is who pays (the API's decideAccount; "" is the default
	// account). Keys are unique per account: the same key under two
	// accounts is two jobs. ReserveMicros is the job's worst-case cost,
	// reserved against the account's budget in the accept transaction
	// (budgets.go). Past the budget a new key is refused (EBUDGET),
	// writing nothing. No reservation is taken when the account has no
	// accounts row.
	Account       string
	ReserveMicros int64
	// Refuse, when set, refuses a new key with this error and writes
	// nothing; a re-send of a stored key is answered as always (the API's
	// per-account rpm limit).
	Refuse error
}

// Accept stores a new queued job, or returns the job already stored under
// the same key. created is false for a re-send. A re-send with another body
// is refused with EKEYREUSED and writes nothing.
//
// Concurrent Accepts share one transaction and so one durable commit (group
// commit); each caller returns only after the commit that holds its row.
func (s *Store) Accept(ctx context.Context, p AcceptParams) (job inkwell.Job, created bool, err error) {
	if err := s.refuseWhileLost(); err != nil {
		return inkwell.Job{}, false, err
	}
	return s.accepts.accept(ctx, p)
}

// The statements that put a job in the queue, each writing its
// claim_turn (its turn in the round robin across accounts: turnFor,
// claim_fair.go), built once. AcceptBatch gives its lines their turns in
// batches.go.
// acceptInsertSQL is a new job, its account $1, created at now (SQL;
// Store.acceptInsert).
func acceptInsertSQL(now string) string {
	return `INSERT INTO jobs (account, idempotency_key, request_hash, payload, status, created_at,
			reservation_micros, reservation_account, reservation_state, claim_turn)
		VALUES ($1, $2, $3, $4, 'queued', ` + now + `, $6, $7, $8, ` + turnFor("$1") + `)
		ON CONFLICT (account, idempotency_key) DO NOTHING
		RETURNING ` + insertedJobColumns
}

// Guards on a job's state are written "(…) IS TRUE" wherever the row is
// named by its id: the form implies no partial index's predicate, so that
// a plan PostgreSQL keeps (made at a connection's first runs, often on
// nearly empty tables) looks the row up by primary key instead of reading
// a whole partial index such as jobs_running_since, entries of finished
// jobs included until a vacuum (TestStore_KeptPlansFindRowsByKey).
var (
	// doneJob: a running job done; its open budget reservation is settled
	// in the same statement (budgets.go), which returns it.
	doneJob = `UPDATE jobs SET status = 'done', error = NULL, finished_at = $1, ` + settleOnDone + `
		WHERE id = $2 AND (status = 'running') IS TRUE
		RETURNING ` + reservationColumns
	// failJob: a running job failed for good.
	failJob = `UPDATE jobs SET status = 'failed', error = $1, error_class = $2, finished_at = $3, gave_up_after = $4
		WHERE id = $5 AND (status = 'running') IS TRUE`
)

var (
	// rescheduleJob: a running job back to queued for an automatic retry
	// after $3; it keeps the failure it waits out (error, error_class)
	// for the views, and the next claim clears them. It enters again
	// behind its account's last turn.
	rescheduleJob = `UPDATE jobs SET status = 'queued', error = $1, error_class = $2, not_before = $3,
			started_at = NULL, finished_at = NULL, claim_turn = ` + turnFor("jobs.account") + `
		WHERE id = $4 AND (status = 'running') IS TRUE`
	// retryJob: a failed job back to queued by an operator or client,
	// behind its account's last turn.
	retryJob = `UPDATE jobs SET status = 'queued', error = NULL, error_class = NULL, gave_up_after = NULL, not_before = NULL,
			started_at = NULL, finished_at = NULL, claim_turn = ` + turnFor("jobs.account") + `
		WHERE id = $1 AND status = 'failed' AND pruned_at IS NULL`
)

// acceptOne runs inside a group-commit transaction. A duplicate key, even
// one inserted earlier in the same batch, falls through to the lookup.
// adm is the group's admission count (see admit). A request that may not
// create a job (p.Refuse, a full queue, a budget) is still answered when
// its key is stored: a re-send never counts against a limit and never
// reserves twice.
func (s *Store) acceptOne(ctx context.Context, tx *sql.Tx, p AcceptParams, now any, adm *admission) (inkwell.Job, bool, error) {
	refusal := p.Refuse
	if refusal == nil {
		var err error
		if refusal, err = s.admit(ctx, tx, p, adm); err != nil {
			return inkwell.Job{}, false, err
		}
	}
	held := false
	if refusal == nil && adm.mayHaveBudget(p.account()) {
		var err error
		if held, refusal, err = s.reserveTx(ctx, tx, p.account(), p.ReserveMicros); err != nil {
			return inkwell.Job{}, false, err
		}
	}
	if refusal != nil {
		return s.acceptExisting(ctx, tx, p, refusal)
	}
	var micros int64
	var account, state any
	if held {
		micros, account, state = p.ReserveMicros, p.account(), ReservationOpen
	}
	job, err := scanJob(s.txQueryRow(ctx, tx, s.acceptInsert, p.account(), p.IdempotencyKey, p.RequestHash, string(p.Payload), now, micros, account, state))
	if err == nil {
		adm.queued++
		job.Payload = p.Payload // stored as it is (insertedJobColumns)
		return job, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return inkwell.Job{}, false, fmt.Errorf("accept: insert: %w", err)
	}
	if held { // a re-send after all: its job holds its own reservation
		if err := s.unreserveTx(ctx, tx, p.account(), p.ReserveMicros); err != nil {
			return inkwell.Job{}, false, err
		}
	}
	return s.acceptExisting(ctx, tx, p, nil)
}

// acceptExisting answers a re-send: the job stored under p's key, or
// EKEYREUSED when it was stored for another body. With no job under the
// key, a refused request gets its refusal (nothing was written).
func (s *Store) acceptExisting(ctx context.Context, tx *sql.Tx, p AcceptParams, refusal error) (inkwell.Job, bool, error) {
	job, err := s.jobByKeyTx(ctx, tx, p.account(), p.IdempotencyKey)
	if refusal != nil && inkwell.ErrorCode(err) == inkwell.ENOTFOUND {
		return inkwell.Job{}, false, refusal
	}
	if err != nil {
		return inkwell.Job{}, false, fmt.Errorf("accept: load existing: %w", err)
	}
	if job.RequestHash != p.RequestHash {
		return inkwell.Job{}, false, inkwell.Errorf(inkwell.EKEYREUSED,
			"idempotency key %q was already used for a different request (job %d)", p.IdempotencyKey, job.ID)
	}
	return job, false, nil
}

// account is who pays: p.Account, or the default account.
func (p AcceptParams) account() string {
	if p.Account == "" {
		return inkwell.DefaultAccount
	}
	return p.Account
}

// admission is one accept group's view of the queue's length: read once,
// at the group's first member with a limit, from job_counts (exact, kept by
// triggers in the same transaction), then counted up by the jobs the group
// inserts. One read per group, not per request.
type admission struct {
	queued int64
	read   bool
	// budgeted is the group's accounts that have a budget, locked
	// (lockBudgetsTx); nil: not known, any may have one.
	budgeted map[string]bool
}

// mayHaveBudget is false for an account the group knows has no budget:
// its accepts reserve nothing and need not ask.
func (a *admission) mayHaveBudget(account string) bool {
	return a.budgeted == nil || a.budgeted[account]
}

// admit is admission for one request (p.MaxQueued > 0): when the queue is
// full it returns the refusal (ETOOMANY) for a new key; acceptOne answers
// a stored key with the usual re-send answer (or EKEYREUSED).
func (s *Store) admit(ctx context.Context, tx *sql.Tx, p AcceptParams, adm *admission) (refusal, err error) {
	if p.MaxQueued <= 0 {
		return nil, nil
	}
	if !adm.read {
		if err := s.txQueryRow(ctx, tx, `SELECT COALESCE(SUM(n), 0) FROM job_counts WHERE kind = 'queued'`).Scan(&adm.queued); err != nil {
			return nil, fmt.Errorf("accept: count queued jobs: %w", err)
		}
		adm.read = true
	}
	if adm.queued < int64(p.MaxQueued) {
		return nil, nil
	}
	return inkwell.Errorf(inkwell.ETOOMANY, "the queue is full (%d jobs queued, the limit is %d): nothing was stored; send the same request again later", adm.queued, p.MaxQueued), nil
}

// Claimed is a job a lane has just claimed, with its new running attempt.
type Claimed struct {
	Job     inkwell.Job
	Attempt inkwell.Attempt
	// Reserved says the job holds an open budget reservation, of
	// ReservedMicros: the most its completion may charge (chargeWithin),
	// which the lane caps at first so that every cap is logged. A job of
	// an account without a budget holds none.
	Reserved       bool
	ReservedMicros int64
}

// claimedWith is a claimed job and attempt with its open reservation as
// openReservationSQL reads it (-1: none).
func claimedWith(job inkwell.Job, a inkwell.Attempt, openReservation int64) *Claimed {
	return &Claimed{Job: job, Attempt: a, Reserved: openReservation >= 0, ReservedMicros: max(openReservation, 0)}
}

// openReservationSQL is a claimed row's open reservation in micros, -1
// when it holds none open, over the columns of table t (claimedWith).
func openReservationSQL(t string) string {
	return `CASE WHEN ` + t + `.reservation_state = 'open' THEN ` + t + `.reservation_micros ELSE -1 END`
}

// ClaimUpTo moves up to n queued jobs to running and opens the next
// attempt of each, in one transaction (one durable commit for a lane with
// n free slots). It takes them round robin across accounts: the lowest
// turns first, oldest id first within a turn (claim_fair.go); never a job
// before its not_before. It runs only under l, the lane's lock, which it
// checks first and, on PostgreSQL, carries as a fence inside the claim's
// own statement: a lock lost before the commit claims nothing
// (ELANEHELD). It returns the claims in id order, none when nothing is
// queued.
func (s *Store) ClaimUpTo(ctx context.Context, l *LaneLock, n int) ([]*Claimed, error) {
	if n < 1 {
		return nil, nil
	}
	if err := l.Check(); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	fence, err := s.lockFence(l)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	var claimed []*Claimed
	if s.dialect.claimStatement {
		claimed, err = s.claimUpToStatement(ctx, l.Lane, fence, n)
	} else {
		claimed, err = s.claimUpToTx(ctx, l.Lane, fence, n)
	}
	if err != nil || len(claimed) == 0 {
		return nil, err
	}
	hit(crashpoint.ClaimAfterCommit)
	return claimed, nil
}

// claimUpToTx is ClaimUpTo in a transaction of its own (SQLite): see
// claimTx.
func (s *Store) claimUpToTx(ctx context.Context, lane, fence string, n int) ([]*Claimed, error) {
	now := s.now()
	var claimed []*Claimed
	err := s.inTxHooks(ctx, func(tx *sql.Tx) error {
		var err error
		claimed, err = s.claimTx(ctx, tx, lane, fence, n, now)
		return err
	}, "", "")
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

// claimTx is the claim's writes in tx, in a transaction of the claim's
// own (claimUpToTx) or of an outcome group that claims the jobs its slots
// run next (outcomes.go, claimNext): the UPDATE whose subquery picks the
// jobs (claimPick: reading the jobs_queued_turn index only), the clock
// moved up to the highest turn claimed (advanceClock, claim_fair.go),
// then one INSERT that opens their attempts.
func (s *Store) claimTx(ctx context.Context, tx *sql.Tx, lane, fence string, n int, now time.Time) ([]*Claimed, error) {
	claimed, turn, err := s.claimJobs(ctx, tx, s.claimTxSQL(fence), lane, s.ts(now), n)
	if err != nil || len(claimed) == 0 {
		return nil, err
	}
	if _, err := s.txExec(ctx, tx, advanceClock, turn); err != nil {
		return nil, fmt.Errorf("claim: move the clock to turn %d: %w", turn, err)
	}
	if err := s.openAttempts(ctx, tx, claimed, lane, now); err != nil {
		return nil, err
	}
	return claimed, nil
}

// claimTxSQL is claimUpToTx's UPDATE: $1 lane, $2 now, $3 n. Each row
// ends with the job's turn, for the clock (claimJobs).
func (s *Store) claimTxSQL(fence string) string {
	return `UPDATE jobs SET status = 'running', lane = $1, started_at = $2, ` + clearOnClaim + `
		WHERE id IN (` + s.claimPick("$2") + `)
		  AND status = 'queued'` + fence + `
		RETURNING ` + jobColumns + `, claim_turn, ` + openReservationSQL("jobs")
}

// claimUpToStatement is ClaimUpTo in one statement (PostgreSQL): the
// UPDATE that claims the jobs, with the lock's fence inside it as in the
// transaction form, and the INSERT that opens each job's attempt are one
// data-modifying WITH, which runs as its own transaction and commits both
// or neither, with the turn clock's move (claimClockCTE, claim_fair.go).
// That is one round trip and one durable commit, where the transaction
// form costs a clock read, BEGIN, the UPDATE, the clock's UPDATE, the
// INSERT of the attempts and COMMIT. Every row gets one time: the database's clock, read once
// by the statement itself (the store's clock when a test injects one).
func (s *Store) claimUpToStatement(ctx context.Context, lane, fence string, n int) ([]*Claimed, error) {
	rows, err := s.cdb.QueryContext(ctx, s.claimStatementSQL(fence), lane, s.clockArg(), n)
	if err != nil {
		return nil, s.classify(fmt.Errorf("claim jobs: %w", err))
	}
	defer rows.Close()
	var claimed []*Claimed
	for rows.Next() {
		var a inkwell.Attempt
		var turn int64 // the job's turn (claimClockCTE moved the clock)
		var reservation int64
		job, err := scanJob(withExtra{rows, []any{&turn, &reservation, &a.ID, &a.AttemptNumber}})
		if err != nil {
			return nil, s.classify(fmt.Errorf("claim jobs: %w", err))
		}
		started := *job.StartedAt
		a.JobID, a.Status, a.Lane, a.StartedAt = job.ID, inkwell.StatusRunning, lane, &started
		claimed = append(claimed, claimedWith(job, a, reservation))
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify(fmt.Errorf("claim jobs: %w", err))
	}
	return claimed, nil
}

// claimStatementSQL is claimUpToStatement's statement: $1 lane, $2 the
// store's time (NULL: the database's clock), $3 n.
func (s *Store) claimStatementSQL(fence string) string {
	// picked reads the jobs_queued_turn partial index only, and locks each
	// job as it takes it (claimPick). It is a MATERIALIZED CTE, run once:
	// as "WHERE id IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)"
	// PostgreSQL may rescan the subquery per row of a nested-loop
	// semi-join, and each rescan skips the rows this statement has just
	// updated and picks the next: n = 1 claimed two jobs. The UPDATE finds
	// its rows by id = ANY (the picked ids, one array): probes of the
	// primary key, where a join with picked let the planner, misled by
	// stale statistics, read every queued job into a hash join. Its status
	// guard is written "(…) IS TRUE", which implies no partial index's
	// predicate: with "status = 'queued'" the planner, its row estimates
	// stale, took a bitmap scan of a whole queued-jobs index over the n
	// probes of the primary key.
	return `WITH now AS MATERIALIZED (SELECT COALESCE($2::timestamptz, clock_timestamp()) AS t),
	picked AS MATERIALIZED (` + s.claimPick("(SELECT t FROM now)") + `),
	job AS (
		UPDATE jobs SET status = 'running', lane = $1, started_at = (SELECT t FROM now), ` + clearOnClaim + `
		WHERE id = ANY (ARRAY(SELECT id FROM picked)) AND (status = 'queued') IS TRUE` + fence + `
		RETURNING ` + qualified("jobs", jobColumns) + `, jobs.claim_turn AS claimed_turn, ` + openReservationSQL("jobs") + ` AS open_reservation
	), ` + claimClockCTE + `, attempt AS (
		INSERT INTO job_attempts (job_id, attempt_number, status, lane, started_at)
		SELECT job.id, COALESCE((SELECT MAX(a.attempt_number) FROM job_attempts a WHERE a.job_id = job.id), 0) + 1, 'running', $1, job.started_at
		FROM job
		RETURNING job_id, id, attempt_number
	)
	SELECT job.*, attempt.id, attempt.attempt_number
	FROM job JOIN attempt ON attempt.job_id = job.id ORDER BY job.id`
}

// clearOnClaim is what a claim clears: the last failure a rescheduled job
// waited out, and its back-off.
const clearOnClaim = `error = NULL, error_class = NULL, not_before = NULL, finished_at = NULL`

// qualified prefixes each column of a column list with table.
func qualified(table, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = table + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// withExtra scans a row's leading columns with scanJob and the rest into extra.
type withExtra struct {
	row   rowScanner
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.row.Scan(append(dest, w.extra...)...) }

// claimJobs runs the claim's UPDATE and returns its claims in id order,
// each with its job and open reservation (openReservationSQL; the attempt
// is openAttempts'), and the highest turn among them.
func (s *Store) claimJobs(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]*Claimed, int64, error) {
	rows, err := s.txQuery(ctx, tx, query, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("claim jobs: %w", err)
	}
	defer rows.Close()
	var claimed []*Claimed
	var highest int64
	for rows.Next() {
		var turn, reservation int64
		job, err := scanJob(withExtra{rows, []any{&turn, &reservation}})
		if err != nil {
			return nil, 0, fmt.Errorf("claim jobs: %w", err)
		}
		claimed, highest = append(claimed, claimedWith(job, inkwell.Attempt{}, reservation)), max(highest, turn)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("claim jobs: %w", err)
	}
	slices.SortFunc(claimed, func(a, b *Claimed) int { return cmp.Compare(a.Job.ID, b.Job.ID) })
	return claimed, highest, nil
}

// openAttempts opens the next attempt of each claimed job (its highest
// number so far + 1), running, in one statement (SQLite: the ids as one
// JSON array), and sets each claim's Attempt.
func (s *Store) openAttempts(ctx context.Context, tx *sql.Tx, claimed []*Claimed, lane string, now time.Time) error {
	if len(claimed) == 0 {
		return nil
	}
	const open = `INSERT INTO job_attempts (job_id, attempt_number, status, lane, started_at)
		SELECT j.value, COALESCE((SELECT MAX(a.attempt_number) FROM job_attempts a WHERE a.job_id = j.value), 0) + 1, 'running', $1, $2
		FROM json_each($3) j
		RETURNING job_id, id, attempt_number`
	ids, byJob := make([]string, len(claimed)), make(map[int64]*Claimed, len(claimed))
	for i, c := range claimed {
		ids[i], byJob[c.Job.ID] = strconv.FormatInt(c.Job.ID, 10), c
	}
	rows, err := s.txQuery(ctx, tx, open, lane, s.ts(now), "["+strings.Join(ids, ",")+"]")
	if err != nil {
		return fmt.Errorf("claim: open attempts: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var jobID int64
		started := now
		a := inkwell.Attempt{Status: inkwell.StatusRunning, Lane: lane, StartedAt: &started}
		if err := rows.Scan(&jobID, &a.ID, &a.AttemptNumber); err != nil {
			return fmt.Errorf("claim: open attempts: %w", err)
		}
		c, ok := byJob[jobID]
		if !ok {
			return fmt.Errorf("claim: open attempts: an attempt for job %d, which was not claimed", jobID)
		}
		a.JobID = jobID
		c.Attempt = a
		n++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("claim: open attempts: %w", err)
	}
	if n != len(claimed) {
		return fmt.Errorf("claim: opened %d attempts for %d jobs", n, len(claimed))
	}
	return nil
}

// CompleteParams is what a successful provider call produced.
type CompleteParams struct {
	JobID             int64
	AttemptID         int64
	Text              string
	Account           string
	AmountMicros      int64
	ProviderRequestID string
	// The answer beside its text (docs/design.md §12): the model it ran on,
	// the chat.completion object, why it stopped, and its usage (Usage
	// false: none reported, stored as NULL).
	Model                          string
	Response                       []byte
	FinishReason                   string
	PromptTokens, CompletionTokens int64
	Usage                          bool
}

// ErrAlreadyDone is CompleteIfRunning's answer when p.AttemptID is already
// done: an earlier try of this same completion committed, though its
// answer was lost (a timeout during COMMIT). It is an ECONFLICT (nothing
// written) that the caller may count as success.
var ErrAlreadyDone = inkwell.Errorf(inkwell.ECONFLICT, "the attempt is already done: this completion had committed")

// CompleteIfRunning writes the result, the charge, attempt done and job
// done in one transaction. Fencing: only if p.AttemptID is still the
// running attempt of a running job; otherwise it writes nothing and returns
// an ECONFLICT error: ErrAlreadyDone when that attempt is done already (a
// retried completion whose first commit landed), another ECONFLICT when it
// was fenced out (a late completion after recovery closed the attempt).
//
// Outcomes of many calls in flight share one transaction and one durable
// commit (group commit, outcomes.go), each member fenced by its own attempt
// id and isolated from the others; on SQLite they go ahead of every other
// writer waiting in this process.
func (s *Store) CompleteIfRunning(ctx context.Context, p CompleteParams) error {
	_, err := s.CompleteAndClaim(ctx, p, nil)
	return err
}

// CompleteAndClaim is CompleteIfRunning for a lane's slot that will run
// another job after this one: where the claim is a transaction (SQLite),
// the completion's transaction also claims the lane's next job for the
// slot, under l, the lane's lock, as ClaimUpTo would (lowest turn, oldest
// first, never before not_before), and returns it: one durable commit for
// the completion and the claim, where it took two. next is nil when
// nothing was claimed: nothing queued, l nil or no longer held, the
// completion refused (err), or PostgreSQL, whose claim is one statement
// of its own (the lane claims with ClaimUpTo). A claimed next job is
// running under l: the caller must take it to an outcome.
func (s *Store) CompleteAndClaim(ctx context.Context, p CompleteParams, l *LaneLock) (next *Claimed, err error) {
	r := &outcomeReq{complete: &p, next: l}
	err = s.outcomes.submit(ctx, r)
	return r.claimed, err
}

// completeTx is CompleteIfRunning's writes, inside an outcome group's
// transaction.
func (s *Store) completeTx(ctx context.Context, tx *sql.Tx, p CompleteParams, now any) error {
	const doneAttempt = `UPDATE job_attempts SET status = 'done', finished_at = $1
		WHERE id = $2 AND job_id = $3 AND status = 'running'`
	const insertResult = `INSERT INTO results (job_id, attempt_id, text, created_at, response, model, finish_reason, prompt_tokens, completion_tokens)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	const insertCharge = `INSERT INTO charges (job_id, attempt_id, account, amount_micros, provider_request_id, created_at, model, prompt_tokens, completion_tokens)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	const attemptStatus = `SELECT status FROM job_attempts WHERE id = $1 AND job_id = $2`
	if err := s.execOne(ctx, tx, doneAttempt, now, p.AttemptID, p.JobID); err != nil {
		var st string
		if inkwell.ErrorCode(err) == inkwell.ECONFLICT && s.txQueryRow(ctx, tx, attemptStatus, p.AttemptID, p.JobID).Scan(&st) == nil &&
			st == inkwell.StatusDone {
			err = ErrAlreadyDone
		}
		return fmt.Errorf("complete attempt %d of job %d: %w", p.AttemptID, p.JobID, err)
	}
	r, err := scanReservation(s.txQueryRow(ctx, tx, doneJob, now, p.JobID), p.JobID)
	if inkwell.ErrorCode(err) == inkwell.ENOTFOUND {
		err = inkwell.Errorf(inkwell.ECONFLICT, "row not in the expected state (0 rows matched)")
	}
	if err != nil {
		return fmt.Errorf("complete job %d: %w", p.JobID, err)
	}
	response, model, finish, in, out := answerColumns(p)
	if _, err := s.txExec(ctx, tx, insertResult, p.JobID, p.AttemptID, p.Text, now, response, model, finish, in, out); err != nil {
		return fmt.Errorf("complete job %d: result: %w", p.JobID, s.uniqueAsConflict(err))
	}
	amount := chargeWithin(r, p.AmountMicros)
	if _, err := s.txExec(ctx, tx, insertCharge, p.JobID, p.AttemptID, p.Account, amount, p.ProviderRequestID, now, model, in, out); err != nil {
		return fmt.Errorf("complete job %d: charge: %w", p.JobID, s.uniqueAsConflict(err))
	}
	return s.settleTx(ctx, tx, r, p.Account, amount)
}

// answerColumns is a completion's answer as the columns of results and
// charges hold it: NULL where there is nothing (a legacy caller, no usage).
func answerColumns(p CompleteParams) (response, model, finish sql.NullString, in, out sql.NullInt64) {
	response = sql.NullString{String: string(p.Response), Valid: len(p.Response) > 0}
	model = sql.NullString{String: p.Model, Valid: p.Model != ""}
	finish = sql.NullString{String: p.FinishReason, Valid: p.FinishReason != ""}
	in = sql.NullInt64{Int64: p.PromptTokens, Valid: p.Usage}
	out = sql.NullInt64{Int64: p.CompletionTokens, Valid: p.Usage}
	return
}

// FailParams names the attempt that failed, why, and what becomes of its
// job: failed (the default), queued again after a back-off (RetryAt, the
// reschedule transition of docs/design.md §9), or failed because automatic retry
// gave up (GaveUpAfter).
type FailParams struct {
	JobID     int64
	AttemptID int64
	Error     string
	Class     inkwell.ErrorClass // required: what kind of failure it was
	// RetryAt, when set, puts the job back to queued, not claimed before
	// this time. Only for a class that is RetrySafe with
	// ProviderHonoursKeys; any other is refused (EINVALID), writing nothing.
	RetryAt             *time.Time
	ProviderHonoursKeys bool
	// GaveUpAfter, when > 0, says the job fails because automatic retry
	// gave up after this many attempts: the job's error says so.
	GaveUpAfter int
	// HeldBack marks an attempt the lane gave back unsent of its own doing
	// (job_attempts.held_back): its call held by its provider's limiter,
	// or its claim's answer lost on the way (worker's stranded attempts).
	// Automatic retry counts it neither as an attempt nor as a 429.
	HeldBack bool
}

// FailIfRunning moves one attempt running -> failed with its error, class
// and finished_at, and in the same transaction its job to failed, or back
// to queued with not_before (reschedule). Fencing: if p.AttemptID is no
// longer running it writes nothing and returns ECONFLICT. It shares group
// commits with completions (see CompleteIfRunning).
func (s *Store) FailIfRunning(ctx context.Context, p FailParams) error {
	_, err := s.FailAndClaim(ctx, p, nil)
	return err
}

// FailAndClaim is FailIfRunning that also claims the lane's next job for
// the slot the failure frees, as CompleteAndClaim does.
func (s *Store) FailAndClaim(ctx context.Context, p FailParams, l *LaneLock) (next *Claimed, err error) {
	if p.Error == "" {
		p.Error = "failed without a reason"
	}
	if !p.Class.Valid() {
		return nil, inkwell.Errorf(inkwell.EINVALID, "fail attempt %d: error class %q is not one of %v", p.AttemptID, p.Class, inkwell.ErrorClasses)
	}
	if p.RetryAt != nil && !p.Class.RetrySafe(p.ProviderHonoursKeys) {
		return nil, inkwell.Errorf(inkwell.EINVALID, "fail attempt %d: a %s failure is never retried automatically", p.AttemptID, p.Class)
	}
	r := &outcomeReq{fail: &p, next: l}
	err = s.outcomes.submit(ctx, r)
	return r.claimed, err
}

// failTx is FailIfRunning's writes, inside an outcome group's transaction.
func (s *Store) failTx(ctx context.Context, tx *sql.Tx, p FailParams, now any) error {
	const failAttempt = `UPDATE job_attempts SET status = 'failed', error = $1, error_class = $2, finished_at = $3, held_back = $6
		WHERE id = $4 AND job_id = $5 AND status = 'running'`
	heldBack := sql.NullBool{Bool: true, Valid: p.HeldBack} // NULL for every other attempt
	if err := s.execOne(ctx, tx, failAttempt, p.Error, string(p.Class), now, p.AttemptID, p.JobID, heldBack); err != nil {
		return fmt.Errorf("fail attempt %d of job %d: %w", p.AttemptID, p.JobID, err)
	}
	if p.RetryAt != nil {
		if err := s.execOne(ctx, tx, rescheduleJob, p.Error, string(p.Class), s.ts(*p.RetryAt), p.JobID); err != nil {
			return fmt.Errorf("reschedule job %d: %w", p.JobID, err)
		}
		return nil
	}
	jobErr, gaveUp := p.Error, sql.NullInt64{}
	if p.GaveUpAfter > 0 {
		jobErr = fmt.Sprintf("gave up after %d attempts: %s", p.GaveUpAfter, p.Error)
		gaveUp = sql.NullInt64{Int64: int64(p.GaveUpAfter), Valid: true}
	}
	if err := s.execOne(ctx, tx, failJob, jobErr, string(p.Class), now, gaveUp, p.JobID); err != nil {
		return fmt.Errorf("fail job %d: %w", p.JobID, err)
	}
	return s.releaseIfUnbilledTx(ctx, tx, p.JobID)
}

// RetryIfFailed moves a failed job back to queued, clearing its error,
// class and times; its attempts are untouched, and the next claim opens a
// new one. by names who asked (ActorCLI, ActorToken(id), …): it goes into
// audit_log in the same transaction. It returns ENOTFOUND for no such job
// and ECONFLICT when it is not failed, or was pruned (its prompt is gone).
// A job whose budget reservation was released reserves it again, or is
// refused (EBUDGET). A refusal writes nothing, audit_log included.
func (s *Store) RetryIfFailed(ctx context.Context, jobID int64, by string) (inkwell.Job, error) {
	var job inkwell.Job
	// Read before the transaction: on PostgreSQL the clock is a query on
	// the pool, and retries waiting for the account's row each hold a
	// connection; one that held the row and asked for a connection of its
	// own would wait for them, and they for it, until the pool's timeout.
	now := s.nowTS()
	err := s.inTxHooks(ctx, func(tx *sql.Tx) error {
		// The account's row first, as a release and a cancel take it
		// (budgets.go, lock order): else, on PostgreSQL, a release that
		// commits between this retry's read of the reservation (open: no
		// need to reserve again) and its update queues a job that holds
		// no reservation.
		if err := s.lockAccountsTx(ctx, tx, nil, []int64{jobID}); err != nil {
			return err
		}
		cur, err := s.jobTx(ctx, tx, jobID)
		if err != nil {
			return err
		}
		if cur.Status != inkwell.StatusFailed {
			return inkwell.Errorf(inkwell.ECONFLICT, "job %d is %s; only a failed job can be retried", jobID, cur.Status)
		}
		if cur.PrunedAt != nil {
			return inkwell.Errorf(inkwell.ECONFLICT, "job %d was pruned by retention: its prompt is gone, so it cannot run again; submit it anew under a new key", jobID)
		}
		if err := s.reserveAgainTx(ctx, tx, jobID); err != nil {
			return err
		}
		if err := s.execOne(ctx, tx, retryJob, jobID); err != nil {
			return fmt.Errorf("retry job %d: %w", jobID, err)
		}
		if err := s.auditTx(ctx, tx, now, by, AuditRetry, jobID, "was failed, class "+string(cur.ErrorClass)+": "+cur.Error); err != nil {
			return err
		}
		job, err = s.jobTx(ctx, tx, jobID)
		return err
	}, "", crashpoint.RetryAfterCommit)
	return job, err
}

// Cancelled is what a cancel did.
type Cancelled struct {
	Job inkwell.Job
	// Attempt is the running attempt the cancel closed (0 when the job was
	// queued, or already cancelled): a lane running its provider call
	// should abort it; its completion would be fenced out anyway.
	Attempt int64
}

// Cancel moves a queued or running job to failed, class cancelled, with
// its running attempt, in one transaction (docs/design.md §9). by names who
// asked, for the error text and for audit_log, written in the same
// transaction. A job already cancelled is answered as it is
// (a re-sent cancel). A done job, or one failed for another reason, is
// ECONFLICT and the returned Job says what it is: a completion that
// committed first wins. ENOTFOUND for no such job.
func (s *Store) Cancel(ctx context.Context, jobID int64, by string) (Cancelled, error) {
	// The job's status is read, then written under a guard on that status:
	// on PostgreSQL a claim or a reschedule may commit in between, and the
	// guard then matches nothing. The job is still cancellable: try again
	// on what it is now. A completion that won ends it (conflict, done).
	for try := 1; ; try++ {
		out, err := s.cancelOnce(ctx, jobID, by)
		if inkwell.ErrorCode(err) != inkwell.ECONFLICT || try == 3 ||
			(out.Job.Status != inkwell.StatusQueued && out.Job.Status != inkwell.StatusRunning) {
			return out, err
		}
	}
}

func (s *Store) cancelOnce(ctx context.Context, jobID int64, by string) (Cancelled, error) {
	const cancelAttempt = `UPDATE job_attempts SET status = 'failed', error = $1, error_class = 'cancelled', finished_at = $2
		WHERE job_id = $3 AND status = 'running'
		RETURNING id`
	// A job cancelled while queued gives its turn back (claim_fair.go):
	// it was never served.
	const cancelJob = `UPDATE jobs SET status = 'failed', error = $1, error_class = 'cancelled', finished_at = $2, not_before = NULL,
			claim_turn = CASE WHEN status = 'queued' THEN 0 ELSE claim_turn END
		WHERE id = $3 AND status = $4`
	var out Cancelled
	now := s.now()
	err := s.inTxHooks(ctx, func(tx *sql.Tx) error {
		if err := s.lockAccountsTx(ctx, tx, nil, []int64{jobID}); err != nil { // lock order: budgets.go
			return err
		}
		cur, err := s.jobTx(ctx, tx, jobID)
		if err != nil {
			return err
		}
		out = Cancelled{Job: cur}
		switch {
		case cur.Status == inkwell.StatusFailed && cur.ErrorClass == inkwell.ClassCancelled:
			return nil
		case cur.Status != inkwell.StatusQueued && cur.Status != inkwell.StatusRunning:
			return inkwell.Errorf(inkwell.ECONFLICT, "job %d is %s; only a queued or running job can be cancelled", jobID, cur.Status)
		}
		msg := "cancelled by " + by
		if cur.Status == inkwell.StatusRunning {
			msg += " while its provider call was in flight: the provider may have billed it"
			err := s.txQueryRow(ctx, tx, cancelAttempt, msg, s.ts(now), jobID).Scan(&out.Attempt)
			if errors.Is(err, sql.ErrNoRows) { // its completion won, or a legacy job recovery must close
				return inkwell.Errorf(inkwell.ECONFLICT, "job %d has no running attempt to cancel", jobID)
			}
			if err != nil {
				return fmt.Errorf("cancel job %d: its running attempt: %w", jobID, err)
			}
		}
		if err := s.execOne(ctx, tx, cancelJob, msg, s.ts(now), jobID, cur.Status); err != nil {
			return fmt.Errorf("cancel job %d: %w", jobID, err)
		}
		if err := s.notifyEnded(ctx, tx, []int64{jobID}); err != nil {
			return err
		}
		if err := s.releaseIfUnbilledTx(ctx, tx, jobID); err != nil {
			return err
		}
		if err := s.auditTx(ctx, tx, s.ts(now), by, AuditCancel, jobID, "was "+cur.Status); err != nil {
			return err
		}
		out.Job, err = s.jobTx(ctx, tx, jobID)
		return err
	}, "", crashpoint.CancelAfterCommit)
	if inkwell.ErrorCode(err) == inkwell.ECONFLICT {
		// A completion or another transition won the race: say what the
		// job is now.
		if cur, rerr := s.Job(ctx, jobID); rerr == nil {
			out.Job = cur
		}
	}
	return out, err
}

// uniqueAsConflict turns a unique violation into ECONFLICT: a second
// result or charge for one job is refused, never written.
func (s *Store) uniqueAsConflict(err error) error {
	if isUniqueViolation(err) {
		return fmt.Errorf("%w: %w", inkwell.Errorf(inkwell.ECONFLICT, "job already has one"), err)
	}
	return err
}
