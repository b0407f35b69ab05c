package limiter_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/inkwell/inkwell/internal/limiter"
)

// TestLimiter_WaitAtMostKeepsTheLineOrder: rpm 6 (one call every
// 10 s), its call spent. Three callers join the line 100 ms apart and
// each gives up after 300 ms (the lane then queues its job with
// not_before = now + BusyError.For). The estimate used to be made after
// the caller left the line, counting those behind it as ahead: the first
// was told about 30 s, the third about 10 s, the jobs coming back in the
// reverse of their order. Each is now told its own turn, counting those
// given back before it: about 10 s, 20 s, 30 s.
func TestLimiter_WaitAtMostKeepsTheLineOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(limiter.Config{RPM: 6})
		if err := l.Wait(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		l.Done(0, 0, nil)
		fors := make([]time.Duration, 3)
		var wg sync.WaitGroup
		for i := range 3 {
			time.Sleep(100 * time.Millisecond)
			wg.Go(func() {
				var busy *limiter.BusyError
				if err := l.WaitAtMost(t.Context(), 0, 300*time.Millisecond); !errors.As(err, &busy) {
					t.Errorf("caller %d: %v; want a *BusyError", i, err)
					return
				}
				fors[i] = busy.For
			})
		}
		wg.Wait()
		t.Logf("told to come back in: first %v, second %v, third %v", fors[0], fors[1], fors[2])
		if !(fors[0] <= fors[1] && fors[1] <= fors[2]) {
			t.Errorf("BusyError.For by place in line: %v; want them in line order (first in line back first, about 10 s, 20 s, 30 s)", fors)
		}
	})
}
