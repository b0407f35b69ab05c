package store_test

import (
	"errors"
	"testing"

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
		var c []*store.Claimed
		for _, k := range []string{"good", "twice", "negative", "fail", "stale"} {
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
		errs := store.CommitOutcomes(s, []store.Outcome{
			{Complete: ptr(completeParams(good))},
			{Complete: ptr(completeParams(twice))},
			{Complete: &neg},
			{Fail: &store.FailParams{JobID: fail.Job.ID, AttemptID: fail.Attempt.ID, Error: "provider: 502", Class: inkwell.ClassProviderError}},
			{Complete: &staleP},
		})
		for i, want := range []struct {
			ok, alreadyDone, conflict bool
		}{{ok: true}, {alreadyDone: true, conflict: true}, {}, {ok: true}, {conflict: true}} {
			err := errs[i]
			switch {
			case want.ok && err != nil:
				t.Errorf("member %d: %v, want committed", i, err)
			case !want.ok && err == nil:
				t.Errorf("member %d committed, want refused", i)
			case errors.Is(err, store.ErrAlreadyDone) != want.alreadyDone:
				t.Errorf("member %d: %v, already done = %v, want %v", i, err, errors.Is(err, store.ErrAlreadyDone), want.alreadyDone)
			case want.conflict && inkwell.ErrorCode(err) != inkwell.ECONFLICT:
				t.Errorf("member %d: %v, want %s", i, err, inkwell.ECONFLICT)
			}
		}
		for _, w := range []struct {
			c      *store.Claimed
			status string
			result bool
		}{{good, inkwell.StatusDone, true}, {twice, inkwell.StatusDone, true}, {negative, inkwell.StatusRunning, false},
			{fail, inkwell.StatusFailed, false}, {stale, inkwell.StatusRunning, false}} {
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
	})
}

func ptr[T any](v T) *T { return &v }
