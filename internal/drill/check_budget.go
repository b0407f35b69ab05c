package drill

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// Budgets (docs/design.md §10): at every snapshot, whatever instant serve died,
// each account's books add up and its budget holds.
const (
	InvBudgetHeld     = "§10 an account's charges plus its open reservations never exceed its budget"
	InvReservedSum    = "§10 an account with a budget has reserved_micros the sum of its jobs' open reservations, and spent_micros the sum of its charges"
	InvNoReservedDone = "§10 no reservation is left open on a done job"
	InvBudgetRefused  = "§10 a request its account's budget cannot cover is answered 402 budget_exceeded and writes nothing"
	InvChargeReserved = "§10 no job is charged more than it reserved"
)

// budgetsFrom is the schema version from which jobs carry reservations.
const budgetsFrom = 9

// DrillBudgetMicros is the budget the drill gives each account its clients
// submit for (5.00): far more than a scenario's workload can reserve, so
// that every job still runs, and finite, so that the books are kept and
// checked. It never binds; the budget-full scenario (inflight_budget.go)
// gives its account one that does.
const DrillBudgetMicros = 5_000_000

// AccountRow is one row of accounts.
type AccountRow struct {
	Name                        string
	BudgetMicros                sql.NullInt64
	ReservedMicros, SpentMicros int64
}

// ReservationRow is one job's reservation (jobs.reservation_*), for the
// jobs that have one.
type ReservationRow struct {
	JobID   int64
	Micros  int64
	Account string
	State   string
}

const (
	qAccounts     = `SELECT name, budget_micros, reserved_micros, spent_micros FROM accounts ORDER BY name`
	qReservations = `SELECT id, reservation_micros, reservation_account, reservation_state FROM jobs
		WHERE reservation_state IS NOT NULL ORDER BY id`
)

// readBudgets reads the accounts and the reservations, from schema 9 on.
func readBudgets(ctx context.Context, tx *sql.Tx, s *Snapshot) error {
	var version int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	if version < budgetsFrom {
		return nil
	}
	err := each(ctx, tx, qAccounts, func(rows *sql.Rows) error {
		var a AccountRow
		err := rows.Scan(&a.Name, &a.BudgetMicros, &a.ReservedMicros, &a.SpentMicros)
		s.Accounts = append(s.Accounts, a)
		return err
	})
	if err != nil {
		return err
	}
	return each(ctx, tx, qReservations, func(rows *sql.Rows) error {
		var r ReservationRow
		err := rows.Scan(&r.JobID, &r.Micros, &r.Account, &r.State)
		s.Reservations = append(s.Reservations, r)
		return err
	})
}

// budgets checks the books of every account on one snapshot.
func (c *checker) budgets() {
	status := map[int64]string{}
	for _, j := range c.snap.Jobs {
		status[j.ID] = j.Status
	}
	open := map[string]int64{}
	for _, r := range c.snap.Reservations {
		if r.State != store.ReservationOpen {
			continue
		}
		open[r.Account] += r.Micros
		if status[r.JobID] == inkwell.StatusDone {
			c.add(r.JobID, InvNoReservedDone, "job is done but still holds an open reservation of %d micros on account %s", r.Micros, r.Account)
		}
	}
	reserved := map[int64]ReservationRow{}
	for _, r := range c.snap.Reservations {
		reserved[r.JobID] = r
	}
	charged := map[string]int64{}
	for _, ch := range c.snap.Charges {
		charged[ch.Account] += ch.AmountMicros
		if r, ok := reserved[ch.JobID]; ok && r.State == store.ReservationSettled && ch.AmountMicros > r.Micros {
			c.add(ch.JobID, InvChargeReserved, "charged %d micros on a reservation of %d", ch.AmountMicros, r.Micros)
		}
	}
	for _, a := range c.snap.Accounts {
		if !a.BudgetMicros.Valid {
			continue // an account without a budget keeps no books
		}
		if a.ReservedMicros != open[a.Name] || a.SpentMicros != charged[a.Name] {
			c.add(0, InvReservedSum, "account %s: reserved_micros %d, open reservations %d; spent_micros %d, charges %d",
				a.Name, a.ReservedMicros, open[a.Name], a.SpentMicros, charged[a.Name])
		}
		if charged[a.Name]+open[a.Name] > a.BudgetMicros.Int64 {
			c.add(0, InvBudgetHeld, "account %s: charges %d + open reservations %d = %d micros, over its budget of %d",
				a.Name, charged[a.Name], open[a.Name], charged[a.Name]+open[a.Name], a.BudgetMicros.Int64)
		}
	}
}

// overBudget checks, at the end, each key a client sent knowing its
// account's budget could not cover it (item.overBudget): every answer
// was 402 budget_exceeded, one came at least, and no job holds the key.
// An answer lost with the connection proves nothing either way; the job
// it might have made would be in the database.
func (c *checker) overBudget(e Evidence) {
	for _, key := range e.OverBudget {
		answered := 0
		for _, s := range e.Requests {
			if s.Key != key || s.Path != pathJobs || s.Status == 0 {
				continue
			}
			answered++
			if s.Status != http.StatusPaymentRequired || s.Detail != inkwell.EBUDGET {
				c.add(s.JobID, InvBudgetRefused, "request #%d with key %q, past its account's budget, was answered %s; want refused 402 %s", s.Seq, key, s, inkwell.EBUDGET)
			}
		}
		if answered == 0 {
			c.add(0, InvBudgetRefused, "no request with key %q, past its account's budget, was answered", key)
		}
		if j, ok := c.snap.jobByKey(key); ok {
			c.add(j.ID, InvBudgetRefused, "key %q is past its account's budget, yet the database holds job %d for it", key, j.ID)
		}
	}
}

// giveBudgets creates the accounts the drill's clients submit for, each
// with budget micros, in the scenario's fresh database (migrating it).
func giveBudgets(ctx context.Context, dsn string, budget int64, accounts ...string) error {
	st, err := store.Open(ctx, dsn, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("give budgets: %w", err)
	}
	defer st.Close()
	for _, name := range accounts {
		if _, err := st.CreateAccount(ctx, store.Account{Name: name, BudgetMicros: &budget}); err != nil {
			return fmt.Errorf("give budgets: %w", err)
		}
	}
	return nil
}
