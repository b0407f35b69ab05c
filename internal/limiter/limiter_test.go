package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/inkwell/inkwell/internal/limiter"
	"github.com/inkwell/inkwell/internal/provider"
)

// The tests run in a synctest bubble: time there is fake, starts at the
// same instant every run, and jumps straight to the next timer once every
// goroutine of the bubble is blocked. Admission times are therefore exact.

// rateLimited is the error an OpenAI call returns on a 429, as the lane
// hands it to Done (wrapped, as job.go may wrap it).
func rateLimited(retryAfter time.Duration) error {
	return fmt.Errorf("provider: %w", &provider.CallError{Class: provider.ClassRateLimited, Status: 429, Msg: "slow down", RetryAfter: retryAfter})
}

// admissions starts one Wait per entry of tokens, in that order (each
// joins the line before the next starts), and returns a function that
// waits for all of them and gives each one's admission time, relative to
// start.
func admissions(t *testing.T, l *limiter.Limiter, tokens ...int) func() []time.Duration {
	t.Helper()
	start := time.Now()
	got := make([]time.Duration, len(tokens))
	var wg sync.WaitGroup
	for i, n := range tokens {
		wg.Go(func() {
			if err := l.Wait(t.Context(), n); err != nil {
				t.Errorf("Wait %d: %v", i, err)
			}
			got[i] = time.Since(start)
		})
		synctest.Wait() // in line (or through) before the next one comes
	}
	return func() []time.Duration { wg.Wait(); return got }
}

func ms(ds ...int) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = time.Duration(d) * time.Millisecond
	}
	return out
}

func assertTimes(t *testing.T, got, want []time.Duration) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("admitted at %v, want %v", got, want)
	}
}

func TestLimiter_RPMSpreadsCallsEvenly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(limiter.Config{RPM: 600}) // 10 a second, a bucket of 1
		got := admissions(t, l, 0, 0, 0, 0, 0)()
		assertTimes(t, got, ms(0, 100, 200, 300, 400))
		if n := l.InFlight(); n != 5 {
			t.Errorf("InFlight = %d, want 5 (no Done yet)", n)
		}
	})
}

func TestLimiter_RPMBurstIsATenthOfASecond(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(limiter.Config{RPM: 60000}) // 1000 a second: a bucket of 100
		tokens := make([]int, 103)
		got := admissions(t, l, tokens...)()
		for i := range 100 {
			if got[i] != 0 {
				t.Fatalf("call %d admitted at %v, want at once (the bucket holds 100)", i, got[i])
			}
		}
		assertTimes(t, got[100:], ms(1, 2, 3))
	})
}

func TestLimiter_TPM(t *testing.T) {
	t.Parallel()
	t.Run("BigCallWaitsForAFullBucketAndLeavesADebt", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(limiter.Config{TPM: 6000}) // 100 tokens a second, a bucket of 10
			// 50 (bucket full: 10 -> -40), 5 (waits for 45: 450ms), 10 (waits for 10 after -0: 100ms more).
			got := admissions(t, l, 50, 5, 10)()
			assertTimes(t, got, ms(0, 450, 550))
		})
	})
	t.Run("RefundWhenTheAnswerUsedLess", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(limiter.Config{TPM: 600})      // 10 tokens a second, a bucket of 1
			if err := l.Wait(t.Context(), 10); err != nil { // 1 -> -9
				t.Fatal(err)
			}
			l.Done(10, 2, nil) // used 2 of 10: 8 back, -9 -> -1
			got := admissions(t, l, 1)()
			assertTimes(t, got, ms(200)) // from -1 to 1: 2 tokens at 10/s
		})
	})
	t.Run("DebtWhenTheAnswerUsedMore", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(limiter.Config{TPM: 600})
			if err := l.Wait(t.Context(), 1); err != nil { // 1 -> 0
				t.Fatal(err)
			}
			l.Done(1, 30, nil) // used 30, not 1: 0 -> -29
			got := admissions(t, l, 1)()
			assertTimes(t, got, ms(3000)) // 30 tokens at 10/s
		})
	})
	t.Run("UnknownUsageKeepsTheEstimate", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(limiter.Config{TPM: 600})
			if err := l.Wait(t.Context(), 5); err != nil { // 1 -> -4
				t.Fatal(err)
			}
			l.Done(5, 0, errors.New("provider: timeout"))
			got := admissions(t, l, 1)()
			assertTimes(t, got, ms(500))
		})
	})
	t.Run("ARefundWakesTheFirstInLine", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(limiter.Config{TPM: 600})
			if err := l.Wait(t.Context(), 100); err != nil { // 1 -> -99: ten seconds of debt
				t.Fatal(err)
			}
			wait := admissions(t, l, 1)
			time.Sleep(time.Second)          // -99 -> -89
			l.Done(100, 90, nil)             // 10 back: -79, and the first in line looks again
			assertTimes(t, wait(), ms(9000)) // from -79 at 1s: 80 tokens, 8s more
		})
	})
}

func TestLimiter_FirstComeFirstServed(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(limiter.Config{TPM: 600}) // a bucket of 1 token, 10 a second
		// The big call is second in line: the small ones behind it wait for it.
		got := admissions(t, l, 1, 20, 1, 1)()
		assertTimes(t, got, ms(0, 100, 2100, 2200))
	})
}

func TestLimiter_429PausesEveryCall(t *testing.T) {
	t.Parallel()
	t.Run("UntilRetryAfter", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(limiter.Config{}) // no limits: only the pause
			if err := l.Wait(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			l.Done(1, 0, rateLimited(2*time.Second))
			if got, want := l.PausedUntil(), time.Now().Add(2*time.Second); !got.Equal(want) {
				t.Errorf("PausedUntil = %v, want %v", got, want)
			}
			got := admissions(t, l, 1, 1, 1, 1)()
			assertTimes(t, got, ms(2000, 2000, 2000, 2000))
			if !l.PausedUntil().IsZero() {
				t.Errorf("PausedUntil after the pause = %v, want the zero time", l.PausedUntil())
			}
			if n := l.RateLimited(); n != 1 {
				t.Errorf("RateLimited = %d, want 1", n)
			}
		})
	})
	t.Run("AndTheRatePicksUpAfterIt", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(limiter.Config{RPM: 600})
			if err := l.Wait(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			l.Done(1, 0, rateLimited(time.Second))
			got := admissions(t, l, 1, 1, 1)()
			assertTimes(t, got, ms(1000, 1100, 1200)) // no burst of everything that waited
		})
	})
	t.Run("ALaterRetryAfterExtendsIt", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(limiter.Config{})
			for range 3 {
				l.Wait(t.Context(), 1)
			}
			start := time.Now()
			l.Done(1, 0, rateLimited(3*time.Second))
			l.Done(1, 0, rateLimited(time.Second)) // ends sooner: the pause stays
			if got, want := l.PausedUntil(), start.Add(3*time.Second); !got.Equal(want) {
				t.Errorf("PausedUntil = %v, want %v", got, want)
			}
			wait := admissions(t, l, 1)
			time.Sleep(time.Second)
			l.Done(1, 0, rateLimited(5*time.Second)) // at 1s: until 6s
			assertTimes(t, wait(), ms(6000))
		})
	})
}

func TestLimiter_429WithoutRetryAfterBacksOff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(limiter.Config{})
		pause := func() time.Duration { return time.Until(l.PausedUntil()) }
		for i, want := range []time.Duration{1, 2, 4, 8, 16, 32, 60, 60} {
			want *= time.Second
			if err := l.Wait(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			if err := l.Wait(t.Context(), 1); err != nil { // two calls in flight when the 429s come
				t.Fatal(err)
			}
			l.Done(1, 0, rateLimited(0))
			got := pause()
			if got < want/2 || got > want {
				t.Errorf("429 number %d without Retry-After: paused %v, want %v to %v (with jitter)", i+1, got, want/2, want)
			}
			l.Done(1, 0, rateLimited(0)) // sent before the pause: does not double it
			if again := pause(); again != got {
				t.Errorf("a second 429 from before the pause changed it from %v to %v", got, again)
			}
			time.Sleep(got)
		}
		// An answer resets the back-off.
		l.Wait(t.Context(), 1)
		l.Done(1, 10, nil)
		l.Wait(t.Context(), 1)
		l.Done(1, 0, rateLimited(0))
		if got := pause(); got < 500*time.Millisecond || got > time.Second {
			t.Errorf("after an answer, a 429 paused %v, want 0.5s to 1s", got)
		}
	})
}

func TestLimiter_RetryAfterIsBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(limiter.Config{})
		l.Wait(t.Context(), 1)
		l.Done(1, 0, rateLimited(48*time.Hour))
		if got := time.Until(l.PausedUntil()); got != limiter.MaxPause {
			t.Errorf("paused %v, want MaxPause %v", got, limiter.MaxPause)
		}
	})
}

func TestLimiter_OtherErrorsDoNotPause(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(limiter.Config{})
		for _, err := range []error{
			errors.New("boom"),
			&provider.CallError{Class: provider.ClassServer, Status: 503, RetryAfter: 5 * time.Second},
			context.Canceled,
		} {
			l.Wait(t.Context(), 1)
			l.Done(1, 0, err)
			if !l.PausedUntil().IsZero() {
				t.Errorf("Done(%v) paused the lane until %v", err, l.PausedUntil())
			}
		}
		if l.RateLimited() != 0 || l.InFlight() != 0 {
			t.Errorf("RateLimited %d, InFlight %d; want 0 and 0", l.RateLimited(), l.InFlight())
		}
	})
}

func TestLimiter_WaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	t.Run("WhileInLine", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(limiter.Config{RPM: 60}) // one a second
			l.Wait(t.Context(), 1)
			ctx, cancel := context.WithCancel(t.Context())
			first := make(chan error, 1)
			go func() { first <- l.Wait(ctx, 1) }() // first in line, its timer set
			synctest.Wait()
			behind := admissions(t, l, 1) // second in line
			if n := l.Waiting(); n != 2 {
				t.Fatalf("Waiting = %d, want 2", n)
			}
			cancel()
			if err := <-first; !errors.Is(err, context.Canceled) {
				t.Errorf("Wait after its cancel = %v, want context.Canceled", err)
			}
			assertTimes(t, behind(), ms(1000)) // now first: it takes the canceled call's turn
			if n := l.InFlight(); n != 2 {
				t.Errorf("InFlight = %d, want 2: a canceled Wait admits nothing", n)
			}
		})
	})
	t.Run("WhileNotFirst", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(limiter.Config{RPM: 60})
			l.Wait(t.Context(), 1)
			ahead := admissions(t, l, 1)
			ctx, cancel := context.WithCancel(t.Context())
			second := make(chan error, 1)
			go func() { second <- l.Wait(ctx, 1) }()
			synctest.Wait()
			cancel()
			if err := <-second; !errors.Is(err, context.Canceled) {
				t.Errorf("Wait after its cancel = %v, want context.Canceled", err)
			}
			assertTimes(t, ahead(), ms(1000))
			if n := l.Waiting(); n != 0 {
				t.Errorf("Waiting = %d, want 0", n)
			}
		})
	})
	t.Run("AlreadyEnded", func(t *testing.T) {
		t.Parallel()
		l := limiter.New(limiter.Config{})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := l.Wait(ctx, 1); !errors.Is(err, context.Canceled) {
			t.Errorf("Wait on an ended context = %v, want context.Canceled", err)
		}
		if l.InFlight() != 0 {
			t.Errorf("InFlight = %d, want 0", l.InFlight())
		}
	})
	t.Run("DuringAPause", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(limiter.Config{})
			l.Wait(t.Context(), 1)
			l.Done(1, 0, rateLimited(time.Minute))
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			start := time.Now()
			if err := l.Wait(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Wait = %v, want context.DeadlineExceeded", err)
			}
			if got := time.Since(start); got != time.Second {
				t.Errorf("Wait returned after %v, want 1s: the stop ends the wait at once", got)
			}
		})
	})
}

func TestLimiter_OnWaitHearsEachWait(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var heard []time.Duration
		l := limiter.New(limiter.Config{RPM: 600, OnWait: func(d time.Duration) {
			mu.Lock()
			heard = append(heard, d)
			mu.Unlock()
		}})
		admissions(t, l, 1, 1, 1)()
		mu.Lock()
		defer mu.Unlock()
		assertTimes(t, heard, ms(0, 100, 200))
	})
}

// TestLimiter_ManyCallers: hundreds of concurrent callers, on the real
// clock and under the race detector, some canceled before or while they
// wait: every Wait returns, only a canceled one fails, and once every
// admitted call is Done nothing is in flight or in line.
func TestLimiter_ManyCallers(t *testing.T) {
	t.Parallel()
	l := limiter.New(limiter.Config{RPM: 60_000, TPM: 6_000_000}) // 1000 calls and 100,000 tokens a second
	const callers = 400
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			switch {
			case i%7 == 0:
				cancel()
			case i%5 == 0:
				ctx, cancel = context.WithTimeout(ctx, time.Duration(i%50)*time.Millisecond)
				defer cancel()
			}
			if err := l.Wait(ctx, 100); err != nil {
				if i%7 != 0 && i%5 != 0 {
					t.Errorf("Wait %d = %v, want nil: its context never ended", i, err)
				}
				return
			}
			l.Done(100, 50+i%100, nil)
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("callers still waiting after 30s: %d in line", l.Waiting())
	}
	if l.InFlight() != 0 || l.Waiting() != 0 {
		t.Errorf("InFlight %d, Waiting %d after all Done; want 0 and 0", l.InFlight(), l.Waiting())
	}
}
