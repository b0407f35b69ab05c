package main

import (
	"context"
	"fmt"
	"io"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

func init() {
	register("retry", "move failed jobs back to queued (their attempts stay as they are)", runRetry)
}

const retryHelp = `
Retry moves each named job from failed to queued. Its attempts are not
touched: the next claim opens a new attempt, so the history of what
happened stays. A job that is not failed is refused and left alone.
A running server picks the job up within its --poll interval.

The provider call of the new attempt carries the same job-scoped key as
before, so a provider that already billed the job answers from its record.
When any attempt of the job may have been billed (timeout, shutdown,
malformed, unstorable, worker_restarted, a cancel of a running call, a
failure stored before classes existed), the retry still goes ahead and
says so on stderr: a provider that ignores idempotency keys bills the new
call again.`

func runRetry(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	st, ids, code := openForJobs(ctx, "retry", retryHelp, args, stdout, stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	for _, id := range ids {
		billed := mayHaveBilled(ctx, st, id) // read before: the retry changes nothing of it
		if _, err := st.RetryIfFailed(ctx, id, store.ActorCLI); err != nil {
			fail(stderr, "retry", err)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "job %d: failed -> queued\n", id)
		if billed.ID != 0 {
			fmt.Fprintf(stderr, "inkwell retry: job %d: its attempt %d failed as %s, so the provider may have billed that call: "+
				"the new attempt sends the same job-scoped key, which a provider that honours idempotency keys answers from its record; "+
				"one that ignores them (check yours) bills it again\n", id, billed.AttemptNumber, billed.ErrorClass)
		}
	}
	return code
}

// mayHaveBilled is the last attempt of job id whose call the evidence does
// not say was unbilled (zero when none, or they cannot be read: the retry
// itself then says what is wrong). Every attempt counts, not the last
// alone: a job whose first call timed out and whose retry then met a 5xx
// may have been billed by the first. Only jobs all of whose calls were
// not billed (not_sent, rate_limited, provider_error, rejected) are
// retried without a word.
func mayHaveBilled(ctx context.Context, st *store.Store, id int64) inkwell.Attempt {
	atts, err := st.Attempts(ctx, id)
	if err != nil {
		return inkwell.Attempt{}
	}
	a, _ := billedAttempt(atts)
	return a
}
