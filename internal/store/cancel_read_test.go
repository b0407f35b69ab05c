package store_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_AttemptsNotRunning: of the ids a lane asks about, only the
// attempts no longer running come back, with how they ended; unknown ids
// are left out; more ids than one read takes are read in batches.
func TestStore_AttemptsNotRunning(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		l := mustLockLane(t, s, "local")
		var claimed []*store.Claimed
		for i := range 3 {
			mustAccept(t, s, acceptParams(fmt.Sprintf("k%d", i), "p"))
			claimed = append(claimed, claimOne(t, s, l))
		}
		if got, err := s.AttemptsNotRunning(t.Context(), nil); err != nil || len(got) != 0 {
			t.Errorf("no ids: %v, %v; want nothing", got, err)
		}
		if _, err := s.Cancel(t.Context(), claimed[0].Job.ID, "cli"); err != nil {
			t.Fatal(err)
		}
		if err := s.CompleteIfRunning(t.Context(), completeParams(claimed[1])); err != nil {
			t.Fatal(err)
		}
		// Many ids, most unknown: more than one batch.
		ids := []int64{claimed[2].Attempt.ID, claimed[1].Attempt.ID}
		for i := range 1200 {
			ids = append(ids, int64(100000+i))
		}
		ids = append(ids, claimed[0].Attempt.ID)
		got, err := s.AttemptsNotRunning(t.Context(), ids)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, func(a, b store.EndedAttempt) int { return int(a.ID - b.ID) })
		want := []store.EndedAttempt{
			{ID: claimed[0].Attempt.ID, Status: inkwell.StatusFailed, Class: inkwell.ClassCancelled},
			{ID: claimed[1].Attempt.ID, Status: inkwell.StatusDone},
		}
		if !slices.Equal(got, want) {
			t.Errorf("AttemptsNotRunning = %+v, want %+v (the running attempt and unknown ids left out)", got, want)
		}
	})
}
