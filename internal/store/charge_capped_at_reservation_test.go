package store_test

// The store's charge cap (chargeWithin, chargedSQL): no path charges a job
// more than it reserved, and no budgeted account's charges plus open
// reservations pass its budget.

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// reserveParams is an accept of key for account, reserving cost.
func reserveParams(account, key string, cost int64) store.AcceptParams {
	payload, _ := json.Marshal(inkwell.Request{Prompt: "p " + key, Account: account, MaxWords: inkwell.DefaultMaxWords})
	return store.AcceptParams{IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload, Account: account, ReserveMicros: cost}
}

// claimAllByJob claims every queued job, by job id.
func claimAllByJob(t *testing.T, s *store.Store, n int) map[int64]*store.Claimed {
	t.Helper()
	out := map[int64]*store.Claimed{}
	for range n {
		c := mustClaim(t, s, "lane-a")
		out[c.Job.ID] = c
	}
	return out
}

// chargesByJob is every charge row's amount, by job id.
func chargesByJob(t *testing.T, s *store.Store) map[int64]int64 {
	t.Helper()
	rows, err := s.DB().QueryContext(t.Context(), `SELECT job_id, amount_micros FROM charges`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var id, micros int64
		if err := rows.Scan(&id, &micros); err != nil {
			t.Fatal(err)
		}
		out[id] = micros
	}
	return out
}

// assertWithinBudgets checks spent + reserved <= budget for every budgeted
// account, besides assertBooks.
func assertWithinBudgets(t *testing.T, s *store.Store) {
	t.Helper()
	assertBooks(t, s)
	rows, err := s.DB().QueryContext(t.Context(), `SELECT name, budget_micros, spent_micros, reserved_micros FROM accounts WHERE budget_micros IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var budget, spent, reserved int64
		if err := rows.Scan(&name, &budget, &spent, &reserved); err != nil {
			t.Fatal(err)
		}
		if spent+reserved > budget {
			t.Errorf("account %s: spent %d + reserved %d > budget %d", name, spent, reserved, budget)
		}
	}
}

// TestBudget_ChargeCapInAGroupOfMixedAccounts: one outcome group
// (PostgreSQL's set statement, SQLite's member by member) with two jobs of
// one budgeted account (one over, one under its reservation), a job of a
// second budgeted account at exactly its reservation, a job of an account
// without a budget and one of an account without a row: each budgeted job
// is charged at most its reservation, the others their amount, and the
// books add up.
func TestBudget_ChargeCapInAGroupOfMixedAccounts(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		for name, budget := range map[string]*int64{"acme": ptr[int64](10_000), "beta": ptr[int64](6_000), "free": nil} {
			if _, err := s.CreateAccount(t.Context(), store.Account{Name: name, BudgetMicros: budget}); err != nil {
				t.Fatal(err)
			}
		}
		type line struct {
			account       string
			reserve, paid int64
			want          int64
		}
		lines := []line{
			{"acme", 4_000, 9_000, 4_000},
			{"acme", 5_000, 1_000, 1_000},
			{"beta", 6_000, 6_000, 6_000},
			{"free", 3_000, 50_000, 50_000},
			{"ghost", 2_000, 70_000, 70_000},
		}
		ids := map[int64]line{}
		for i, l := range lines {
			j := mustAccept(t, s, reserveParams(l.account, fmt.Sprintf("k%d", i), l.reserve))
			ids[j.ID] = l
		}
		var outs []store.Outcome
		for id, c := range claimAllByJob(t, s, len(lines)) {
			p := completeParams(c)
			p.Account, p.AmountMicros = ids[id].account, ids[id].paid
			outs = append(outs, store.Outcome{Complete: &p})
		}
		isolated := store.IsolatedGroups(s)
		for i, err := range store.CommitOutcomes(s, outs) {
			if err != nil {
				t.Errorf("member %d: %v", i, err)
			}
		}
		if got := store.IsolatedGroups(s) - isolated; got != 0 {
			t.Errorf("the group ran again member by member %d times", got)
		}
		got := chargesByJob(t, s)
		for id, l := range ids {
			if got[id] != l.want {
				t.Errorf("job %d of %s (reserved %d, paid %d): charged %d, want %d", id, l.account, l.reserve, l.paid, got[id], l.want)
			}
		}
		for name, want := range map[string]int64{"acme": 5_000, "beta": 6_000} {
			a, err := s.Account(t.Context(), name)
			if err != nil || a.SpentMicros != want || a.ReservedMicros != 0 {
				t.Errorf("%s: %+v, %v; want spent %d, nothing reserved", name, a, err, want)
			}
		}
		assertWithinBudgets(t, s)
	})
}

// TestBudget_RetriedJobChargedAtMostTheReservationItHolds: a job released
// by a not-billed failure and reserved again by its retry, and a job whose
// kept reservation an operator released before its retry reserved it again,
// are each charged at most the one reservation they hold, never it twice
// and never the answer's amount.
func TestBudget_RetriedJobChargedAtMostTheReservationItHolds(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		withBudget(t, s, ptr[int64](10_000))
		a := mustAccept(t, s, budgetParams("a", 4_000))
		failAs(t, s, mustClaim(t, s, "lane-a"), inkwell.ClassNotSent, nil) // released
		wantReservation(t, s, a.ID, store.ReservationReleased, 4_000)
		mustRetry(t, s, a.ID) // reserved again
		completeAs(t, s, mustClaim(t, s, "lane-a"), 90_000)

		b := mustAccept(t, s, budgetParams("b", 3_000))
		failAs(t, s, mustClaim(t, s, "lane-a"), inkwell.ClassTimeout, nil) // kept
		if _, err := s.ReleaseReservation(t.Context(), b.ID); err != nil {
			t.Fatal(err)
		}
		mustRetry(t, s, b.ID)
		completeAs(t, s, mustClaim(t, s, "lane-a"), 90_000)

		got := chargesByJob(t, s)
		if got[a.ID] != 4_000 || got[b.ID] != 3_000 {
			t.Errorf("charges %v; want a at 4000, b at 3000 (their reservations)", got)
		}
		if acct := account(t, s); acct.SpentMicros != 7_000 || acct.ReservedMicros != 0 {
			t.Errorf("spent %d, reserved %d; want 7000, 0", acct.SpentMicros, acct.ReservedMicros)
		}
		assertWithinBudgets(t, s)
	})
}

// TestBudget_CompletionResentAfterItsCommitChargesNothingMore: a completion
// sent again after its first commit landed (alone, then inside a group with
// a new completion) is ErrAlreadyDone and charges nothing more; the group's
// other member is still capped.
func TestBudget_CompletionResentAfterItsCommitChargesNothingMore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		withBudget(t, s, ptr[int64](10_000))
		mustAccept(t, s, budgetParams("a", 4_000))
		c := mustClaim(t, s, "lane-a")
		p := completeParams(c)
		p.Account, p.AmountMicros = budgetAccount, 9_000
		if err := s.CompleteIfRunning(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		if err := s.CompleteIfRunning(t.Context(), p); !isAlreadyDone(err) {
			t.Errorf("second completion: %v, want ErrAlreadyDone", err)
		}
		mustAccept(t, s, budgetParams("b", 5_000))
		c2 := mustClaim(t, s, "lane-a")
		p2 := completeParams(c2)
		p2.Account, p2.AmountMicros = budgetAccount, 9_000
		errs := store.CommitOutcomes(s, []store.Outcome{{Complete: &p}, {Complete: &p2}})
		if !isAlreadyDone(errs[0]) || errs[1] != nil {
			t.Errorf("group: %v; want ErrAlreadyDone, nil", errs)
		}
		if acct := account(t, s); acct.SpentMicros != 9_000 || acct.ReservedMicros != 0 {
			t.Errorf("spent %d, reserved %d; want 9000 (4000 + 5000), 0", acct.SpentMicros, acct.ReservedMicros)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM charges`); n != 2 {
			t.Errorf("%d charges, want 2", n)
		}
		assertWithinBudgets(t, s)
	})
}

func isAlreadyDone(err error) bool { return errors.Is(err, store.ErrAlreadyDone) }

// TestBudget_BatchLinesEachCappedAtTheirReservation: a batch reserves each
// line's worst case; completions over them, in one group, are each charged
// their own line's reservation, and a batch cancel while one line runs
// leaves that line's reservation open (its completion, fenced out, charges
// nothing).
func TestBudget_BatchLinesEachCappedAtTheirReservation(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		withBudget(t, s, ptr[int64](12_000))
		var lines []store.BatchLine
		for i, cost := range []int64{3_000, 4_000, 5_000} {
			payload, _ := json.Marshal(inkwell.Request{Prompt: fmt.Sprintf("line %d", i), Account: budgetAccount})
			lines = append(lines, store.BatchLine{CustomID: fmt.Sprintf("c%d", i), RequestHash: inkwell.RequestHash(payload), Payload: payload, ReserveMicros: cost})
		}
		b := mustAcceptBatch(t, s, store.BatchParams{Account: budgetAccount, IdempotencyKey: "b1", RequestHash: store.BatchHash(lines), Lines: lines})
		if acct := account(t, s); acct.ReservedMicros != 12_000 {
			t.Fatalf("reserved %d after the batch, want 12000", acct.ReservedMicros)
		}
		claimed := claimAllByJob(t, s, 3)
		var running *store.Claimed
		var outs []store.Outcome
		for _, c := range claimed {
			if running == nil {
				running = c
				continue
			}
			p := completeParams(c)
			p.Account, p.AmountMicros = budgetAccount, 1_000_000
			outs = append(outs, store.Outcome{Complete: &p})
		}
		for i, err := range store.CommitOutcomes(s, outs) {
			if err != nil {
				t.Errorf("member %d: %v", i, err)
			}
		}
		if _, err := s.CancelBatch(t.Context(), b.ID, store.ActorCLI); err != nil {
			t.Fatalf("cancel batch: %v", err)
		}
		p := completeParams(running)
		p.Account, p.AmountMicros = budgetAccount, 1_000_000
		if err := s.CompleteIfRunning(t.Context(), p); inkwell.ErrorCode(err) != inkwell.ECONFLICT {
			t.Errorf("completion of the line running at the batch cancel: %v, want a conflict (the cancel ended it)", err)
		}
		// It may have been billed: its reservation stays open, never charged.
		wantReservation(t, s, running.Job.ID, store.ReservationOpen, reservationOf(t, s, running.Job.ID))
		got := chargesByJob(t, s)
		if micros, ok := got[running.Job.ID]; ok {
			t.Errorf("the line running at the batch cancel was charged %d, want no charge (its completion was fenced out)", micros)
		}
		if len(got) != 2 {
			t.Errorf("charges %v; want the two lines completed before the cancel", got)
		}
		var total int64
		for id, micros := range got {
			r, rerr := s.Reservation(t.Context(), id)
			if rerr != nil || micros > r.Micros {
				t.Errorf("job %d charged %d, reserved %+v (%v)", id, micros, r, rerr)
			}
			if id != running.Job.ID && (rerr != nil || micros != r.Micros) {
				t.Errorf("job %d, completed at 1000000 micros, charged %d; want its own line's reservation %+v (%v)", id, micros, r, rerr)
			}
			total += micros
		}
		if acct := account(t, s); acct.SpentMicros != total || acct.SpentMicros > 12_000 {
			t.Errorf("spent %d, charges %d, budget 12000", acct.SpentMicros, total)
		}
		assertWithinBudgets(t, s)
	})
}

// TestBudget_OtherPayerChargedAtMostTheReservation: settleTx's branch for
// a completion paid by an account other than the reservation's (no
// production caller passes one: the lane pays with jobs.account, which
// accept also reserved on). The charge is capped at the other account's
// reservation, and lands, unreserved, on the payer: the payer's spent may
// pass its budget. Pinned as it is; the books add up.
func TestBudget_OtherPayerChargedAtMostTheReservation(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		withBudget(t, s, ptr[int64](10_000))
		if _, err := s.CreateAccount(t.Context(), store.Account{Name: "payer", BudgetMicros: ptr[int64](1_000)}); err != nil {
			t.Fatal(err)
		}
		mustAccept(t, s, budgetParams("a", 4_000))
		c := mustClaim(t, s, "lane-a")
		p := completeParams(c)
		p.Account, p.AmountMicros = "payer", 9_000
		if err := s.CompleteIfRunning(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		payer, err := s.Account(t.Context(), "payer")
		if err != nil {
			t.Fatal(err)
		}
		if acct := account(t, s); acct.ReservedMicros != 0 || acct.SpentMicros != 0 || payer.SpentMicros != 4_000 {
			t.Errorf("acme %+v, payer %+v; want acme's reservation released, payer charged the 4000 reserved", acct, payer)
		}
		assertBooks(t, s)
		t.Logf("payer: spent %d of a budget of %d (no reservation of its own was counted)", payer.SpentMicros, *payer.BudgetMicros)
	})
}

func reservationOf(t *testing.T, s *store.Store, id int64) int64 {
	t.Helper()
	r, err := s.Reservation(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Micros
}
