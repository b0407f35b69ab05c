package worker

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/limiter"
)

// RetryPolicy is automatic retry (docs/design.md §9): which failed attempts put
// their job back to queued, and when it may run again. The store refuses a
// reschedule for any class that is not RetrySafe, whatever the policy.
type RetryPolicy struct {
	// MaxAttempts is how many failed attempts a job may have since its
	// last retry by hand, 429s aside, before automatic retry gives up and
	// the job fails, saying so. Below 2, nothing is retried automatically,
	// 429s included (the zero Config).
	MaxAttempts int
	// MaxRateLimited is how many 429 answers a job may meet before
	// automatic retry gives up on it. They do not count toward
	// MaxAttempts: a 429 is the provider's limit, met by whichever jobs
	// the lane happened to send when it paused, not the job's failure, and
	// the jobs a 429 sends back come back first, so a storm of a few
	// pauses would otherwise fail the same few jobs for good. Counted
	// since the job's last retry by hand, as MaxAttempts is. 0: as many
	// as MaxAttempts.
	MaxRateLimited int
	// Base and Cap bound the exponential back-off: the n-th failure a
	// limit counts (429s, or the others) waits about Base·2^(n-1), at most
	// Cap, with jitter (defaults 1s and 5m).
	Base, Cap time.Duration
	// ProviderHonoursKeys says a second call under the same idempotency
	// key is answered from the provider's record, not billed again: then a
	// timeout or a shutdown may be retried too.
	ProviderHonoursKeys bool
	// Jitter returns a number in [0, 1); nil uses math/rand/v2.
	Jitter func() float64
}

// retryDecision is what becomes of a failed attempt's job.
type retryDecision struct {
	wait        time.Duration // > 0: back to queued, not claimed for this long
	gaveUpAfter int           // failed: automatic retry gave up after this many attempts
}

// tally is what automatic retry counts of a job's attempts since its
// last retry by hand (store.AutoRetryCounts), the failing one included:
// all of them, and those answered 429. known is false when they could not
// be read; then every attempt of the job counts toward MaxAttempts, as
// before 429s were counted apart.
type tally struct {
	known              bool
	since, rateLimited int
}

// decide applies the policy to attempt number n that failed with class c:
// how long the job waits before it may run again, or that retry gave up
// (after n attempts in all). Counted over t, a 429 counts toward
// MaxRateLimited and the other failures toward MaxAttempts, and each count
// sets its own back-off step. A 429's Retry-After (retryAfter > 0) wins
// over the back-off. Startup recovery and rescue never come here: they
// close attempts as worker_restarted and never re-queue.
func (p RetryPolicy) decide(c inkwell.ErrorClass, n int, t tally, retryAfter time.Duration) retryDecision {
	if !p.mayRetry(c) {
		return retryDecision{}
	}
	count, most := n, p.MaxAttempts
	switch {
	case !t.known:
	case c == inkwell.ClassRateLimited:
		count, most = t.rateLimited, p.maxRateLimited()
	default:
		count = t.since - t.rateLimited
	}
	if count >= most {
		return retryDecision{gaveUpAfter: n}
	}
	return retryDecision{wait: p.backoff(max(count, 1), retryAfter)}
}

// mayRetry says whether a failure of class c is ever retried automatically
// under p (and so whether its job's attempts need counting at all).
func (p RetryPolicy) mayRetry(c inkwell.ErrorClass) bool {
	return p.MaxAttempts >= 2 && c.RetrySafe(p.ProviderHonoursKeys)
}

func (p RetryPolicy) maxRateLimited() int {
	if p.MaxRateLimited > 0 {
		return p.MaxRateLimited
	}
	return p.MaxAttempts
}

// backoff is the wait after attempt n: Base·2^(n-1) capped at Cap, of
// which the upper half is random ("equal jitter": never less than half the
// step, so retries still spread out, and never two lanes in lockstep), or
// the provider's Retry-After when it sent one, up to the larger of Cap and
// limiter.MaxPause (the longest a 429 pauses the lane): a provider that
// asks for a date decades away, or a number of seconds as large, would
// otherwise leave the job queued and unclaimable for that long, where no
// retry can reach it.
func (p RetryPolicy) backoff(n int, retryAfter time.Duration) time.Duration {
	base, ceiling := p.Base, p.Cap
	if base <= 0 {
		base = time.Second
	}
	if ceiling <= 0 {
		ceiling = 5 * time.Minute
	}
	if retryAfter > 0 {
		return min(retryAfter, max(ceiling, limiter.MaxPause))
	}
	step := base
	for i := 1; i < n && step < ceiling; i++ {
		step *= 2
	}
	step = min(step, ceiling)
	jitter := p.Jitter
	if jitter == nil {
		jitter = rand.Float64
	}
	return step/2 + time.Duration(jitter()*float64(step/2))
}

// classed is an error that knows its failure class (provider.CallError).
type classed interface {
	error
	ErrorClass() inkwell.ErrorClass
}

// rateLimited is an error that carries a 429's Retry-After.
type rateLimited interface {
	error
	RateLimited() (retryAfter time.Duration, ok bool)
}

// classify is the failure class of a provider call's error, and the
// Retry-After a 429 asked for. ctx is the lane's: once it has ended, a
// call cut short is a shutdown.
func classify(ctx context.Context, err error) (inkwell.ErrorClass, time.Duration) {
	var retryAfter time.Duration
	if rl, ok := errors.AsType[rateLimited](err); ok {
		retryAfter, _ = rl.RateLimited()
	}
	switch {
	case errors.Is(err, errNotCalled):
		return inkwell.ClassNotSent, 0
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		if ce, ok := errors.AsType[classed](err); ok && ce.ErrorClass() == inkwell.ClassNotSent {
			return inkwell.ClassNotSent, 0
		}
		return inkwell.ClassShutdown, 0
	}
	if ce, ok := errors.AsType[classed](err); ok {
		return ce.ErrorClass(), retryAfter
	}
	// A provider that does not classify its errors (the in-process sim, a
	// test double): no evidence that nothing was sent, so the money-safe
	// reading: no answer, and the request may have arrived.
	return inkwell.ClassTimeout, retryAfter
}
