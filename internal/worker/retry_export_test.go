package worker

import (
	"context"
	"time"

	"github.com/inkwell/inkwell"
)

// Decide is RetryPolicy.decide for the tests, with the job's attempts
// since its last retry by hand (since; 0: all n of them, and < 0: not
// known) and the 429s among them: the back-off's end (nil: no reschedule)
// and the attempts after which retry gave up (0: it did not).
func Decide(p RetryPolicy, c inkwell.ErrorClass, n, since, limited int, retryAfter time.Duration, now time.Time) (*time.Time, int) {
	if since == 0 {
		since = n
	}
	d := p.decide(c, n, tally{known: since > 0 && limited >= 0, since: since, rateLimited: limited}, retryAfter)
	if d.wait == 0 {
		return nil, d.gaveUpAfter
	}
	at := now.Add(d.wait)
	return &at, d.gaveUpAfter
}

// Classify is classify for the tests.
func Classify(ctx context.Context, err error) (inkwell.ErrorClass, time.Duration) {
	return classify(ctx, err)
}

// ErrNotCalled is errNotCalled for the tests.
var ErrNotCalled = errNotCalled
