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
When the job's last attempt may have been billed (timeout, shutdown,
malformed, unstorable, worker_restarted, a cancel of a running call), the
retry still goes ahead and says so on stderr: a provider that ignores
idempotency keys bills the new call again.`

func runRetry(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	st, ids, code := openForJobs(ctx, "retry", retryHelp, args, stdout, stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	for _, id := range ids {
		last := lastAttemptClass(ctx, st, id) // read before: the retry changes nothing of it
		if _, err := st.RetryIfFailed(ctx, id, store.ActorCLI); err != nil {
			fail(stderr, "retry", err)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "job %d: failed -> queued\n", id)
		if last != "" && !last.NotBilled() {
			fmt.Fprintf(stderr, "inkwell retry: job %d: its last attempt failed as %s, so the provider may have billed that call: "+
				"the new attempt sends the same job-scoped key, which a provider that honours idempotency keys answers from its record; "+
				"one that ignores them (check yours) bills it again\n", id, last)
		}
	}
	return code
}

// lastAttemptClass is the class of job id's last attempt ("" when it has
// none, or it cannot be read: the retry itself then says what is wrong).
// Only a call the evidence says was not billed (not_sent, rate_limited,
// provider_error, rejected) is retried without a word.
func lastAttemptClass(ctx context.Context, st *store.Store, id int64) inkwell.ErrorClass {
	atts, err := st.Attempts(ctx, id)
	if err != nil || len(atts) == 0 {
		return ""
	}
	return atts[len(atts)-1].ErrorClass
}
