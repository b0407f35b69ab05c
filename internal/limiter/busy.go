package limiter

import (
	"context"
	"fmt"
	"slices"
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
	return l.wait(ctx, tokens, most)
}

// estimateLocked is how long w, still in line, would go on waiting: the
// pause, then the calls ahead of it, the calls given back before it that
// are still to come back (promised), and w itself, at the limits' pace.
// The answer is promised to w in turn: callers given back one after
// another come back one after another, as the limits let them go, not
// all at the first free moment.
func (l *Limiter) estimateLocked(w *waiter, now time.Time) time.Duration {
	l.promised = slices.DeleteFunc(l.promised, func(t time.Time) bool { return !t.After(now) })
	calls, tokens := len(l.promised), 0.0
	for _, q := range l.queue {
		calls++
		tokens += q.tokens
		if q == w {
			break
		}
	}
	d := max(l.pausedUntil.Sub(now), l.reqs.after(float64(calls), now), l.toks.after(tokens, now))
	l.promised = append(l.promised, now.Add(d))
	return d
}
