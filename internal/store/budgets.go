package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/inkwell/inkwell"
)

// Budgets (docs/design.md §10): this file owns every write of a job's
// reservation and of an account's reserved and spent sums; the transitions
// call it in their own transactions, and each close is guarded so it
// happens once. The rules, and why only accounts with a budget are locked:
// docs/operations.md, "Budgets and per-account rpm".

// Reservation states, as stored in jobs.reservation_state.
const (
	ReservationOpen     = "open"     // counted in accounts.reserved_micros
	ReservationSettled  = "settled"  // the completion turned it into the charge
	ReservationReleased = "released" // nothing was billed, or an operator closed it
)

// Reservation is one job's budget reservation.
type Reservation struct {
	JobID   int64
	Micros  int64
	Account string
	// State is one of the Reservation* states, or "" when the job holds
	// none: accepted before budgets existed (migration 9), or for an
	// account that has no accounts row.
	State string
}

// AccountChange is what UpdateAccount changes; nil fields stay as they are.
type AccountChange struct {
	BudgetMicros *int64
	NoBudget     bool // remove the budget (budget_micros NULL)
	RPM          *int
}

// notBilledSQL lists the classes of inkwell.ErrorClass.NotBilled as a SQL list.
var notBilledSQL = func() string {
	var q []string
	for _, c := range inkwell.ErrorClasses {
		if c.NotBilled() {
			q = append(q, "'"+string(c)+"'")
		}
	}
	return strings.Join(q, ", ")
}()

// Lock order (PostgreSQL). A transaction that changes an account's sums
// takes that account's row lock before it changes any job (whose
// statement triggers lock job_counts rows): accept groups, outcome groups
// and cancels call lockAccountsTx first, and retry reserves before it
// moves the job. With every writer taking accounts first, in name order,
// an accept (account, then job_counts) and a cancel or an outcome group
// (job_counts, then account) can never wait for each other in a cycle.
// SQLite has one writer at a time and needs none of it.

// lockBudgetsSQL locks, in name order, the budgeted accounts among those
// named by the text[] names and those of the open reservations of the
// bigint[] jobs (PostgreSQL; the lock order above). lockAccountsTx runs
// it; completeAloneSQL runs it as its first CTE. Each job is looked up by
// primary key, one probe per id: "(…) IS TRUE" implies no partial index's
// predicate (with "reservation_state = 'open'" a kept plan read the whole
// of jobs_reservation_open, every open reservation), and "id = ANY(…)"
// let a plan kept on the shared pool, made on a nearly empty table, read
// all of jobs.
func lockBudgetsSQL(names, jobs string) string {
	return `SELECT name FROM accounts
		WHERE (name = ANY(` + names + `::text[])
		       OR name IN (SELECT (SELECT j.reservation_account FROM jobs j WHERE j.id = w.id AND (j.reservation_state = 'open') IS TRUE)
		                   FROM unnest(` + jobs + `::bigint[]) AS w(id)))
		  AND budget_micros IS NOT NULL
		ORDER BY name FOR UPDATE`
}

// closeReservation closes job $1's open reservation as $2 (settled or
// released), found by primary key (the "IS TRUE" of doneJob).
const closeReservation = `UPDATE jobs SET reservation_state = $2 WHERE id = $1 AND (reservation_state = 'open') IS TRUE`

// lockAccountsTx takes the row locks of the accounts named, and of the
// accounts of the open reservations of jobs, in name order.
func (s *Store) lockAccountsTx(ctx context.Context, tx *sql.Tx, names []string, jobs []int64) error {
	if s.dialect.oneWriter || (len(names) == 0 && len(jobs) == 0) {
		return nil
	}
	lock := lockBudgetsSQL("$1", "$2")
	if names == nil {
		names = []string{}
	}
	if jobs == nil {
		jobs = []int64{}
	}
	rows, err := tx.QueryContext(ctx, lock, names, jobs)
	if err != nil {
		return fmt.Errorf("lock accounts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("lock accounts: %w", err)
	}
	return nil
}

// budgetedTx is which of the accounts named have a budget, read once for
// an accept group on SQLite, whose transaction holds the one write lock:
// nothing changes an account before it commits. A member paying from an
// account without a budget then skips reserveTx, two statements (its
// UPDATE matches no row, then the read that tells "no budget" from "not
// enough"): an eighth of the writer's time per accept. One probe per
// distinct account. PostgreSQL learns the same as it locks them
// (lockAndCountSQL).
func (s *Store) budgetedTx(ctx context.Context, tx *sql.Tx, names []string) (map[string]bool, error) {
	budgeted := make(map[string]bool, 1)
	seen := make(map[string]bool, 1)
	for _, name := range names {
		if seen[name] {
			continue
		}
		seen[name] = true
		var has bool
		err := s.txQueryRow(ctx, tx, `SELECT budget_micros IS NOT NULL FROM accounts WHERE name = $1`, name).Scan(&has)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("read whether account %q has a budget: %w", name, err)
		}
		budgeted[name] = has
	}
	return budgeted, nil
}

// reserveTx reserves micros on account for a new job. held is false when
// nothing was reserved because the account has no budget (or no row).
// A budget that cannot cover it is refusal (EBUDGET), with nothing written.
// The conditional UPDATE is the whole check: on PostgreSQL it takes the
// account row's lock, so concurrent accepts from several processes are
// counted one after the other and never overshoot.
func (s *Store) reserveTx(ctx context.Context, tx *sql.Tx, account string, micros int64) (held bool, refusal, err error) {
	if account == "" {
		return false, nil, nil
	}
	const reserve = `UPDATE accounts SET reserved_micros = reserved_micros + $2
		WHERE name = $1 AND budget_micros IS NOT NULL AND spent_micros + reserved_micros + $2 <= budget_micros`
	n, err := s.exec(ctx, tx, reserve, account, micros)
	if err != nil {
		return false, nil, fmt.Errorf("reserve budget of account %q: %w", account, err)
	}
	if n == 1 {
		return true, nil, nil
	}
	var budget sql.NullInt64
	var reserved, spent int64
	err = s.txQueryRow(ctx, tx, `SELECT budget_micros, reserved_micros, spent_micros FROM accounts WHERE name = $1`, account).
		Scan(&budget, &reserved, &spent)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !budget.Valid) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("read budget of account %q: %w", account, err)
	}
	return false, inkwell.Errorf(inkwell.EBUDGET,
		"account %q has a budget of %s, of which %s is spent and %s is reserved by unfinished jobs; this job may cost up to %s: nothing was stored (raise the budget with 'inkwell accounts set %s --budget AMOUNT')",
		account, Amount(budget.Int64), Amount(spent), Amount(reserved), Amount(micros), account), nil
}

// unreserveTx gives back what reserveTx took for a request that turned out
// to be a re-send (its key was stored after all).
func (s *Store) unreserveTx(ctx context.Context, tx *sql.Tx, account string, micros int64) error {
	if _, err := s.txExec(ctx, tx, `UPDATE accounts SET reserved_micros = reserved_micros - $2 WHERE name = $1`, account, micros); err != nil {
		return fmt.Errorf("give back the reservation of a re-send: %w", err)
	}
	return nil
}

// reservationColumns are a job's reservation, as scanReservation reads them.
const reservationColumns = `reservation_micros, reservation_account, reservation_state`

const reservationQuery = `SELECT ` + reservationColumns + ` FROM jobs WHERE id = $1`

// settleOnDone is the completion's part of its job UPDATE: an open
// reservation becomes settled. A running job's reservation is open, or
// none (or released, when a retry found no account row to reserve on), so
// a job the completion returns as settled was open until this statement.
const settleOnDone = `reservation_state = CASE WHEN reservation_state = 'open' THEN 'settled' ELSE reservation_state END`

// reservationTx reads job's reservation.
func (s *Store) reservationTx(ctx context.Context, tx *sql.Tx, jobID int64) (Reservation, error) {
	return scanReservation(s.txQueryRow(ctx, tx, reservationQuery, jobID), jobID)
}

func scanReservation(row rowScanner, jobID int64) (Reservation, error) {
	r := Reservation{JobID: jobID}
	var account, state sql.NullString
	if err := row.Scan(&r.Micros, &account, &state); err != nil {
		return r, notFound(err, "job %d", jobID)
	}
	r.Account, r.State = account.String, state.String
	return r, nil
}

// closeReservationTx moves an open reservation to state (settled or
// released) and takes it off its account's reserved_micros. A reservation
// not open is left alone: closing is idempotent.
func (s *Store) closeReservationTx(ctx context.Context, tx *sql.Tx, r Reservation, state string) error {
	if r.State != ReservationOpen {
		return nil
	}
	const unreserve = `UPDATE accounts SET reserved_micros = reserved_micros - $2 WHERE name = $1 AND budget_micros IS NOT NULL`
	n, err := s.exec(ctx, tx, closeReservation, r.JobID, state)
	if err != nil {
		return fmt.Errorf("close reservation of job %d: %w", r.JobID, err)
	}
	if n == 0 {
		return nil
	}
	if _, err := s.txExec(ctx, tx, unreserve, r.Account, r.Micros); err != nil {
		return fmt.Errorf("close reservation of job %d: account %q: %w", r.JobID, r.Account, err)
	}
	return nil
}

// chargeWithin is what a completion charges for amount when its job's
// reservation r has just been settled by it: never more than was
// reserved, so an account's charges and open reservations stay within its
// budget whatever the answer reported or the prices became after the
// accept (the worker caps the charge at the worst case at today's prices;
// this is the cap at the accept's). A job without a reservation (its
// account has no budget) is charged amount. chargedSQL is the same rule
// in PostgreSQL's completion statement.
func chargeWithin(r Reservation, amount int64) int64 {
	if r.State == ReservationSettled && amount > r.Micros {
		return r.Micros
	}
	return amount
}

// chargedSQL is chargeWithin in completeSetSQL, over its CTEs input (i)
// and job, whose reservation_state 'settled' is the one that statement
// settled (a running job's reservation is open or none).
const chargedSQL = `CASE WHEN job.reservation_state = 'settled' THEN LEAST(i.amount, job.reservation_micros) ELSE i.amount END`

// settleTx is the rest of the completion's part, after its job UPDATE
// settled r (settleOnDone): the reservation becomes the charge on the
// account (reserved -= reservation, spent += amount), in one UPDATE when
// both are the same account.
func (s *Store) settleTx(ctx context.Context, tx *sql.Tx, r Reservation, account string, amount int64) error {
	const settle = `UPDATE accounts SET reserved_micros = reserved_micros - $2, spent_micros = spent_micros + $3
		WHERE name = $1 AND budget_micros IS NOT NULL`
	if r.State == ReservationSettled && r.Account != account {
		if _, err := s.txExec(ctx, tx, settle, r.Account, r.Micros, 0); err != nil {
			return fmt.Errorf("complete job %d: settle on account %q: %w", r.JobID, r.Account, err)
		}
		r.Micros = 0
	}
	if r.State != ReservationSettled {
		r.Micros = 0
	}
	if _, err := s.txExec(ctx, tx, settle, account, r.Micros, amount); err != nil {
		return fmt.Errorf("complete job %d: settle on account %q: %w", r.JobID, account, err)
	}
	return nil
}

// releaseIfUnbilledTx is the part of fail (for good) and cancel: a job that
// has now failed releases its reservation when every one of its attempts
// failed with a class whose evidence says nothing was billed (a job
// cancelled before any attempt has none, and releases). Otherwise the
// provider may have billed: the reservation stays open until an operator
// closes it (ReleaseReservation) or a retry completes it.
func (s *Store) releaseIfUnbilledTx(ctx context.Context, tx *sql.Tx, jobID int64) error {
	r, err := s.reservationTx(ctx, tx, jobID)
	if err != nil || r.State != ReservationOpen {
		return err
	}
	mayBeBilled := `SELECT COUNT(*) FROM job_attempts WHERE job_id = $1 AND (error_class IS NULL OR error_class NOT IN (` + notBilledSQL + `))`
	var n int64
	if err := s.txQueryRow(ctx, tx, mayBeBilled, jobID).Scan(&n); err != nil {
		return fmt.Errorf("job %d: read its attempts' classes: %w", jobID, err)
	}
	if n > 0 {
		return nil
	}
	return s.closeReservationTx(ctx, tx, r, ReservationReleased)
}

// reserveAgainTx is retry's part: a job whose reservation was released
// reserves it again before it may run, or the retry is refused (EBUDGET,
// nothing written). An open reservation (a job that may have been billed)
// is kept as it is, never taken twice; a job with none takes none.
func (s *Store) reserveAgainTx(ctx context.Context, tx *sql.Tx, jobID int64) error {
	r, err := s.reservationTx(ctx, tx, jobID)
	if err != nil || r.State != ReservationReleased {
		return err
	}
	held, refusal, err := s.reserveTx(ctx, tx, r.Account, r.Micros)
	switch {
	case err != nil:
		return err
	case refusal != nil:
		return fmt.Errorf("retry job %d: %w", jobID, refusal)
	case !held:
		return nil
	}
	return s.execOne(ctx, tx, `UPDATE jobs SET reservation_state = 'open' WHERE id = $1 AND reservation_state = 'released'`, jobID)
}

// Reservation returns job's budget reservation (ENOTFOUND for no job).
func (s *Store) Reservation(ctx context.Context, jobID int64) (Reservation, error) {
	r, err := scanReservation(s.rdb.QueryRowContext(ctx, s.dialect.rebind(reservationQuery), jobID), jobID)
	return r, s.classify(err)
}

// ReleaseReservation is an operator closing the open reservation of a
// failed job that may have been billed (inkwell accounts release JOB): the
// operator has checked with the provider, or accepts the risk. Only a
// failed job's: a queued or running job may still spend (ECONFLICT); a
// done job's was settled. A job with no open reservation is answered as it
// is, writing nothing (a repeated release). A later retry reserves again.
func (s *Store) ReleaseReservation(ctx context.Context, jobID int64) (Reservation, error) {
	var r Reservation
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := s.lockAccountsTx(ctx, tx, nil, []int64{jobID}); err != nil {
			return err
		}
		job, err := s.jobTx(ctx, tx, jobID)
		if err != nil {
			return err
		}
		if r, err = s.reservationTx(ctx, tx, jobID); err != nil || r.State != ReservationOpen {
			return err
		}
		if job.Status != inkwell.StatusFailed {
			return inkwell.Errorf(inkwell.ECONFLICT, "job %d is %s: only a failed job's reservation can be released (a queued or running job may still spend it)", jobID, job.Status)
		}
		if err := s.closeReservationTx(ctx, tx, r, ReservationReleased); err != nil {
			return err
		}
		r.State = ReservationReleased
		return nil
	})
	return r, err
}

// UpdateAccount changes an account's budget and rpm (inkwell accounts
// set). A budget below what is spent and reserved already is allowed: the
// jobs already accepted keep their reservations, and new ones are refused
// until the account is back under it. Bad input is EINVALID and writes
// nothing; ENOTFOUND for no such account.
func (s *Store) UpdateAccount(ctx context.Context, name string, c AccountChange) (Account, error) {
	switch {
	case c.BudgetMicros != nil && *c.BudgetMicros < 0:
		return Account{}, inkwell.Errorf(inkwell.EINVALID, "budget must not be negative")
	case c.BudgetMicros != nil && c.NoBudget:
		return Account{}, inkwell.Errorf(inkwell.EINVALID, "give a budget or remove it, not both")
	case c.RPM != nil && *c.RPM < 0:
		return Account{}, inkwell.Errorf(inkwell.EINVALID, "rpm must not be negative (0: no limit)")
	case c.BudgetMicros == nil && !c.NoBudget && c.RPM == nil:
		return Account{}, inkwell.Errorf(inkwell.EINVALID, "nothing to change: give a budget, no budget, or an rpm")
	}
	// A budget counts the account's books from the rows, after taking its
	// row's lock in a statement of its own: writers for an account with a
	// budget lock it first, so the sums (read by the next statement, which
	// sees every commit before it) are exact. Writers for an account
	// without one take no lock: a job of it that completes in the same
	// instant may be missed (docs/operations.md).
	const lockOne = `SELECT name FROM accounts WHERE name = $1` + ` FOR UPDATE`
	const setBudget = `UPDATE accounts SET budget_micros = $2,
			spent_micros = (SELECT COALESCE(SUM(amount_micros), 0) FROM charges WHERE account = $1),
			reserved_micros = (SELECT COALESCE(SUM(reservation_micros), 0) FROM jobs WHERE reservation_account = $1 AND reservation_state = 'open')
		WHERE name = $1`
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if c.BudgetMicros != nil {
			lock := lockOne
			if s.dialect.oneWriter {
				lock = `SELECT name FROM accounts WHERE name = $1`
			}
			var got string
			if err := s.txQueryRow(ctx, tx, lock, name).Scan(&got); err != nil {
				return notFoundAccount(notFound(err, "account %q", name), name)
			}
			if err := s.execOne(ctx, tx, setBudget, name, *c.BudgetMicros); err != nil {
				return notFoundAccount(err, name)
			}
		}
		if c.NoBudget {
			if err := s.execOne(ctx, tx, `UPDATE accounts SET budget_micros = NULL WHERE name = $1`, name); err != nil {
				return notFoundAccount(err, name)
			}
		}
		if c.RPM != nil {
			if err := s.execOne(ctx, tx, `UPDATE accounts SET rpm = $2 WHERE name = $1`, name, *c.RPM); err != nil {
				return notFoundAccount(err, name)
			}
		}
		return nil
	})
	if err != nil {
		return Account{}, err
	}
	return s.Account(ctx, name)
}

func notFoundAccount(err error, name string) error {
	if code := inkwell.ErrorCode(err); code == inkwell.ECONFLICT || code == inkwell.ENOTFOUND {
		return inkwell.Errorf(inkwell.ENOTFOUND, "no account %q (add it with 'inkwell accounts add %s')", name, name)
	}
	return err
}

// Amount writes micros in currency units with six decimals (12.500000).
func Amount(micros int64) string {
	return fmt.Sprintf("%d.%06d", micros/1_000_000, micros%1_000_000)
}
