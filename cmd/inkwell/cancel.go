package main

import (
	"context"
	"fmt"
	"io"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

func init() {
	register("cancel", "cancel queued or running jobs (they end failed, class cancelled)", runCancel)
}

const cancelHelp = `
Cancel ends each named job as failed, class cancelled. A queued job is
cancelled at once and never runs. A running job's attempt and job are
closed in the same transaction, and its lane aborts the provider call at
its next look (every --heartbeat of the serving process; at once when the
cancel goes through that process's POST /v1/jobs/{id}/cancel). The
provider may already have billed a call in flight: the job says so.

A job already cancelled is reported as such. A job done (its completion
committed first: it won) or failed for another reason is refused, with
what it is, and left alone. Every ID is tried; the exit status is 1 when
any was refused, 2 for bad input, which changes nothing.

A cancelled job can be run again with 'inkwell retry'.`

func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	st, ids, code := openForJobs(ctx, "cancel", cancelHelp, args, stdout, stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	for _, id := range ids {
		// Read first only to word the line: the cancel itself decides.
		before, err := st.Job(ctx, id)
		if err != nil {
			fail(stderr, "cancel", err)
			code = 1
			continue
		}
		c, err := st.Cancel(ctx, id, store.ActorCLI)
		if err != nil {
			fail(stderr, "cancel", err)
			code = 1
			continue
		}
		switch {
		case c.Attempt != 0:
			fmt.Fprintf(stdout, "job %d: running -> failed (cancelled); %s closed, its lane aborts the call; the provider may have billed it\n", id, attemptName(ctx, st, id, c.Attempt))
		case before.Status == inkwell.StatusFailed && before.ErrorClass == inkwell.ClassCancelled:
			fmt.Fprintf(stdout, "job %d: already cancelled\n", id)
		default:
			fmt.Fprintf(stdout, "job %d: %s -> failed (cancelled)\n", id, before.Status)
		}
	}
	return code
}

// attemptName names the attempt whose row id is attemptID as the screens
// do, by its number (#2); "its running attempt" when it cannot be read.
func attemptName(ctx context.Context, st *store.Store, jobID, attemptID int64) string {
	d, err := st.Show(ctx, jobID)
	if err == nil {
		for _, a := range d.Attempts {
			if a.ID == attemptID {
				return fmt.Sprintf("attempt #%d", a.AttemptNumber)
			}
		}
	}
	return "its running attempt"
}
