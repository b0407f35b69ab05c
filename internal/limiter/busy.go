package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// BusyError is WaitAtMost's answer for a call the limiter would hold
// longer than asked: For is about how much longer it would still have
// waited (the pause's end, or the line ahead of it at the limits' pace).
type BusyError struct{ For time.Duration }

func (e *BusyError) Error() string {
	return fmt.Sprintf("the provider's limits would hold this call about %s more", e.For.Round(time.Millisecond))
}

// WaitAtMost is Wait for a caller with somewhere better to be: a call the
// limiter would hold longer than most is not admitted, and the error is a
// *BusyError. A pause (after a 429) that ends later than most says so at
// once; a wait in line gives up after most. A lane serving several
// providers uses it so that one provider's pause or pace does not keep its
// slots from the others' jobs (worker.Lane.call).
func (l *Limiter) WaitAtMost(ctx context.Context, tokens int, most time.Duration) error {
	if left := time.Until(l.PausedUntil()); left > most {
		l.observe(time.Now())
		return &BusyError{For: left}
	}
	wctx, cancel := context.WithTimeout(ctx, most)
	defer cancel()
	err := l.Wait(wctx, tokens)
	if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &BusyError{For: l.estimate(tokens)}
}

// estimate is how long a call of tokens joining the line now would wait:
// the pause, then every call in line and this one at the limits' pace.
func (l *Limiter) estimate(tokens int) time.Duration {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	ahead := float64(max(tokens, 0))
	for _, w := range l.queue {
		ahead += w.tokens
	}
	return max(l.pausedUntil.Sub(now), l.reqs.after(float64(len(l.queue)+1), now), l.toks.after(ahead, now))
}
