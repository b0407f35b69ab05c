package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/inkwell/inkwell"
)

// Wait returns the job once it is done or failed: it long-polls
// GET /v1/jobs/{id}?wait= (WithPollWait per poll), so it learns of the end
// as soon as the server commits it, without polling. A server that is
// away (connection refused or cut, 503 while it recovers, 502/504 from a
// proxy) is asked again after a pause of at most a second, for as long as
// ctx lasts: Wait resumes across a server restart. Other refusals (404,
// 401, 403) end it. When ctx ends first, the error wraps ctx's and the
// detail is the job as last seen.
func (c *Client) Wait(ctx context.Context, id int64) (inkwell.JobDetail, error) {
	var last inkwell.JobDetail
	early := 0 // polls in a row that came back well before their wait, the job not ended
	for try := 1; ; try++ {
		wait := c.pollWait
		if dl, ok := ctx.Deadline(); ok {
			// The server answers before ctx ends, so a caller whose wait
			// runs out has seen the job as it was then.
			wait = min(wait, time.Until(dl)-waitMargin)
			if wait <= 0 && last.Job.ID != 0 {
				<-ctx.Done() // at most waitMargin: seen already, no poll would end sooner
				return last, fmt.Errorf("wait for job %d (last seen %s): %w", id, last.Job.Status, ctx.Err())
			}
			wait = max(wait, 0)
		}
		path := jobPath(id, fmt.Sprintf("?wait=%dms", wait.Milliseconds()))
		sent := time.Now()
		_, b, err := c.send(ctx, call{method: http.MethodGet, path: path, timeout: wait + c.requestTimeout})
		if err == nil {
			var d inkwell.JobDetail
			if err := decode(b, &d); err != nil {
				return last, fmt.Errorf("wait for job %d: %w", id, err)
			}
			if d.Job.Status == inkwell.StatusDone || d.Job.Status == inkwell.StatusFailed {
				return d, nil
			}
			last, try = d, 0
			// One early answer is news (the job started running); more
			// in a row are a server or proxy that does not hold the poll
			// (or a server stopping): pause, or this loop would be one.
			if wait > 0 && time.Since(sent) < wait/2 {
				early++
			} else {
				early = 0
			}
			if early > 1 {
				if err := sleep(ctx, min(time.Second, c.backoff(early-1))); err != nil {
					return last, fmt.Errorf("wait for job %d (last seen %s): %w", id, seen(last), err)
				}
			}
			continue
		}
		if ctx.Err() != nil {
			return last, fmt.Errorf("wait for job %d (last seen %s): %w", id, seen(last), ctx.Err())
		}
		var e *Error
		if errors.As(err, &e) && !resendable(e.Status) {
			return last, fmt.Errorf("wait for job %d: %w", id, err)
		}
		pause := min(time.Second, c.backoff(try))
		if e != nil && e.RetryAfter > 0 {
			pause = min(e.RetryAfter, c.maxDelay)
		}
		if c.onRetry != nil {
			c.onRetry(RetryEvent{Try: try, Err: err, Delay: pause})
		}
		if err := sleep(ctx, pause); err != nil {
			return last, fmt.Errorf("wait for job %d (last seen %s): %w", id, seen(last), err)
		}
	}
}

// waitMargin is how long before its caller's deadline a long poll asks
// the server to answer: time for the answer to come back.
const waitMargin = 250 * time.Millisecond

// seen is a job's status as last read, in words.
func seen(d inkwell.JobDetail) string {
	if d.Job.Status == "" {
		return "never: no answer came in time"
	}
	return string(d.Job.Status)
}
