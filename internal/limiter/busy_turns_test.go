package limiter_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/inkwell/inkwell/internal/limiter"
)

// givenBackTimes runs three WaitAtMost callers of tokens each, joining the
// line 100 ms apart and giving up after 300 ms, and returns when each was
// told to come back (its return time plus BusyError.For), since start.
func givenBackTimes(t *testing.T, l *limiter.Limiter, tokens int, start time.Time) []time.Duration {
	t.Helper()
	back := make([]time.Duration, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		time.Sleep(100 * time.Millisecond)
		wg.Go(func() {
			var busy *limiter.BusyError
			if err := l.WaitAtMost(t.Context(), tokens, 300*time.Millisecond); !errors.As(err, &busy) {
				t.Errorf("caller %d: %v; want a *BusyError", i, err)
				return
			}
			back[i] = time.Since(start) + busy.For
		})
	}
	wg.Wait()
	return back
}

// TestLimiter_GivenBackInTurnUnderTPM: callers given back one after
// another come back one after another, as the limits let them go, for a
// provider limited by tpm too. At 6000 tpm (100 tokens/s) with calls of
// 1000 tokens, one call goes every 10 s. Three callers given back in a
// row must be told to come back about 10 s apart; the promises once
// counted as requests only, never their tokens, so all three were told
// the same instant.
func TestLimiter_GivenBackInTurnUnderTPM(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(limiter.Config{TPM: 6000})
		start := time.Now()
		if err := l.Wait(t.Context(), 1000); err != nil {
			t.Fatal(err)
		}
		l.Done(1000, 0, nil)
		back := givenBackTimes(t, l, 1000, start)
		t.Logf("told to come back at: %v", back)
		for i := 1; i < 3; i++ {
			if back[i]-back[i-1] < 5*time.Second {
				t.Errorf("callers %d and %d (in line order) told to come back at %v and %v: want them a call's pace (about 10 s) apart, not together",
					i-1, i, back[i-1], back[i])
			}
		}
	})
}

// TestLimiter_GivenBackInTurnAfterAPause: rpm 6 (one call every 10 s)
// and a 429 with Retry-After 30 s. Three callers given back during the
// pause were all told "30 s" by WaitAtMost's early answer, which promised
// nothing: they came back together at the pause's end, when the pace lets
// one go, and the other two were held and given back again. Each is told
// its own turn (about 30, 40, 50 s), as callers given back in line are.
func TestLimiter_GivenBackInTurnAfterAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(limiter.Config{RPM: 6})
		start := time.Now()
		if err := l.Wait(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		l.Done(0, 0, rateLimited(30*time.Second))
		back := givenBackTimes(t, l, 0, start)
		t.Logf("told to come back at: %v", back)
		for i := 1; i < 3; i++ {
			if back[i]-back[i-1] < 5*time.Second {
				t.Errorf("callers %d and %d (in line order) told to come back at %v and %v: want them a call's pace (10 s) apart, not together at the pause's end",
					i-1, i, back[i-1], back[i])
			}
		}
	})
}

// TestLimiter_TPMEstimateMatchesAdmission: at 6000 tpm, after one call
// of 1000 tokens, the next call of 1000 tokens is admitted at 10 s (the
// bucket holds a tenth of a second's tokens and a larger call waits until
// it is full, leaving a debt). A caller given back at 0.3 s must be told
// about 9.7 s; the estimate once counted its whole 1000 tokens as to be
// filled first (bucket.after) and told it about 19.4 s: the job sat out
// twice the wait, its provider idle meanwhile.
func TestLimiter_TPMEstimateMatchesAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(limiter.Config{TPM: 6000})
		start := time.Now()
		if err := l.Wait(t.Context(), 1000); err != nil {
			t.Fatal(err)
		}
		l.Done(1000, 0, nil)
		var busy *limiter.BusyError
		if err := l.WaitAtMost(t.Context(), 1000, 300*time.Millisecond); !errors.As(err, &busy) {
			t.Fatalf("WaitAtMost: %v; want a *BusyError", err)
		}
		told := time.Since(start) + busy.For
		if err := l.Wait(t.Context(), 1000); err != nil {
			t.Fatal(err)
		}
		admitted := time.Since(start)
		t.Logf("given back and told %v; a Wait from then on admitted at %v", told, admitted)
		if told > admitted+time.Second {
			t.Errorf("told to come back at %v, but the limiter admits the same call at %v", told, admitted)
		}
	})
}
