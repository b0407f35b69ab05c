package limiter_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/inkwell/inkwell/internal/limiter"
)

// TestLimiter_WaitAtMostSaysNoToAPause: during a 429's pause longer than
// most, WaitAtMost answers at once (no time passes) with how long the
// pause has left; it admits nothing, so the pause's end admits the calls
// that did wait as before. A pause shorter than most is waited out.
func TestLimiter_WaitAtMostSaysNoToAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(limiter.Config{})
		if err := l.Wait(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		l.Done(0, 0, rateLimited(30*time.Second))
		start := time.Now()
		err := l.WaitAtMost(t.Context(), 0, time.Second)
		var busy *limiter.BusyError
		if !errors.As(err, &busy) {
			t.Fatalf("WaitAtMost during a 30 s pause: %v; want a *BusyError", err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("WaitAtMost waited %v before saying no to a pause it could not outlast; want 0", waited)
		}
		if busy.For != 30*time.Second {
			t.Errorf("BusyError.For = %v; want the pause's 30s", busy.For)
		}
		if n := l.InFlight(); n != 0 {
			t.Errorf("%d calls in flight after a refusal; want 0 (nothing admitted)", n)
		}
		time.Sleep(29500 * time.Millisecond)
		if err := l.WaitAtMost(t.Context(), 0, time.Second); err != nil {
			t.Errorf("WaitAtMost 0.5 s before the pause ends, at most 1 s: %v; want admitted", err)
		}
		if waited := time.Since(start); waited != 30*time.Second {
			t.Errorf("admitted %v after the 429; want at the pause's end, 30s", waited)
		}
	})
}

// TestLimiter_WaitAtMostGivesUpInLine: at 60 rpm (one call a second) a
// third call in line is not admitted within 1.5 s; WaitAtMost gives up
// after exactly that, leaves the line (the call behind it moves up), and
// estimates the rest of the line at the limit's pace.
func TestLimiter_WaitAtMostGivesUpInLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(limiter.Config{RPM: 60})
		if err := l.Wait(t.Context(), 0); err != nil { // the bucket's one call: now empty
			t.Fatal(err)
		}
		wait := admissions(t, l, 0) // admitted at 1 s
		synctest.Wait()
		start := time.Now()
		err := l.WaitAtMost(t.Context(), 0, 1500*time.Millisecond)
		var busy *limiter.BusyError
		if !errors.As(err, &busy) {
			t.Fatalf("WaitAtMost behind a call at 60 rpm, at most 1.5 s: %v; want a *BusyError", err)
		}
		if waited := time.Since(start); waited != 1500*time.Millisecond {
			t.Errorf("gave up after %v; want 1.5s", waited)
		}
		// At 1.5 s: the call ahead went at 1 s, the bucket refills by 2 s.
		if busy.For != 500*time.Millisecond {
			t.Errorf("BusyError.For = %v; want 500ms (the next call the pace allows, at 2 s)", busy.For)
		}
		if got := wait(); got[0] != time.Second {
			t.Errorf("the call ahead was admitted at %v; want 1s", got[0])
		}
		if n := l.Waiting(); n != 0 {
			t.Errorf("%d calls still in line after WaitAtMost gave up; want 0", n)
		}
	})
}
