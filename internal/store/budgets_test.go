package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Budgets (docs/design.md §10): accept reserves, completion settles, a failure
// with evidence that nothing was billed releases, a retry reserves again,
// and the books always add up: for every account, reserved_micros is the
// sum of its jobs' open reservations and spent_micros the sum of its
// charges.

// budgetTables is every table a budget refusal must leave as it was.
var budgetTables = append([]string{"accounts", "job_counts"}, dumpTables...)

const budgetAccount = "acme"

// withBudget creates the account acme with budget micros (nil: none).
func withBudget(t *testing.T, s *store.Store, micros *int64) {
	t.Helper()
	if _, err := s.CreateAccount(t.Context(), store.Account{Name: budgetAccount, BudgetMicros: micros}); err != nil {
		t.Fatal(err)
	}
}

// budgetParams is an accept of key for acme, reserving cost.
func budgetParams(key string, cost int64) store.AcceptParams {
	payload, _ := json.Marshal(inkwell.Request{Prompt: "a poem for " + key, Account: budgetAccount, MaxWords: inkwell.DefaultMaxWords})
	return store.AcceptParams{IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload,
		Account: budgetAccount, ReserveMicros: cost}
}

// account reads acme.
func account(t *testing.T, s *store.Store) store.Account {
	t.Helper()
	a, err := s.Account(t.Context(), budgetAccount)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func wantReservation(t *testing.T, s *store.Store, jobID int64, state string, micros int64) {
	t.Helper()
	r, err := s.Reservation(t.Context(), jobID)
	if err != nil || r.State != state || (state != "" && (r.Micros != micros || r.Account != budgetAccount)) {
		t.Errorf("job %d reservation %+v, %v; want %q of %d on %s", jobID, r, err, state, micros, budgetAccount)
	}
}

// assertBooks checks that every account with a budget has reserved_micros
// the sum of its open reservations and spent_micros the sum of its charges.
func assertBooks(t *testing.T, s *store.Store) {
	t.Helper()
	const q = `SELECT a.name, a.reserved_micros, a.spent_micros,
			(SELECT COALESCE(SUM(j.reservation_micros), 0) FROM jobs j WHERE j.reservation_account = a.name AND j.reservation_state = 'open'),
			(SELECT COALESCE(SUM(c.amount_micros), 0) FROM charges c WHERE c.account = a.name)
		FROM accounts a WHERE a.budget_micros IS NOT NULL ORDER BY a.name`
	rows, err := s.DB().QueryContext(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var reserved, spent, open, charged int64
		if err := rows.Scan(&name, &reserved, &spent, &open, &charged); err != nil {
			t.Fatal(err)
		}
		if reserved != open || spent != charged {
			t.Errorf("account %s: reserved_micros %d, open reservations %d; spent_micros %d, charges %d", name, reserved, open, spent, charged)
		}
	}
	if n := count(t, s, `SELECT COUNT(*) FROM jobs WHERE status = 'done' AND reservation_state = 'open'`); n != 0 {
		t.Errorf("%d done job(s) still hold an open reservation", n)
	}
}

func completeAs(t *testing.T, s *store.Store, c *store.Claimed, amount int64) {
	t.Helper()
	p := completeParams(c)
	p.Account, p.AmountMicros = budgetAccount, amount
	if err := s.CompleteIfRunning(t.Context(), p); err != nil {
		t.Fatalf("complete job %d: %v", c.Job.ID, err)
	}
}

func failAs(t *testing.T, s *store.Store, c *store.Claimed, class inkwell.ErrorClass, retryAt *time.Time) {
	t.Helper()
	err := s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "made to fail: " + string(class),
		Class: class, RetryAt: retryAt, ProviderHonoursKeys: true})
	if err != nil {
		t.Fatalf("fail job %d (%s): %v", c.Job.ID, class, err)
	}
}

func TestBudget_ReserveAndSettle(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		withBudget(t, s, ptr[int64](10_000))
		job := mustAccept(t, s, budgetParams("k1", 4_000))
		if a := account(t, s); a.ReservedMicros != 4_000 || a.SpentMicros != 0 {
			t.Fatalf("after accept: reserved %d, spent %d; want 4000, 0", a.ReservedMicros, a.SpentMicros)
		}
		wantReservation(t, s, job.ID, store.ReservationOpen, 4_000)
		c := mustClaim(t, s, "lane-a")
		completeAs(t, s, c, 3_000)
		if a := account(t, s); a.ReservedMicros != 0 || a.SpentMicros != 3_000 {
			t.Errorf("after completion: reserved %d, spent %d; want 0, 3000", a.ReservedMicros, a.SpentMicros)
		}
		wantReservation(t, s, job.ID, store.ReservationSettled, 4_000)
		// A second try of the same completion settles nothing again.
		p := completeParams(c)
		p.Account, p.AmountMicros = budgetAccount, 3_000
		if err := s.CompleteIfRunning(t.Context(), p); err != store.ErrAlreadyDone && inkwell.ErrorCode(err) != inkwell.ECONFLICT {
			t.Errorf("second completion: %v, want a conflict", err)
		}
		if a := account(t, s); a.ReservedMicros != 0 || a.SpentMicros != 3_000 {
			t.Errorf("after a repeated completion: reserved %d, spent %d; want 0, 3000", a.ReservedMicros, a.SpentMicros)
		}
		assertBooks(t, s)
	})
}

// TestBudget_RefusalWritesNothing: past the budget a new key is EBUDGET and
// no table changes; a re-send of a stored key is answered as always and
// reserves nothing again, even with the budget used up, and even when the
// request is refused for another reason (Refuse: the API's rpm).
func TestBudget_RefusalWritesNothing(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		withBudget(t, s, ptr[int64](5_000))
		first := mustAccept(t, s, budgetParams("k1", 4_000))
		before := dumpOf(t, s.DB(), budgetTables...)
		_, created, err := s.Accept(t.Context(), budgetParams("k2", 4_000))
		if inkwell.ErrorCode(err) != inkwell.EBUDGET || created {
			t.Fatalf("accept past the budget: created %t, err %v; want %s", created, err, inkwell.EBUDGET)
		}
		assertSameDump(t, before, dumpOf(t, s.DB(), budgetTables...))
		for _, p := range []store.AcceptParams{budgetParams("k1", 4_000), func() store.AcceptParams {
			p := budgetParams("k1", 4_000)
			p.Refuse = inkwell.Errorf(inkwell.ETOOMANY, "rpm used up")
			return p
		}()} {
			job, created, err := s.Accept(t.Context(), p)
			if err != nil || created || job.ID != first.ID {
				t.Errorf("re-send (refuse %v): job %d, created %t, err %v; want job %d", p.Refuse, job.ID, created, err, first.ID)
			}
		}
		// A re-send under budget, in one group with its original: one
		// reservation, not two.
		res := acceptBatch(t, s, budgetParams("k3", 500), budgetParams("k3", 500))
		if res[0].Err != nil || !res[0].Created || res[1].Err != nil || res[1].Created || res[1].Job.ID != res[0].Job.ID {
			t.Errorf("a key and its re-send in one group: %+v", res)
		}
		if a := account(t, s); a.ReservedMicros != 4_500 {
			t.Errorf("reserved %d, want 4500: one reservation per job", a.ReservedMicros)
		}
		// A refused member does not fail its group.
		res = acceptBatch(t, s, budgetParams("k4", 400), budgetParams("k5", 400))
		if res[0].Err != nil || inkwell.ErrorCode(res[1].Err) != inkwell.EBUDGET {
			t.Errorf("group of one that fits and one that does not: %v, %v", res[0].Err, res[1].Err)
		}
		// rpm refusal of a new key writes nothing either.
		before = dumpOf(t, s.DB(), budgetTables...)
		p := budgetParams("k6", 1)
		p.Refuse = inkwell.Errorf(inkwell.ETOOMANY, "rpm used up")
		if _, _, err := s.Accept(t.Context(), p); inkwell.ErrorCode(err) != inkwell.ETOOMANY {
			t.Errorf("refused new key: %v, want %s", err, inkwell.ETOOMANY)
		}
		assertSameDump(t, before, dumpOf(t, s.DB(), budgetTables...))
		assertBooks(t, s)
	})
}

// TestBudget_NoAccountRowNoBudget: an account with no row, or no budget,
// keeps no books: its jobs hold no reservation and are never refused.
func TestBudget_NoAccountRowNoBudget(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		job := mustAccept(t, s, budgetParams("k1", 1<<40))
		wantReservation(t, s, job.ID, "", 0)
		withBudget(t, s, nil)
		job = mustAccept(t, s, budgetParams("k2", 1<<40))
		wantReservation(t, s, job.ID, "", 0)
		completeAs(t, s, mustClaim(t, s, "lane-a"), 1_000)
		if a := account(t, s); a.ReservedMicros != 0 || a.SpentMicros != 0 {
			t.Errorf("an account without a budget: reserved %d, spent %d; want no books (0, 0)", a.ReservedMicros, a.SpentMicros)
		}
		assertBooks(t, s)
	})
}

// TestBudget_ReleaseByClass: a job that fails for good releases its
// reservation exactly when every one of its attempts failed with a class
// whose evidence says nothing was billed; otherwise it keeps it.
func TestBudget_ReleaseByClass(t *testing.T) {
	t.Parallel()
	for _, class := range inkwell.ErrorClasses {
		if class == inkwell.ClassWorkerRestarted || class == inkwell.ClassCancelled {
			continue // written by recovery and cancel: below
		}
		t.Run(string(class), func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T, s *store.Store) {
				withBudget(t, s, ptr[int64](10_000))
				job := mustAccept(t, s, budgetParams("k1", 4_000))
				failAs(t, s, mustClaim(t, s, "lane-a"), class, nil)
				want, reserved := store.ReservationOpen, int64(4_000)
				if class.NotBilled() {
					want, reserved = store.ReservationReleased, 0
				}
				wantReservation(t, s, job.ID, want, 4_000)
				if a := account(t, s); a.ReservedMicros != reserved {
					t.Errorf("reserved %d, want %d", a.ReservedMicros, reserved)
				}
				assertBooks(t, s)
			})
		})
	}
	t.Run("EarlierAttemptMayHaveBilled", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			withBudget(t, s, ptr[int64](10_000))
			past := time.Now().Add(-time.Hour)
			bad := mustAccept(t, s, budgetParams("timeout-then-not-sent", 4_000))
			failAs(t, s, mustClaim(t, s, "lane-a"), inkwell.ClassTimeout, &past) // rescheduled: keeps it
			wantReservation(t, s, bad.ID, store.ReservationOpen, 4_000)
			failAs(t, s, mustClaim(t, s, "lane-a"), inkwell.ClassNotSent, nil)
			wantReservation(t, s, bad.ID, store.ReservationOpen, 4_000) // attempt 1 may have billed
			good := mustAccept(t, s, budgetParams("5xx-then-not-sent", 4_000))
			failAs(t, s, mustClaim(t, s, "lane-a"), inkwell.ClassProviderError, &past)
			wantReservation(t, s, good.ID, store.ReservationOpen, 4_000)
			failAs(t, s, mustClaim(t, s, "lane-a"), inkwell.ClassNotSent, nil)
			wantReservation(t, s, good.ID, store.ReservationReleased, 4_000)
			assertBooks(t, s)
		})
	})
	t.Run("Cancel", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			withBudget(t, s, ptr[int64](10_000))
			running := mustAccept(t, s, budgetParams("running", 3_000))
			queued := mustAccept(t, s, budgetParams("queued", 3_000))
			mustClaim(t, s, "lane-a") // the oldest: running
			if _, err := s.Cancel(t.Context(), running.ID, "test"); err != nil {
				t.Fatal(err)
			}
			wantReservation(t, s, running.ID, store.ReservationOpen, 3_000) // its call may have billed
			if _, err := s.Cancel(t.Context(), queued.ID, "test"); err != nil {
				t.Fatal(err)
			}
			wantReservation(t, s, queued.ID, store.ReservationReleased, 3_000)  // never sent
			if _, err := s.Cancel(t.Context(), queued.ID, "test"); err != nil { // a re-sent cancel
				t.Fatal(err)
			}
			if a := account(t, s); a.ReservedMicros != 3_000 {
				t.Errorf("reserved %d, want 3000", a.ReservedMicros)
			}
			assertBooks(t, s)
		})
	})
	t.Run("RecoveryKeeps", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			withBudget(t, s, ptr[int64](10_000))
			job := mustAccept(t, s, budgetParams("k1", 4_000))
			mustClaim(t, s, "lane-a") // the lane dies mid-call
			l := mustLockLane(t, s, "lane-a")
			if rep, err := s.Recover(t.Context(), l, false); err != nil || rep.JobsFailed != 1 {
				t.Fatalf("recover: %+v, %v", rep, err)
			}
			wantReservation(t, s, job.ID, store.ReservationOpen, 4_000)
			assertBooks(t, s)
		})
	})
}

// TestBudget_RetryAndOperatorRelease: a retry of a job that released its
// reservation reserves again, or is refused with nothing written; a retry
// of one that kept it reserves nothing more; an operator releases a failed
// job's kept reservation, and nothing but a failed job's.
func TestBudget_RetryAndOperatorRelease(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		withBudget(t, s, ptr[int64](5_000))
		a := mustAccept(t, s, budgetParams("a", 4_000))
		failAs(t, s, mustClaim(t, s, "lane-a"), inkwell.ClassNotSent, nil) // released
		b := mustAccept(t, s, budgetParams("b", 4_000))
		before := dumpOf(t, s.DB(), budgetTables...)
		if _, err := s.RetryIfFailed(t.Context(), a.ID, store.ActorCLI); inkwell.ErrorCode(err) != inkwell.EBUDGET {
			t.Fatalf("retry past the budget: %v, want %s", err, inkwell.EBUDGET)
		}
		assertSameDump(t, before, dumpOf(t, s.DB(), budgetTables...))

		// b may have been billed: it keeps its reservation when it fails.
		failAs(t, s, mustClaim(t, s, "lane-a"), inkwell.ClassTimeout, nil)
		wantReservation(t, s, b.ID, store.ReservationOpen, 4_000)
		if _, err := s.RetryIfFailed(t.Context(), a.ID, store.ActorCLI); inkwell.ErrorCode(err) != inkwell.EBUDGET {
			t.Errorf("retry while b holds its reservation: %v, want %s", err, inkwell.EBUDGET)
		}
		mustRetry(t, s, b.ID) // keeps its one reservation
		if acct := account(t, s); acct.ReservedMicros != 4_000 {
			t.Errorf("after retrying b: reserved %d, want 4000 (never twice)", acct.ReservedMicros)
		}
		before = dumpOf(t, s.DB(), budgetTables...)
		if _, err := s.ReleaseReservation(t.Context(), b.ID); inkwell.ErrorCode(err) != inkwell.ECONFLICT {
			t.Errorf("release of a queued job: %v, want %s", err, inkwell.ECONFLICT)
		}
		if _, err := s.ReleaseReservation(t.Context(), 999); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("release of no job: %v, want %s", err, inkwell.ENOTFOUND)
		}
		assertSameDump(t, before, dumpOf(t, s.DB(), budgetTables...))
		failAs(t, s, mustClaim(t, s, "lane-a"), inkwell.ClassMalformed, nil)
		r, err := s.ReleaseReservation(t.Context(), b.ID)
		if err != nil || r.State != store.ReservationReleased {
			t.Fatalf("operator release: %+v, %v", r, err)
		}
		before = dumpOf(t, s.DB(), budgetTables...)
		if r, err := s.ReleaseReservation(t.Context(), b.ID); err != nil || r.State != store.ReservationReleased {
			t.Errorf("repeated release: %+v, %v; want it answered as it is", r, err)
		}
		assertSameDump(t, before, dumpOf(t, s.DB(), budgetTables...))

		mustRetry(t, s, a.ID) // now it fits: reserved again
		wantReservation(t, s, a.ID, store.ReservationOpen, 4_000)
		completeAs(t, s, mustClaim(t, s, "lane-a"), 4_000)
		if acct := account(t, s); acct.ReservedMicros != 0 || acct.SpentMicros != 4_000 {
			t.Errorf("after a's completion: reserved %d, spent %d; want 0, 4000", acct.ReservedMicros, acct.SpentMicros)
		}
		assertBooks(t, s)
	})
}

// TestBudget_ConcurrentAcceptsNeverOvershoot: many accepts at once, from
// two stores on one database (two processes' groups on PostgreSQL), take
// exactly as many reservations as the budget holds.
func TestBudget_ConcurrentAcceptsNeverOvershoot(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		const cost, fits, tries = 1_000, 12, 60
		stores := []*store.Store{storetest.MustOpen(t, b.DSN, store.Options{})}
		if stores[0].Dialect() != "sqlite" {
			stores = append(stores, storetest.MustOpen(t, b.DSN, store.Options{}))
		}
		withBudget(t, stores[0], ptr[int64](fits*cost+cost/2))
		var wg sync.WaitGroup
		created := make(chan int64, tries)
		errs := make(chan error, tries)
		for i := range tries {
			wg.Go(func() {
				job, ok, err := stores[i%len(stores)].Accept(context.Background(), budgetParams(fmt.Sprintf("k%d", i), cost))
				switch {
				case err == nil && ok:
					created <- job.ID
				case inkwell.ErrorCode(err) != inkwell.EBUDGET:
					errs <- err
				}
			})
		}
		wg.Wait()
		close(created)
		close(errs)
		for err := range errs {
			t.Errorf("accept: %v, want success or %s", err, inkwell.EBUDGET)
		}
		if n := len(created); n != fits {
			t.Errorf("%d jobs accepted, want exactly %d", n, fits)
		}
		s := stores[0]
		if a := account(t, s); a.ReservedMicros != fits*cost {
			t.Errorf("reserved %d, want %d", a.ReservedMicros, fits*cost)
		}
		assertBooks(t, s)
	})
}

// TestBudget_UpdateAccount: accounts set changes budget and rpm; bad input
// and an unknown account write nothing; a budget counts the books from the
// rows; a budget lowered below them refuses new jobs.
func TestBudget_UpdateAccount(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		withBudget(t, s, nil)
		mustAccept(t, s, budgetParams("k1", 4_000)) // no budget: no reservation
		completeAs(t, s, mustClaim(t, s, "lane-a"), 1_500)
		before := dumpOf(t, s.DB(), budgetTables...)
		for _, c := range []store.AccountChange{{}, {BudgetMicros: ptr[int64](-1)}, {RPM: ptr(-1)}, {BudgetMicros: ptr[int64](1), NoBudget: true}} {
			if _, err := s.UpdateAccount(t.Context(), budgetAccount, c); inkwell.ErrorCode(err) != inkwell.EINVALID {
				t.Errorf("UpdateAccount(%+v): %v, want %s", c, err, inkwell.EINVALID)
			}
		}
		for _, c := range []store.AccountChange{{RPM: ptr(5)}, {BudgetMicros: ptr[int64](5)}} {
			if _, err := s.UpdateAccount(t.Context(), "nobody", c); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
				t.Errorf("unknown account (%+v): %v, want %s", c, err, inkwell.ENOTFOUND)
			}
		}
		assertSameDump(t, before, dumpOf(t, s.DB(), budgetTables...))
		a, err := s.UpdateAccount(t.Context(), budgetAccount, store.AccountChange{BudgetMicros: ptr[int64](5_000), RPM: ptr(7)})
		if err != nil || a.BudgetMicros == nil || *a.BudgetMicros != 5_000 || a.RPM != 7 || a.SpentMicros != 1_500 || a.ReservedMicros != 0 {
			t.Fatalf("UpdateAccount: %+v, %v; want budget 5000, rpm 7, spent 1500 counted from the charges", a, err)
		}
		mustAccept(t, s, budgetParams("k2", 3_000))
		if a, err = s.UpdateAccount(t.Context(), budgetAccount, store.AccountChange{BudgetMicros: ptr[int64](4_000)}); err != nil || a.ReservedMicros != 3_000 {
			t.Fatalf("lower the budget: %+v, %v; want it allowed, reserved 3000 kept", a, err)
		}
		if _, _, err := s.Accept(t.Context(), budgetParams("k3", 1)); inkwell.ErrorCode(err) != inkwell.EBUDGET {
			t.Errorf("accept under a budget lowered below spent + reserved: %v, want %s", err, inkwell.EBUDGET)
		}
		assertBooks(t, s)
		if a, err = s.UpdateAccount(t.Context(), budgetAccount, store.AccountChange{NoBudget: true}); err != nil || a.BudgetMicros != nil || a.RPM != 7 {
			t.Errorf("remove the budget: %+v, %v", a, err)
		}
		mustAccept(t, s, budgetParams("k3", 1))
	})
}

// TestBudget_NewAccountCountsStoredCharges: an account added after jobs
// were charged to its name starts with those charges spent.
func TestBudget_NewAccountCountsStoredCharges(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		mustAccept(t, s, budgetParams("k1", 4_000)) // no account row yet: no reservation
		completeAs(t, s, mustClaim(t, s, "lane-a"), 2_500)
		withBudget(t, s, ptr[int64](10_000))
		if a := account(t, s); a.SpentMicros != 2_500 || a.ReservedMicros != 0 {
			t.Errorf("new account: spent %d, reserved %d; want 2500, 0", a.SpentMicros, a.ReservedMicros)
		}
		assertBooks(t, s)
	})
}

// TestBudget_GroupSettlesEachAccount: completions that share one outcome
// group (one statement on PostgreSQL) settle each job's reservation on the
// account that holds it and charge each on the account it names, even when
// the two differ and several members touch the same account.
func TestBudget_GroupSettlesEachAccount(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		withBudget(t, s, ptr[int64](100_000))
		if _, err := s.CreateAccount(t.Context(), store.Account{Name: "beta", BudgetMicros: ptr[int64](50_000)}); err != nil {
			t.Fatal(err)
		}
		costs := []int64{4_000, 5_000, 6_000}
		var c []*store.Claimed
		for i, cost := range costs {
			mustAccept(t, s, budgetParams(fmt.Sprintf("g%d", i), cost))
			c = append(c, mustClaim(t, s, "lane-a"))
		}
		if a := account(t, s); a.ReservedMicros != 15_000 {
			t.Fatalf("reserved %d after three accepts, want 15000", a.ReservedMicros)
		}
		var outs []store.Outcome
		for i, charge := range []struct {
			account string
			amount  int64
		}{{budgetAccount, 3_000}, {budgetAccount, 1_000}, {"beta", 2_500}} {
			p := completeParams(c[i])
			p.Account, p.AmountMicros = charge.account, charge.amount
			outs = append(outs, store.Outcome{Complete: &p})
		}
		isolated := store.IsolatedGroups(s)
		for i, err := range store.CommitOutcomes(s, outs) {
			if err != nil {
				t.Errorf("member %d: %v", i, err)
			}
		}
		if got := store.IsolatedGroups(s) - isolated; got != 0 {
			t.Errorf("the group ran again member by member %d times, want never", got)
		}
		if a := account(t, s); a.ReservedMicros != 0 || a.SpentMicros != 4_000 {
			t.Errorf("acme: reserved %d, spent %d; want 0, 4000", a.ReservedMicros, a.SpentMicros)
		}
		beta, err := s.Account(t.Context(), "beta")
		if err != nil || beta.ReservedMicros != 0 || beta.SpentMicros != 2_500 {
			t.Errorf("beta: %+v, %v; want reserved 0, spent 2500", beta, err)
		}
		for i, cl := range c {
			wantReservation(t, s, cl.Job.ID, store.ReservationSettled, costs[i])
		}
		assertBooks(t, s)
	})
}

// TestBudget_ChargeNeverPastTheReservation: a completion whose amount is
// more than its job reserved (an answer reporting more usage than its
// request could have, or prices raised after the accept) is charged the
// reservation, alone or in a group, so that an account's charges and open
// reservations never pass its budget; a job of an account without a
// budget reserved nothing and is charged its amount.
func TestBudget_ChargeNeverPastTheReservation(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		withBudget(t, s, ptr[int64](10_000))
		if _, err := s.CreateAccount(t.Context(), store.Account{Name: "free"}); err != nil {
			t.Fatal(err)
		}
		alone := mustAccept(t, s, budgetParams("alone", 4_000))
		c := mustClaim(t, s, "lane-a")
		completeAs(t, s, c, 9_000)
		if a := account(t, s); a.ReservedMicros != 0 || a.SpentMicros != 4_000 {
			t.Errorf("after a completion of 9000 on a reservation of 4000: reserved %d, spent %d; want 0, 4000", a.ReservedMicros, a.SpentMicros)
		}
		wantReservation(t, s, alone.ID, store.ReservationSettled, 4_000)

		mustAccept(t, s, budgetParams("g1", 5_000))
		freeParams := budgetParams("g2", 0)
		freeParams.Account = "free"
		mustAccept(t, s, freeParams)
		var outs []store.Outcome
		for _, amount := range []int64{7_000, 7_000} {
			cl := mustClaim(t, s, "lane-a")
			p := completeParams(cl)
			p.Account, p.AmountMicros = cl.Job.Account, amount
			outs = append(outs, store.Outcome{Complete: &p})
		}
		for i, err := range store.CommitOutcomes(s, outs) {
			if err != nil {
				t.Errorf("member %d: %v", i, err)
			}
		}
		if a := account(t, s); a.ReservedMicros != 0 || a.SpentMicros != 9_000 || a.SpentMicros > *a.BudgetMicros {
			t.Errorf("acme after the group: reserved %d, spent %d; want 0, 9000 (4000 + the 5000 reserved), within its budget of 10000", a.ReservedMicros, a.SpentMicros)
		}
		charged := map[string]int64{}
		rows, err := s.DB().QueryContext(t.Context(), `SELECT j.idempotency_key, c.amount_micros FROM charges c JOIN jobs j ON j.id = c.job_id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var key string
			var micros int64
			if err := rows.Scan(&key, &micros); err != nil {
				t.Fatal(err)
			}
			charged[key] = micros
		}
		if want := map[string]int64{"alone": 4_000, "g1": 5_000, "g2": 7_000}; fmt.Sprint(charged) != fmt.Sprint(want) {
			t.Errorf("charges %v, want %v (the budgeted jobs at their reservations, the unbudgeted one at its amount)", charged, want)
		}
		assertBooks(t, s)
	})
}
