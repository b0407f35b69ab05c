package drill

import (
	"testing"

	"github.com/inkwell/inkwell/internal/crashpoint"
)

// TestBudgetScenario: the budget-full scenario's budget is exactly what
// its calls reserve, so that its last accept fills it and the request
// after them cannot fit; and it plays on its own database and keys.
func TestBudgetScenario(t *testing.T) {
	t.Parallel()
	lim := Config{}.limits()
	sc := budgetScenario(crashpoint.ProviderAfterCall, inFlightCalls, lim)
	family := inFlightScenario(crashpoint.ProviderAfterCall, inFlightCalls, lim)
	if sc.slug() == family.slug() {
		t.Errorf("slug %q is the family's scenario's too", sc.slug())
	}
	var reserved int64
	var over []item
	for _, it := range sc.inFlightItems(nil) {
		if it.overBudget {
			over = append(over, it)
			continue
		}
		reserved += worstCase(it.req)
	}
	if reserved != sc.budget || reserved == 0 {
		t.Errorf("budget %d, the calls reserve %d; want the same", sc.budget, reserved)
	}
	if len(over) != 1 || worstCase(over[0].req) <= 0 {
		t.Fatalf("over-budget items %v; want the trigger, with a cost", over)
	}
	if len(sc.runs) == 0 || sc.runs[0].crashAt != crashpoint.ProviderAfterCall+":1" {
		t.Errorf("runs %+v; want serve to die at the first answer", sc.runs)
	}
}
