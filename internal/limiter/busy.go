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
	now := time.Now()
	l.mu.Lock()
	if l.pausedUntil.Sub(now) > most {
		d := l.promiseLocked(nil, float64(max(tokens, 0)), now)
		l.mu.Unlock()
		l.observe(now)
		return &BusyError{For: d}
	}
	l.mu.Unlock()
	return l.wait(ctx, tokens, most)
}

// promise is when a caller given back was told to come back, and its
// tokens.
type promise struct {
	at     time.Time
	tokens float64
}

// promiseLocked is how long a call of own tokens would go on waiting: w
// in line (nil: joining it at the end), after the pause, the calls ahead
// of it and those given back before it still to come back, at the limits'
// pace. The answer is promised to it in turn: callers given back one after
// another come back one after another, as the limits let them go, not all
// at the first free moment. A call larger than the token bucket goes once
// the bucket is full (leaving a debt), so its own share counts at most
// the bucket's size, as admission does.
func (l *Limiter) promiseLocked(w *waiter, own float64, now time.Time) time.Duration {
	l.promised = slices.DeleteFunc(l.promised, func(p promise) bool { return !p.at.After(now) })
	calls, tokens := len(l.promised)+1, own
	if l.toks.size > 0 {
		tokens = min(own, l.toks.size)
	}
	for _, p := range l.promised {
		tokens += p.tokens
	}
	for _, q := range l.queue {
		if q == w {
			break
		}
		calls++
		tokens += q.tokens
	}
	// The buckets fill during a pause, but nothing is taken before its
	// end: the pace counts from then.
	from := now
	if l.pausedUntil.After(now) {
		from = l.pausedUntil
	}
	d := from.Sub(now) + max(l.reqs.after(float64(calls), from), l.toks.after(tokens, from))
	l.promised = append(l.promised, promise{at: now.Add(d), tokens: own})
	return d
}
