package drill

import (
	"fmt"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// The budget-full scenario (docs/design.md §10): the in-flight family's
// scenario at a point between the provider's answer and the completion
// commit, on an account whose budget is exactly the worst-case cost of its
// calls in flight, so that the budget binds where a crash could break it.
// Each accept of the fill reserves its job's worst case and the last one
// fills the budget; the request sent after them (the trigger) cannot be
// covered and must be refused 402 budget_exceeded, writing nothing. Serve
// then dies with a billed answer not stored and the other calls in
// flight. Recovery fails the orphans and leaves their reservations open
// (they may have been billed); the client's retries run under those
// reservations without reserving again, and each completion turns its
// reservation into its charge, which is less. The §10 invariants are
// checked at every read as in every scenario; here they are tested where
// the budget is full.

// budgetScenario is the in-flight family's scenario at point with n calls
// in flight, on an account whose budget is exactly what their accepts
// reserve, and a request after them that it cannot cover.
func budgetScenario(point string, n int, lim limits) scenario {
	sc := inFlightScenario(point, n, lim)
	sc.name = fmt.Sprintf("in flight, budget full: %s:%d", point, sc.hit)
	sc.trigger = triggerOverBudget
	cat := drillCatalog()
	for _, it := range sc.inFlightItems(nil) {
		if !it.overBudget {
			sc.budget += worstCase(cat, it) // per model: drill-claude's is Model.WorstCase
		}
	}
	sc.about = aboutBudget(point, n, sc.budget)
	return sc
}

// expectOverBudget is the one path of a request its account's budget
// cannot cover: refused, it writes nothing, and nothing ever runs for it.
func expectOverBudget() []path {
	none := state{noJob, "none", "0 / 0"}
	return []path{{none, none, none}}
}

// aboutBudget says, for the report, what the budget-full scenario at point
// does and what the drill expects of it.
func aboutBudget(point string, n int, budget int64) string {
	return aboutInFlight(point, n) + " " +
		fmt.Sprintf("Here the account's budget is %s: exactly the worst-case cost of the %d calls, which their accepts reserve, so the budget is full. ", store.Amount(budget), n) +
		fmt.Sprintf("A %s request, sent once the calls are in flight, cannot be covered: it must be answered 402 `%s` and write nothing. ", ordinal(n+1), inkwell.EBUDGET) +
		"Recovery leaves the orphans' reservations open (they may have been billed); the retries run under them without reserving again, and each completion turns its reservation into its charge. " +
		"At every read the account's charges plus its open reservations stay within the budget, and no done job keeps a reservation."
}

// booksOf sums, on s, the charges and the open reservations (the rows,
// as InvBudgetHeld adds them) of the accounts with a budget, for the
// report.
func booksOf(s Snapshot) (charged, open int64) {
	budgeted := map[string]bool{}
	for _, a := range s.Accounts {
		budgeted[a.Name] = a.BudgetMicros.Valid
	}
	for _, ch := range s.Charges {
		if budgeted[ch.Account] {
			charged += ch.AmountMicros
		}
	}
	for _, r := range s.Reservations {
		if budgeted[r.Account] && r.State == store.ReservationOpen {
			open += r.Micros
		}
	}
	return charged, open
}
