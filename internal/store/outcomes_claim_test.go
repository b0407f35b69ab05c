package store_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// An outcome may claim the next job for the slot it frees, in its own
// transaction (CompleteAndClaim, FailAndClaim; outcomes.go, claimNext):
// where a claim is a transaction (SQLite), the jobs are claimed exactly as
// ClaimUpTo claims them (lowest turn first, under its lock) and commit
// with the outcomes; where it is one statement of its own (PostgreSQL),
// nothing is claimed and the lane claims as before. Never a claim without
// the lock, for a member refused, or for one that did not ask.
func TestStore_OutcomeClaimsNext(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		claims := s.Dialect() == "sqlite"
		ids := acceptInAccounts(t, s, "a", "a", "b", "a", "c", "b")
		l := mustLockLane(t, s, "local")
		first := mustClaimUpTo(t, s, l, 2)
		if diff := cmp.Diff([]string{"a1", "b1"}, nameOf(ids, first)); diff != "" {
			t.Fatalf("first claim (-want +got):\n%s", diff)
		}
		next, errs := store.CommitOutcomesNext(s, []store.Outcome{
			{Complete: ptr(completeParams(first[0])), Next: l},
			{Fail: &store.FailParams{JobID: first[1].Job.ID, AttemptID: first[1].Attempt.ID, Error: "provider: 400", Class: inkwell.ClassRejected}, Next: l},
		})
		for i, err := range errs {
			if err != nil {
				t.Fatalf("member %d: %v", i, err)
			}
		}
		if d := mustShow(t, s, first[0].Job.ID); d.Job.Status != inkwell.StatusDone {
			t.Errorf("a1 is %s, want done", d.Job.Status)
		}
		if d := mustShow(t, s, first[1].Job.ID); d.Job.Status != inkwell.StatusFailed {
			t.Errorf("b1 is %s, want failed", d.Job.Status)
		}
		if !claims {
			if next[0] != nil || next[1] != nil {
				t.Fatalf("PostgreSQL claimed %+v, %+v with the outcomes; want nothing (its claim is a statement of its own)", next[0], next[1])
			}
			next = mustClaimUpTo(t, s, l, 2) // the lane claims as before
		}
		// Turn 0's last job, c1, then turn 1's first, a2; claims come in id order.
		if diff := cmp.Diff([]string{"a2", "c1"}, nameOf(ids, next)); diff != "" {
			t.Fatalf("jobs claimed next, one per member in order (-want +got):\n%s", diff)
		}
		for _, c := range next {
			d := mustShow(t, s, c.Job.ID)
			if d.Job.Status != inkwell.StatusRunning || d.Job.Lane != "local" || len(d.Attempts) != 1 ||
				d.Attempts[0].ID != c.Attempt.ID || d.Attempts[0].Status != inkwell.StatusRunning || d.Attempts[0].AttemptNumber != 1 {
				t.Errorf("claimed job %d: %s on %q, attempts %+v; want running on local with attempt %d, number 1, running",
					c.Job.ID, d.Job.Status, d.Job.Lane, d.Attempts, c.Attempt.ID)
			}
			if claims {
				// One transaction, one time: the claim's start is the outcome's end.
				if a1 := mustShow(t, s, first[0].Job.ID); !d.Attempts[0].StartedAt.Equal(*a1.Job.FinishedAt) {
					t.Errorf("claimed at %v, the outcome committed at %v: want the same transaction", d.Attempts[0].StartedAt, a1.Job.FinishedAt)
				}
			}
		}

		// Not asked (nil lock): nothing claimed.
		if c, err := s.CompleteAndClaim(t.Context(), completeParams(next[0]), nil); err != nil || c != nil {
			t.Errorf("CompleteAndClaim without a lock = %+v, %v; want nothing claimed, committed", c, err)
		}
		// A lock no longer held claims nothing; the outcome commits.
		gone, err := s.LockLane(t.Context(), "gone")
		if err != nil {
			t.Fatal(err)
		}
		gone.Release()
		if c, err := s.CompleteAndClaim(t.Context(), completeParams(next[1]), gone); err != nil || c != nil {
			t.Errorf("CompleteAndClaim under a released lock = %+v, %v; want nothing claimed, committed", c, err)
		}
		for _, c := range next {
			if d := mustShow(t, s, c.Job.ID); d.Job.Status != inkwell.StatusDone {
				t.Errorf("job %d is %s, want done", c.Job.ID, d.Job.Status)
			}
		}

		// A group with a refused member claims nothing; its good member commits.
		good := mustClaimUpTo(t, s, l, 1)[0] // b2
		stale := completeParams(good)
		stale.AttemptID = first[0].Attempt.ID // a done attempt of another job: fenced out
		next, errs = store.CommitOutcomesNext(s, []store.Outcome{
			{Complete: ptr(completeParams(good)), Next: l},
			{Complete: &stale, Next: l},
		})
		if errs[0] != nil || inkwell.ErrorCode(errs[1]) != inkwell.ECONFLICT {
			t.Errorf("group with a fenced member = %v, %v; want committed, %s", errs[0], errs[1], inkwell.ECONFLICT)
		}
		if next[0] != nil || next[1] != nil {
			t.Errorf("a group with a refused member claimed %+v, %+v; want nothing", next[0], next[1])
		}

		// The queue's last job (a3), then an empty queue: nothing more.
		last := mustClaimUpTo(t, s, l, 1)
		if c, err := s.CompleteAndClaim(t.Context(), completeParams(last[0]), l); err != nil || c != nil {
			t.Errorf("CompleteAndClaim on an empty queue = %+v, %v; want nothing claimed, committed", c, err)
		}
		if cs := mustClaimUpTo(t, s, l, 6); len(cs) != 0 {
			t.Errorf("jobs left queued: %v", nameOf(ids, cs))
		}
	})
}
