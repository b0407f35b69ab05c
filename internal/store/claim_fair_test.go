package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Fair claims (claim_fair.go): round robin across the accounts with
// queued work, by the turn each job entered the queue with; oldest first
// within a turn.

func TestStore_ClaimFair(t *testing.T) {
	t.Parallel()
	t.Run("FloodDoesNotStarve", func(t *testing.T) {
		t.Parallel()
		// floods accounts with 10,000 jobs each, then one job arrives for
		// single: it must be claimed within N claims, N the number of
		// accounts with queued work. single's name sorts before the floods
		// ("a-") or after them ("z-"): account names play no part in the
		// order, so both must be served alike.
		for _, tc := range []struct {
			n      int
			single string
			floods []string
		}{
			{1, "z-single", []string{"m-flood"}},
			{1, "a-single", []string{"m-flood"}},
			{16, "z-single", []string{"m-flood"}},
			{16, "a-single", []string{"m-flood"}},
			{1, "a-single", []string{"m-flood", "n-flood"}},
			{16, "z-single", []string{"m-flood", "n-flood"}},
		} {
			t.Run(fmt.Sprintf("n=%d/%s/floods=%d", tc.n, tc.single, len(tc.floods)), func(t *testing.T) {
				t.Parallel()
				storetest.Run(t, func(t *testing.T, s *store.Store) {
					testFloodDoesNotStarve(t, s, tc.n, tc.single, tc.floods)
				})
			})
		}
	})
	t.Run("RoundRobinOldestFirst", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			ids := acceptInAccounts(t, s, "a", "a", "b", "a", "c", "b")
			l := mustLockLane(t, s, "local")
			want := []string{"a1", "b1", "c1", "a2", "b2", "a3"}
			var got []string
			for range want {
				got = append(got, nameOf(ids, mustClaimUpTo(t, s, l, 1))...)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("claims of one, in order (-want +got):\n%s", diff)
			}
			if cs := mustClaimUpTo(t, s, l, 1); len(cs) != 0 {
				t.Errorf("claim on an empty queue took %v", nameOf(ids, cs))
			}
		})
	})
	t.Run("BatchTakesRounds", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			ids := acceptInAccounts(t, s, "a", "a", "b", "a", "c", "b")
			l := mustLockLane(t, s, "local")
			// Turn 0 a1 b1 c1, turn 1 a2; then the rest of turn 1, b2, and a3.
			if diff := cmp.Diff([]string{"a1", "a2", "b1", "c1"}, nameOf(ids, mustClaimUpTo(t, s, l, 4))); diff != "" {
				t.Errorf("first claim of 4 (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"a3", "b2"}, nameOf(ids, mustClaimUpTo(t, s, l, 4))); diff != "" {
				t.Errorf("second claim of 4 (-want +got):\n%s", diff)
			}
		})
	})
	t.Run("BatchSharesAcrossFloods", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			storetest.MustQueue(t, s, "a", "a", 20)
			storetest.MustQueue(t, s, "b", "b", 2)
			storetest.MustQueue(t, s, "c", "c", 20)
			l := mustLockLane(t, s, "local")
			cs := mustClaimUpTo(t, s, l, 16)
			got := map[string]int{}
			for _, c := range cs {
				got[accountOf(t, c.Job)]++
			}
			// Rounds of a b c, twice; then b has none left: a c, five times.
			if diff := cmp.Diff(map[string]int{"a": 7, "b": 2, "c": 7}, got); diff != "" {
				t.Errorf("jobs per account in one claim of 16 (-want +got):\n%s", diff)
			}
		})
	})
	t.Run("BackOffLosesNoTurn", func(t *testing.T) {
		t.Parallel()
		storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
			clock := newClock()
			s := storetest.MustOpen(t, b.DSN, store.Options{NowFunc: clock.Now})
			l := mustLockLane(t, s, "local")
			waiting := mustAccept(t, s, acceptFor("b", "w"))
			c := mustClaimUpTo(t, s, l, 1)[0]
			retryAt := clock.Now().Add(time.Hour)
			if err := s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID,
				Error: "connection refused", Class: inkwell.ClassNotSent, RetryAt: &retryAt}); err != nil {
				t.Fatalf("reschedule: %v", err)
			}
			ids := acceptInAccounts(t, s, "a", "a")
			ids["w"] = waiting.ID
			// b's only job waits out its back-off: a's jobs are claimed, b's is not.
			if got := nameOf(ids, mustClaimUpTo(t, s, l, 16)); !cmp.Equal(got, []string{"a1", "a2"}) {
				t.Fatalf("claim during b's back-off took %v, want [a1 a2]", got)
			}
			if cs := mustClaimUpTo(t, s, l, 16); len(cs) != 0 {
				t.Fatalf("claim before not_before took %v, want nothing", nameOf(ids, cs))
			}
			clock.Advance(time.Hour)
			if got := nameOf(ids, mustClaimUpTo(t, s, l, 16)); !cmp.Equal(got, []string{"w"}) {
				t.Errorf("claim at not_before took %v, want [w]", got)
			}
		})
	})
	// A batch's lines enter the queue one per turn, across its INSERT
	// chunks (100 lines each): another account is served beside it.
	t.Run("BatchLinesTakeTurns", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			var lines []string
			for i := 1; i <= 250; i++ {
				lines = append(lines, fmt.Sprintf("l%03d", i))
			}
			mustAcceptBatch(t, s, batchParams("big", lines...))
			ids := acceptInAccounts(t, s, "b", "b")
			for _, line := range []string{"l001", "l002"} {
				var id int64
				if err := s.DB().QueryRowContext(t.Context(), `SELECT id FROM jobs WHERE batch_custom_id = $1`, line).Scan(&id); err != nil {
					t.Fatalf("line %s's job: %v", line, err)
				}
				ids[line] = id
			}
			l := mustLockLane(t, s, "local")
			// Turn 0: l001 and b1; turn 1: l002 and b2. Not l101 or l201,
			// whose chunks start 100 and 200 turns later.
			if diff := cmp.Diff([]string{"l001", "l002", "b1", "b2"}, nameOf(ids, mustClaimUpTo(t, s, l, 4))); diff != "" {
				t.Errorf("claim of 4 after a batch of 250 and two jobs of b (-want +got):\n%s", diff)
			}
		})
	})
	// A retried job enters the queue again behind its account's queued
	// jobs, as a new one would; it does not go ahead of them, nor of
	// another account's.
	t.Run("RetryEntersBehindItsAccount", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			ids := acceptInAccounts(t, s, "a", "a", "a", "a", "b", "c", "c", "c", "c", "c", "c")
			l := mustLockLane(t, s, "local")
			c := mustClaimUpTo(t, s, l, 1)[0]
			if c.Job.ID != ids["a1"] {
				t.Fatalf("first claim took job %d, want a1 (%d)", c.Job.ID, ids["a1"])
			}
			if err := s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID,
				Error: "bad request", Class: inkwell.ClassRejected}); err != nil {
				t.Fatalf("fail a1: %v", err)
			}
			if _, err := s.RetryIfFailed(t.Context(), c.Job.ID, store.ActorCLI); err != nil {
				t.Fatalf("retry a1: %v", err)
			}
			var got []string
			for range 11 {
				got = append(got, nameOf(ids, mustClaimUpTo(t, s, l, 1))...)
			}
			// a1 takes a's turn 4, after a4, not the queue's last (c6's 5).
			want := []string{"b1", "c1", "a2", "c2", "a3", "c3", "a4", "c4", "a1", "c5", "c6"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("claims of one after a1's retry (-want +got):\n%s", diff)
			}
		})
	})
	// A rescheduled job (automatic retry) enters the queue again behind
	// its account's last turn, as a retried one does: here its back-off
	// is already over, so only its turn decides.
	t.Run("RescheduleEntersBehindItsAccount", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			ids := acceptInAccounts(t, s, "a", "a", "b")
			l := mustLockLane(t, s, "local")
			c := mustClaimUpTo(t, s, l, 1)[0]
			if c.Job.ID != ids["a1"] {
				t.Fatalf("first claim took job %d, want a1 (%d)", c.Job.ID, ids["a1"])
			}
			now := s.Now()
			if err := s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID,
				Error: "connection refused", Class: inkwell.ClassNotSent, RetryAt: &now}); err != nil {
				t.Fatalf("reschedule a1: %v", err)
			}
			var got []string
			for range 3 {
				got = append(got, nameOf(ids, mustClaimUpTo(t, s, l, 1))...)
			}
			// b1 in turn 0 (a1's, served), a2 in turn 1, a1 in turn 2.
			if diff := cmp.Diff([]string{"b1", "a2", "a1"}, got); diff != "" {
				t.Errorf("claims of one after a1's reschedule (-want +got):\n%s", diff)
			}
		})
	})
	// A job waiting out a back-off does not hold the turn back: an
	// account that arrives meanwhile is served beside the others from where
	// the claims are, not given every turn since the waiting job's.
	t.Run("BackOffHoldsNoFront", func(t *testing.T) {
		t.Parallel()
		storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
			s, l, _, ids := waitingJobThenFiveClaims(t, b)
			for k, v := range acceptInAccounts(t, s, "b", "b", "b") {
				ids[k] = v
			}
			// The front is a6's turn: b1 is served beside a6, b2 beside a7.
			if diff := cmp.Diff([]string{"a6", "b1"}, nameOf(ids, mustClaimUpTo(t, s, l, 2))); diff != "" {
				t.Errorf("claim of 2 after b arrived (-want +got):\n%s", diff)
			}
		})
	})
	// Accounts that send their next job as soon as their last one is
	// claimed (a drip) get the turn after it, not the same turn again:
	// they cannot keep the next turn from coming for an account with a
	// backlog. Three drips and a backlog, claims of one: round robin over
	// four accounts serves the backlog every fourth claim.
	t.Run("DripsDoNotStarveABacklog", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			storetest.MustQueue(t, s, "backlog", "bk", 100)
			seq := map[string]int{}
			send := func(a string) {
				seq[a]++
				mustAccept(t, s, acceptFor(a, fmt.Sprintf("%s%d", a, seq[a])))
			}
			for _, d := range []string{"d1", "d2", "d3"} {
				send(d)
			}
			l := mustLockLane(t, s, "local")
			served := map[string]int{}
			for range 60 {
				for _, c := range mustClaimUpTo(t, s, l, 1) {
					a := accountOf(t, c.Job)
					served[a]++
					if a != "backlog" {
						send(a)
					}
				}
			}
			if served["backlog"] < 14 || served["backlog"] > 16 {
				t.Errorf("in 60 claims of one over a backlog and three drips the backlog was served %d times, want 15 (every fourth): %v", served["backlog"], served)
			}
		})
	})
	// The turn the claims have reached never goes back: when the queue
	// empties, an account just served does not lose its place to a
	// newcomer's whole backlog, and the newcomer is not handed the turns
	// already served.
	t.Run("EmptyQueueKeepsTheClock", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			ids := acceptInAccounts(t, s, "a", "a", "a", "a", "a")
			l := mustLockLane(t, s, "local")
			if got := nameOf(ids, mustClaimUpTo(t, s, l, 5)); len(got) != 5 {
				t.Fatalf("claim of 5 took %v", got)
			}
			for k, v := range acceptInAccounts(t, s, "b", "b", "b") {
				ids[k] = v
			}
			ids["a6"] = mustAccept(t, s, acceptFor("a", "a6")).ID
			// Turn 4 (a5's, the last served): b1. Turn 5: b2, then a6. Then b3.
			var got []string
			for range 4 {
				got = append(got, nameOf(ids, mustClaimUpTo(t, s, l, 1))...)
			}
			if diff := cmp.Diff([]string{"b1", "b2", "a6", "b3"}, got); diff != "" {
				t.Errorf("claims of one after the queue emptied (-want +got):\n%s", diff)
			}
		})
	})
	// A job cancelled while queued gives its turn back: cancelling a
	// flood neither moves the turn the claims have reached (a newcomer
	// would wait behind the whole cancelled flood) nor leaves the flood's
	// account behind the turns it cancelled.
	t.Run("CancelGivesBackItsTurn", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			storetest.MustQueue(t, s, "flood", "fl", 200)
			storetest.MustQueue(t, s, "backlog", "bk", 50)
			l := mustLockLane(t, s, "local")
			mustClaimUpTo(t, s, l, 2) // turn 0: flood's and backlog's first
			flood := ids(t, s, `SELECT id FROM jobs WHERE account = 'flood' AND status = 'queued'`)
			if len(flood) != 199 {
				t.Fatalf("flood's queued jobs: %d, want 199", len(flood))
			}
			for _, id := range flood {
				if _, err := s.Cancel(t.Context(), id, store.ActorCLI); err != nil {
					t.Fatalf("cancel job %d: %v", id, err)
				}
			}
			ids := acceptInAccounts(t, s, "newcomer", "flood")
			// The newcomer enters turn 0, the one served; the flood's new
			// job turn 1, after its account's last (turn 0, served), beside
			// the backlog's second, which is older.
			var got []string
			for i := range 3 {
				name := nameOf(ids, mustClaimUpTo(t, s, l, 1))[0]
				if name == "" {
					name = fmt.Sprintf("other(claim %d)", i+1)
				}
				got = append(got, name)
			}
			if diff := cmp.Diff([]string{"newcomer1", "other(claim 2)", "flood1"}, got); diff != "" {
				t.Errorf("claims of one after the flood was cancelled (-want +got):\n%s", diff)
			}
		})
	})
	// Claiming a job whose back-off has ended, its turn behind the ones
	// reached, does not move the clock back: a newcomer still enters at
	// the turn reached, beside the others' next, not in the turns served.
	// (From a review: the "never back" guard had no test that could fail.)
	t.Run("ClockNeverGoesBack", func(t *testing.T) {
		t.Parallel()
		storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
			s, l, clock, ids := waitingJobThenFiveClaims(t, b)
			clock.Advance(time.Hour)
			if got := nameOf(ids, mustClaimUpTo(t, s, l, 1)); !cmp.Equal(got, []string{"w1"}) {
				t.Fatalf("claim after w1's back-off took %v, want w1", got)
			}
			for k, v := range acceptInAccounts(t, s, "b", "b") {
				ids[k] = v
			}
			var got []string
			for range 3 {
				got = append(got, nameOf(ids, mustClaimUpTo(t, s, l, 1))...)
			}
			// The clock is still at a5's turn: b1 there (a5's turn),
			// then a6 and b2 in the next.
			if diff := cmp.Diff([]string{"b1", "a6", "b2"}, got); diff != "" {
				t.Errorf("claims of one after w1's late claim (-want +got):\n%s", diff)
			}
		})
	})
	// A job cancelled while running keeps its turn (it was served): its
	// account's next job goes after it, not into the same turn again.
	t.Run("CancelWhileRunningKeepsItsTurn", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			ids := acceptInAccounts(t, s, "a", "a", "b", "b", "b")
			l := mustLockLane(t, s, "local")
			var got []string
			for range 3 {
				got = append(got, nameOf(ids, mustClaimUpTo(t, s, l, 1))...)
			}
			if !cmp.Equal(got, []string{"a1", "b1", "a2"}) {
				t.Fatalf("first three claims took %v, want a1 b1 a2", got)
			}
			if _, err := s.Cancel(t.Context(), ids["a2"], store.ActorCLI); err != nil {
				t.Fatalf("cancel a2 while running: %v", err)
			}
			ids["a3"] = mustAccept(t, s, acceptFor("a", "a3")).ID
			got = nil
			for range 3 {
				got = append(got, nameOf(ids, mustClaimUpTo(t, s, l, 1))...)
			}
			// a2 held turn 1 and keeps it: a3 takes turn 2, beside b3.
			if diff := cmp.Diff([]string{"b2", "b3", "a3"}, got); diff != "" {
				t.Errorf("claims of one after a2 was cancelled while running (-want +got):\n%s", diff)
			}
		})
	})
	// A claim locks only the jobs it claims: another lane's claim steps
	// past exactly those. The claim's statement runs inside a transaction
	// left open, and a second connection counts the queued jobs it can
	// still lock.
	t.Run("LocksOnlyWhatItClaims", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			if s.Dialect() != "postgres" {
				t.Skip("SQLite has one writer: a claim holds the whole database, not rows")
			}
			const accounts, each, n = 40, 3, 16
			for i := range accounts {
				storetest.MustQueue(t, s, fmt.Sprintf("acct-%02d", i), fmt.Sprintf("k%d", i), each)
			}
			ctx := t.Context()
			tx, err := store.ClaimDB(s).BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			rows, err := tx.QueryContext(ctx, store.ClaimSQL(s, nil), "local", nil, n)
			if err != nil {
				t.Fatalf("claim: %v", err)
			}
			claimed := 0
			for rows.Next() {
				claimed++
			}
			if err := rows.Err(); err != nil {
				t.Fatalf("claim: %v", err)
			}
			rows.Close()
			if claimed != n {
				t.Fatalf("claimed %d jobs, want %d", claimed, n)
			}
			var free int
			if err := s.WriteDB().QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT id FROM jobs WHERE status = 'queued' FOR UPDATE SKIP LOCKED) f`).Scan(&free); err != nil {
				t.Fatalf("count the jobs another lane can lock: %v", err)
			}
			if want := accounts*each - n; free != want {
				t.Errorf("another lane can lock %d queued jobs while a claim of %d is open, want %d: the claim locked %d jobs it did not claim",
					free, n, want, accounts*each-n-free)
			}
		})
	})
	t.Run("PlanReadsTheIndexAt100k", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			storetest.MustQueue(t, s, "m-flood", "m", 99_990)
			for i := range 10 {
				storetest.MustQueue(t, s, fmt.Sprintf("acct-%d", i), fmt.Sprintf("k%d", i), 1)
			}
			testClaimPlan(t, s)
			testTurnPlan(t, s)
		})
	})
}

// waitingJobThenFiveClaims opens a store on b with a clock of its own:
// account w's job w1 is claimed and rescheduled to wait an hour (turn 0
// then its next), account a sends a1…a8, and a claim of 5 takes a1…a5.
// ids names every job (w1 and a1…a8).
func waitingJobThenFiveClaims(t *testing.T, b storetest.Backend) (*store.Store, *store.LaneLock, *clock, map[string]int64) {
	t.Helper()
	clock := newClock()
	s := storetest.MustOpen(t, b.DSN, store.Options{NowFunc: clock.Now})
	l := mustLockLane(t, s, "local")
	mustAccept(t, s, acceptFor("w", "w1"))
	c := mustClaimUpTo(t, s, l, 1)[0]
	retryAt := clock.Now().Add(time.Hour)
	if err := s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID,
		Error: "connection refused", Class: inkwell.ClassNotSent, RetryAt: &retryAt}); err != nil {
		t.Fatalf("reschedule w1: %v", err)
	}
	ids := acceptInAccounts(t, s, "a", "a", "a", "a", "a", "a", "a", "a")
	ids["w1"] = c.Job.ID
	if got := nameOf(ids, mustClaimUpTo(t, s, l, 5)); !cmp.Equal(got, []string{"a1", "a2", "a3", "a4", "a5"}) {
		t.Fatalf("claim of 5 took %v, want a1…a5", got)
	}
	return s, l, clock, ids
}

func testFloodDoesNotStarve(t *testing.T, s *store.Store, n int, single string, floods []string) {
	for _, f := range floods {
		storetest.MustQueue(t, s, f, f, 10_000)
	}
	l := mustLockLane(t, s, "local")
	last := map[string]int64{} // per account: the id of its last job claimed
	claim := func() []*store.Claimed {
		cs := mustClaimUpTo(t, s, l, n)
		if len(cs) != n {
			t.Fatalf("claim of %d took %d jobs with thousands queued", n, len(cs))
		}
		for _, c := range cs { // ids ascend: oldest first within each account
			a := accountOf(t, c.Job)
			if c.Job.ID <= last[a] {
				t.Fatalf("account %s: job %d claimed after job %d", a, c.Job.ID, last[a])
			}
			last[a] = c.Job.ID
		}
		return cs
	}
	for range 3 { // the floods' turn is under way when single's job arrives
		claim()
	}
	job := mustAccept(t, s, acceptFor(single, "one job"))
	accounts := len(floods) + 1 // N: the accounts with queued work
	for i := 1; i <= accounts; i++ {
		for _, c := range claim() {
			if c.Job.ID == job.ID {
				return
			}
		}
	}
	t.Errorf("%s's one job (%d) not claimed within %d claims of %d, with %d accounts queued", single, job.ID, accounts, n, accounts)
}

// testClaimPlan checks that the claim reads queued jobs through the
// jobs_queued_turn index only, in its order: no scan of the table, no
// sort, no bitmap scan of the queue.
func testClaimPlan(t *testing.T, s *store.Store) {
	text := readPlan(t, s, explainClaim(t, s))
	checkQueuePlan(t, s, "claim", text)
	if !strings.Contains(text, "jobs_queued_turn") {
		t.Errorf("the claim's plan does not read jobs_queued_turn:\n%s", text)
	}
	t.Logf("claim's plan:\n%s", text)
}

// testTurnPlan checks that the turn a job enters the queue with (accept,
// retry, reschedule, batch) is claim_clock's row, for the turn the claims
// have reached, and one probe of jobs_account_turn for the account's last
// turn.
func testTurnPlan(t *testing.T, s *store.Store) {
	ctx := t.Context()
	prefix := "EXPLAIN QUERY PLAN "
	if s.Dialect() == "postgres" {
		prefix = "EXPLAIN "
	}
	rows, err := s.WriteDB().QueryContext(ctx, prefix+store.TurnSQL(s), "acct-3")
	if err != nil {
		t.Fatalf("explain the turn: %v", err)
	}
	text := readPlan(t, s, rows)
	checkQueuePlan(t, s, "turn", text)
	for _, read := range []string{"claim_clock", "jobs_account_turn"} {
		if !strings.Contains(text, read) {
			t.Errorf("the turn's plan does not read %s:\n%s", read, text)
		}
	}
	t.Logf("turn's plan:\n%s", text)
}

// checkQueuePlan fails when a plan at 100,000 queued jobs reads the whole
// queue: a scan of jobs other than an ordered read of jobs_queued_turn
// (which stops at its LIMIT), a sort by turn (the claim's
// final sort of its n rows by id is not one), or a bitmap scan of a queue
// index
// (a bitmap scan reads every entry its condition matches before its
// first row; only the claim's UPDATE may use one, on the primary key, for
// its n ids).
func checkQueuePlan(t *testing.T, s *store.Store, what, text string) {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		scan := strings.Contains(line, "SCAN jobs") || strings.Contains(line, "SCAN q ")
		ordered := strings.Contains(line, "INDEX jobs_queued_turn")
		bad := strings.Contains(line, "Seq Scan on jobs") ||
			(strings.Contains(line, "Sort Key:") && strings.Contains(line, "claim_turn")) ||
			strings.Contains(line, "USE TEMP B-TREE") ||
			(scan && !ordered) ||
			(strings.Contains(line, "Bitmap Index Scan on") && !strings.Contains(line, "Bitmap Index Scan on jobs_pkey"))
		if bad {
			t.Errorf("the %s's plan at 100,000 queued jobs reads the queue: %s\n%s", what, strings.TrimSpace(line), text)
		}
	}
}

// readPlan reads an EXPLAIN's lines (EXPLAIN QUERY PLAN's detail column
// on SQLite) as one text.
func readPlan(t *testing.T, s *store.Store, rows *sql.Rows) string {
	t.Helper()
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		var err error
		if s.Dialect() == "postgres" {
			err = rows.Scan(&line)
		} else {
			var id, parent, unused int
			err = rows.Scan(&id, &parent, &unused, &line)
		}
		if err != nil {
			t.Fatalf("read the plan: %v", err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read the plan: %v", err)
	}
	return strings.Join(plan, "\n")
}

// explainClaim returns the plan of a claim of 16. On PostgreSQL it is
// the generic plan that the claim's own connections build once and keep
// (postgres_claim.go), with their settings: the statement prepared on one
// of them, then EXPLAIN EXECUTE.
func explainClaim(t *testing.T, s *store.Store) *sql.Rows {
	t.Helper()
	ctx := t.Context()
	if s.Dialect() != "postgres" {
		rows, err := store.ClaimDB(s).QueryContext(ctx, "EXPLAIN QUERY PLAN "+store.ClaimSQL(s, nil), "local", s.Now().UTC().Format(store.TimeLayout), 16)
		if err != nil {
			t.Fatalf("explain the claim: %v", err)
		}
		return rows
	}
	conn, err := store.ClaimDB(s).Conn(ctx)
	if err != nil {
		t.Fatalf("explain the claim: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	var mode string
	if err := conn.QueryRowContext(ctx, "SELECT current_setting('plan_cache_mode')").Scan(&mode); err != nil || mode != "force_generic_plan" {
		t.Errorf("a claim connection's plan_cache_mode is %q (%v), want force_generic_plan: the plan below is not the one it keeps", mode, err)
	}
	if _, err := conn.ExecContext(ctx, "PREPARE claim_plan AS "+store.ClaimSQL(s, nil)); err != nil {
		t.Fatalf("prepare the claim: %v", err)
	}
	t.Cleanup(func() { conn.ExecContext(context.Background(), "DEALLOCATE claim_plan") })
	rows, err := conn.QueryContext(ctx, "EXPLAIN EXECUTE claim_plan('local', now(), 16)")
	if err != nil {
		t.Fatalf("explain the claim: %v", err)
	}
	return rows
}

// acceptInAccounts accepts one job per account named, in order, and
// returns their ids by name: account and its count so far ("a1", "a2").
func acceptInAccounts(t *testing.T, s *store.Store, accounts ...string) map[string]int64 {
	t.Helper()
	ids, seen := map[string]int64{}, map[string]int{}
	for _, a := range accounts {
		seen[a]++
		name := fmt.Sprintf("%s%d", a, seen[a])
		ids[name] = mustAccept(t, s, acceptFor(a, name)).ID
	}
	return ids
}

// acceptFor is acceptParams for account, keyed by name.
func acceptFor(account, name string) store.AcceptParams {
	payload, _ := json.Marshal(inkwell.Request{Prompt: "p " + name, Account: account, MaxWords: inkwell.DefaultMaxWords})
	return store.AcceptParams{Account: account, IdempotencyKey: "key-" + account + "-" + name, RequestHash: inkwell.RequestHash(payload), Payload: payload}
}

// nameOf names claimed jobs by acceptInAccounts' names, in the order
// ClaimUpTo returns them (id order).
func nameOf(ids map[string]int64, cs []*store.Claimed) []string {
	byID := map[int64]string{}
	for name, id := range ids {
		byID[id] = name
	}
	var out []string
	for _, c := range cs {
		out = append(out, byID[c.Job.ID])
	}
	return out
}

func accountOf(t *testing.T, job inkwell.Job) string {
	t.Helper()
	var r inkwell.Request
	if err := json.Unmarshal(job.Payload, &r); err != nil {
		t.Fatalf("job %d payload: %v", job.ID, err)
	}
	return r.Account
}

func mustClaimUpTo(t *testing.T, s *store.Store, l *store.LaneLock, n int) []*store.Claimed {
	t.Helper()
	cs, err := s.ClaimUpTo(t.Context(), l, n)
	if err != nil {
		t.Fatalf("ClaimUpTo %d: %v", n, err)
	}
	return cs
}
