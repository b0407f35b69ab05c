package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_OutcomeGroup: outcomes that share one commit are each fenced
// by their own attempt id and isolated from each other: a member that is
// already done, fenced out, or refused by the database gets its own error
// and writes nothing, and the others commit.
func TestStore_OutcomeGroup(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		// With a failure among them, and with completions only (on
		// PostgreSQL one statement that is its own transaction).
		for _, withFail := range []bool{true, false} {
			t.Run(fmt.Sprintf("with-failure=%t", withFail), func(t *testing.T) { outcomeGroupRefusals(t, s, withFail) })
		}
	})
}

func outcomeGroupRefusals(t *testing.T, s *store.Store, withFail bool) {
	var c []*store.Claimed
	for _, k := range []string{"good", "twice", "negative", "fail", "stale"} {
		k = fmt.Sprintf("%s-%t", k, withFail)
		mustAccept(t, s, acceptParams(k, "prompt "+k))
		c = append(c, mustClaim(t, s, "local"))
	}
	good, twice, negative, fail, stale := c[0], c[1], c[2], c[3], c[4]
	if err := s.CompleteIfRunning(t.Context(), completeParams(twice)); err != nil {
		t.Fatal(err)
	}
	neg := completeParams(negative)
	neg.AmountMicros = -1 // refused by the charges CHECK, after the member's first writes
	staleP := completeParams(stale)
	staleP.AttemptID = good.Attempt.ID // another job's attempt: fenced out
	isolated := store.IsolatedGroups(s)
	type want struct {
		c                         *store.Claimed
		ok, alreadyDone, conflict bool
		status                    string
		result                    bool
	}
	outcomes := []store.Outcome{{Complete: ptr(completeParams(good))}, {Complete: ptr(completeParams(twice))}, {Complete: &neg}}
	wants := []want{{c: good, ok: true, status: inkwell.StatusDone, result: true},
		{c: twice, alreadyDone: true, conflict: true, status: inkwell.StatusDone, result: true},
		{c: negative, status: inkwell.StatusRunning}}
	if withFail {
		outcomes = append(outcomes, store.Outcome{Fail: &store.FailParams{JobID: fail.Job.ID, AttemptID: fail.Attempt.ID, Error: "provider: 502", Class: inkwell.ClassProviderError}})
		wants = append(wants, want{c: fail, ok: true, status: inkwell.StatusFailed})
	}
	outcomes = append(outcomes, store.Outcome{Complete: &staleP})
	wants = append(wants, want{c: stale, conflict: true, status: inkwell.StatusRunning})
	errs := store.CommitOutcomes(s, outcomes)
	for i, w := range wants {
		err := errs[i]
		switch {
		case w.ok && err != nil:
			t.Errorf("member %d: %v, want committed", i, err)
		case !w.ok && err == nil:
			t.Errorf("member %d committed, want refused", i)
		case errors.Is(err, store.ErrAlreadyDone) != w.alreadyDone:
			t.Errorf("member %d: %v, already done = %v, want %v", i, err, errors.Is(err, store.ErrAlreadyDone), w.alreadyDone)
		case w.conflict && inkwell.ErrorCode(err) != inkwell.ECONFLICT:
			t.Errorf("member %d: %v, want %s", i, err, inkwell.ECONFLICT)
		}
	}
	if got := store.IsolatedGroups(s) - isolated; got != 1 {
		t.Errorf("the group ran again with savepoints %d times, want once (its plain transaction refused)", got)
	}
	for _, w := range wants {
		d, err := s.Show(t.Context(), w.c.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Job.Status != w.status || (d.Result != nil) != w.result || (d.Charge != nil) != w.result ||
			d.Attempts[len(d.Attempts)-1].Status != w.status {
			t.Errorf("job %d: %s, result %v, charge %v, attempt %s; want %s, result and charge %v",
				w.c.Job.ID, d.Job.Status, d.Result != nil, d.Charge != nil, d.Attempts[len(d.Attempts)-1].Status, w.status, w.result)
		}
	}
}

// TestStore_OutcomeGroupAllGood: a group whose members all succeed
// commits in its one plain transaction, with no savepoints, and writes
// each member exactly as a lone outcome would: completions done with their
// result and charge, a failure failed, a reschedule queued again.
func TestStore_OutcomeGroupAllGood(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		var c []*store.Claimed
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			mustAccept(t, s, acceptParams(k, "prompt "+k))
			c = append(c, mustClaim(t, s, "local"))
		}
		retryAt := s.Now().Add(time.Hour)
		isolated := store.IsolatedGroups(s)
		errs := store.CommitOutcomes(s, []store.Outcome{
			{Complete: ptr(completeParams(c[0]))},
			{Fail: &store.FailParams{JobID: c[1].Job.ID, AttemptID: c[1].Attempt.ID, Error: "provider: 400", Class: inkwell.ClassRejected}},
			{Complete: ptr(completeParams(c[2]))},
			{Fail: &store.FailParams{JobID: c[3].Job.ID, AttemptID: c[3].Attempt.ID, Error: "provider: 502", Class: inkwell.ClassProviderError,
				RetryAt: &retryAt, ProviderHonoursKeys: true}},
			{Complete: ptr(completeParams(c[4]))},
		})
		for i, err := range errs {
			if err != nil {
				t.Errorf("member %d: %v, want committed", i, err)
			}
		}
		if got := store.IsolatedGroups(s) - isolated; got != 0 {
			t.Errorf("a group of good members ran again with savepoints %d times, want never", got)
		}
		for i, want := range []string{inkwell.StatusDone, inkwell.StatusFailed, inkwell.StatusDone, inkwell.StatusQueued, inkwell.StatusDone} {
			d, err := s.Show(t.Context(), c[i].Job.ID)
			if err != nil {
				t.Fatal(err)
			}
			done := want == inkwell.StatusDone
			attempt := want
			if want == inkwell.StatusQueued {
				attempt = inkwell.StatusFailed
			}
			if d.Job.Status != want || (d.Result != nil) != done || (d.Charge != nil) != done || len(d.Attempts) != 1 || d.Attempts[0].Status != attempt {
				t.Errorf("member %d, job %d: %s, result %v, charge %v, attempts %+v; want %s, result and charge %v, one attempt %s",
					i, c[i].Job.ID, d.Job.Status, d.Result != nil, d.Charge != nil, d.Attempts, want, done, attempt)
			}
			if done && (d.Result.Text != completeParams(c[i]).Text || d.Charge.AmountMicros != completeParams(c[i]).AmountMicros) {
				t.Errorf("member %d: result %q, charge %d; want %q, %d", i, d.Result.Text, d.Charge.AmountMicros,
					completeParams(c[i]).Text, completeParams(c[i]).AmountMicros)
			}
		}
	})
}

func ptr[T any](v T) *T { return &v }
