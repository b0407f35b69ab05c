package drill

import (
	"fmt"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// The budget-full scenario (docs/design.md §10): the in-flight one at a
// point between the answer and the completion commit, on an account whose
// budget its calls fill, so the books are checked where the budget binds.

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
