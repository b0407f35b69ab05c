package store_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestRecover_DryRunNamesTheRunItWouldBe: a dry run reports RunID 0
// ("nothing was changed"), and its PreviousStopped (printed as "would mark
// the previous holder's lanes row stopped: ...", previous_stopped in
// --json) names no id of a rolled-back run: the real run that follows
// writes the same reason with its own id.
func TestRecover_DryRunNamesTheRunItWouldBe(t *testing.T) {
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		// A holder that went away without recording its stop.
		a, err := s.LockLane(ctx, "local")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterLane(ctx, a); err != nil {
			t.Fatal(err)
		}
		a.Release()
		// Two dry runs, then the real one.
		var dry []string
		for range 2 {
			l, err := s.LockLane(ctx, "local")
			if err != nil {
				t.Fatal(err)
			}
			rep, err := s.Recover(ctx, l, true)
			l.Release()
			if err != nil {
				t.Fatal(err)
			}
			dry = append(dry, rep.PreviousStopped)
		}
		l, err := s.LockLane(ctx, "local")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		rep, err := s.Recover(ctx, l, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("dry runs said %q; the real run %d wrote %q", dry, rep.RunID, rep.PreviousStopped)
		// A dry run's id is rolled back with it (on PostgreSQL the
		// sequence is not, so the real run's differs): it says "this
		// recovery run" where the real run names its id.
		real := strings.Replace(rep.PreviousStopped, fmt.Sprintf("recovery run %d", rep.RunID), "this recovery run", 1)
		for i, d := range dry {
			if d != real || regexp.MustCompile(`recovery run [0-9]`).MatchString(d) {
				t.Errorf("dry run %d said it would write %q; the real run wrote %q", i+1, d, rep.PreviousStopped)
			}
		}
	})
}
