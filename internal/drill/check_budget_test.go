package drill

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// budgetWorld is a world whose account acct has a budget of 50,000 micros
// and whose jobs reserve 20,000 each: job 1 done (settled, charged 6,000),
// job 2 failed after a timeout (may have been billed: still reserved),
// job 3 failed with nothing sent (released), job 4 queued (reserved).
func budgetWorld(t *testing.T) *world {
	t.Helper()
	w := emptyWorld(t)
	st := w.open()
	budget := int64(50_000)
	if _, err := st.CreateAccount(context.Background(), store.Account{Name: "acct", BudgetMicros: &budget}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	w.reserve = 20_000
	w.mustRun("k1", true)
	w.mustAccept("k2")
	w.mustFail(inkwell.ClassTimeout, nil, 0)
	w.mustAccept("k3")
	w.mustFail(inkwell.ClassNotSent, nil, 0)
	w.mustAccept("k4")
	return w
}

// TestCheck_BudgetHealthyWorld: settled, kept, released and open
// reservations, each as the store leaves them, break nothing.
func TestCheck_BudgetHealthyWorld(t *testing.T) {
	t.Parallel()
	w := budgetWorld(t)
	s := w.mustSnap(KindQuiet, "quiet")
	if len(s.Accounts) == 0 || len(s.Reservations) != 4 {
		t.Fatalf("snapshot read %d accounts and %d reservations; want the books and 4 reservations", len(s.Accounts), len(s.Reservations))
	}
	if vs := Check(w.evidence(s)); len(vs) != 0 {
		t.Errorf("healthy budget world: %d violations:\n%s", len(vs), joinViolations(vs))
	}
}

// TestCheck_BudgetBrokenWorlds: each way of breaking the books is caught,
// naming the invariant (and the job, when it is about one).
func TestCheck_BudgetBrokenWorlds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		break_ string
		job    int64
		inv    string
	}{
		{"OverBudget", `UPDATE accounts SET budget_micros = 40000 WHERE name = 'acct'`, 0, InvBudgetHeld},
		{"ReservedOffByOne", `UPDATE accounts SET reserved_micros = reserved_micros + 1 WHERE name = 'acct'`, 0, InvReservedSum},
		{"ReleasedButStillCounted", `UPDATE jobs SET reservation_state = 'released' WHERE id = 4`, 0, InvReservedSum},
		{"SpentNotKept", `UPDATE accounts SET spent_micros = 0 WHERE name = 'acct'`, 0, InvReservedSum},
		{"DoneStillReserved", `UPDATE jobs SET reservation_state = 'open' WHERE id = 1`, 1, InvNoReservedDone},
		{"ChargedPastReservation", `UPDATE charges SET amount_micros = (SELECT reservation_micros FROM jobs WHERE id = 1) + 1 WHERE job_id = 1`, 1, InvChargeReserved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := budgetWorld(t)
			before := w.mustSnap(KindQuiet, "before")
			if vs := Check(w.evidence(before)); len(vs) != 0 {
				t.Fatalf("before breaking: %d violations:\n%s", len(vs), joinViolations(vs))
			}
			w.mustExec(tt.break_)
			wantViolation(t, Check(w.evidence(before, w.mustSnap(KindQuiet, "broken"))), tt.job, tt.inv)
		})
	}
}

// TestCheck_OverBudget: a key sent past its account's budget must be
// refused 402 budget_exceeded, answered at least once, and have no job.
func TestCheck_OverBudget(t *testing.T) {
	t.Parallel()
	w := mustWorld(t) // job 1 under key k1, accepted 201 and done
	refused := Sent{Path: pathJobs, Key: "k9", Outcome: OutcomeRefused, Status: http.StatusPaymentRequired, Detail: inkwell.EBUDGET}
	lost := Sent{Path: pathJobs, Key: "k9", Outcome: OutcomeRefused, Detail: "connection refused: not delivered"}
	tests := []struct {
		name string
		over string
		sent []Sent
		job  int64 // the violation's job; -1 for none
	}{
		{"Refused402", "k9", []Sent{lost, refused}, -1},
		{"Accepted", "k1", nil, 1},
		{"NeverAnswered", "k9", []Sent{lost}, 0},
		{"OtherRefusal", "k9", []Sent{{Path: pathJobs, Key: "k9", Outcome: OutcomeRefused, Status: http.StatusTooManyRequests, Detail: inkwell.ETOOMANY}}, 0},
	}
	final := w.mustSnap(KindFinal, "final")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := w.evidence(final)
			e.Requests, e.OverBudget = append(slices.Clone(e.Requests), tt.sent...), []string{tt.over}
			for i := range e.Requests {
				e.Requests[i].Seq = i + 1
			}
			vs := Check(e)
			if tt.job < 0 {
				if len(vs) != 0 {
					t.Errorf("%d violations:\n%s", len(vs), joinViolations(vs))
				}
				return
			}
			wantViolation(t, vs, tt.job, InvBudgetRefused)
		})
	}
}
