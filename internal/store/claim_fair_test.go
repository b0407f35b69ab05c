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

// Fair claims (claim_fair.go): round robin across the accounts with ready
// queued work, oldest first within each.

func TestStore_ClaimFair(t *testing.T) {
	t.Parallel()
	t.Run("FloodDoesNotStarve", func(t *testing.T) {
		t.Parallel()
		// floods accounts with 10,000 jobs each, then one job arrives for
		// single: it must be claimed within N claims, N the number of
		// accounts with queued work. single's name sorts before the floods
		// ("a-") or after them ("z-"): the turn has to wrap for one.
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
			// Round 0 a1 b1 c1, round 1 a2: the next claim starts after a.
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
	// A claim locks only the jobs it claims: another lane's claim steps
	// past exactly those. The claim's statement runs inside a transaction
	// left open, and a second connection counts the queued jobs it can
	// still lock. The cursor sits near the end of the accounts, so the
	// turn wraps round: the accounts after it, then those from the first.
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
			rows, err := tx.QueryContext(ctx, store.ClaimSQL(s, nil), "local", nil, n, "acct-35")
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
		})
	})
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
// jobs_queued_account index only: no scan of the queue.
func testClaimPlan(t *testing.T, s *store.Store) {
	rows := explainClaim(t, s)
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
	text := strings.Join(plan, "\n")
	for _, bad := range []string{"SCAN jobs", "Seq Scan on jobs"} {
		if strings.Contains(text, bad) {
			t.Errorf("the claim's plan at 100,000 queued jobs has %q:\n%s", bad, text)
		}
	}
	// A bitmap scan reads every entry its condition matches before the
	// first row: on a queued index that is the queue (or all of it after
	// the cursor). Only the UPDATE's id = ANY(picked) may use one, on
	// the primary key (n entries).
	for _, line := range plan {
		if strings.Contains(line, "Bitmap Index Scan on") && !strings.Contains(line, "Bitmap Index Scan on jobs_pkey") {
			t.Errorf("the claim's plan at 100,000 queued jobs has a bitmap scan of a queue index: %s\n%s", strings.TrimSpace(line), text)
		}
	}
	if !strings.Contains(text, "jobs_queued_account") {
		t.Errorf("the claim's plan does not use jobs_queued_account:\n%s", text)
	}
	if s.Dialect() == "postgres" && !strings.Contains(text, "$3") {
		t.Errorf("the claim's plan is not the generic plan the claim's connections keep (no $3 in it):\n%s", text)
	}
	t.Logf("plan:\n%s", text)
}

// explainClaim returns the plan of a claim of 16 with the cursor at the
// start. On PostgreSQL it is the generic plan that the claim's own
// connections build once and keep (postgres_claim.go), with their
// settings: the statement prepared on one of them, then EXPLAIN EXECUTE.
func explainClaim(t *testing.T, s *store.Store) *sql.Rows {
	t.Helper()
	ctx := t.Context()
	if s.Dialect() != "postgres" {
		rows, err := store.ClaimDB(s).QueryContext(ctx, "EXPLAIN QUERY PLAN "+store.ClaimSQL(s, nil), "local", s.Now().UTC().Format(store.TimeLayout), 16, "")
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
	if _, err := conn.ExecContext(ctx, "PREPARE claim_plan AS "+store.ClaimSQL(s, nil)); err != nil {
		t.Fatalf("prepare the claim: %v", err)
	}
	t.Cleanup(func() { conn.ExecContext(context.Background(), "DEALLOCATE claim_plan") })
	rows, err := conn.QueryContext(ctx, "EXPLAIN EXECUTE claim_plan('local', now(), 16, '')")
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
