package drill

import (
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/inkwell/inkwell/internal/provider"
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
	cat := drillCatalog()
	var reserved int64
	var over []item
	var claude int
	for _, it := range sc.inFlightItems(nil) {
		if it.overBudget {
			over = append(over, it)
			continue
		}
		reserved += worstCase(cat, it)
		if it.model == modelClaude {
			claude++
			// drill-claude's worst case is Model.WorstCase of the chat
			// request serve parses from the body, not the short form's.
			w, err := inkwell.ReadPayload(it.body())
			if err != nil {
				t.Fatal(err)
			}
			m, _, _ := cat.Lookup(modelClaude)
			want := m.Cost(int64(w.Chat.InputBytes()), int64(w.Chat.MaxOutputTokens))
			if got := worstCase(cat, it); got != want || got == provider.ShortWorstCaseMicros(it.req) {
				t.Errorf("%s: worst case %d, want %d (every byte a token, plus max_tokens, at the model's prices)", it.key, got, want)
			}
		} else if got, want := worstCase(cat, it), provider.ShortWorstCaseMicros(it.req); got != want {
			t.Errorf("%s: worst case %d on drill, want the short form's %d", it.key, got, want)
		}
	}
	if claude != 2 {
		t.Errorf("%d calls on %s, want 2 (jobs 3 and 6)", claude, modelClaude)
	}
	if reserved != sc.budget || reserved == 0 {
		t.Errorf("budget %d, the calls reserve %d; want the same", sc.budget, reserved)
	}
	if len(over) != 1 || worstCase(cat, over[0]) <= 0 {
		t.Fatalf("over-budget items %v; want the trigger, with a cost", over)
	}
	if len(sc.runs) == 0 || sc.runs[0].crashAt != crashpoint.ProviderAfterCall+":1" {
		t.Errorf("runs %+v; want serve to die at the first answer", sc.runs)
	}
}
