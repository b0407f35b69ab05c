package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// Cancel (docs/design.md §9). store.Cancel closes a running attempt and its
// job in one transaction; this file aborts the attempt's provider call,
// which would otherwise run to its end only to be fenced out. Two ways in:
//
//   - in process: the API's cancel calls Lane.CancelAttempt with the
//     attempt it closed, which cancels the call's context at once;
//   - from elsewhere (`inkwell cancel`, another process's API on the same
//     PostgreSQL database): every CancelPoll the lane asks the store which
//     of its calls' attempts are no longer running, and aborts those.
//
// An aborted call's failure write is fenced (the attempt is no longer
// running): nothing is written, the log says "call aborted: job
// cancelled" at info, and the outcome is OutcomeCancelled, neither a
// provider failure for the metrics nor an error for the limiter. An answer
// already in hand when the cancel lands is fenced out like any late
// completion (cancel won), logged with its provider request id.

// errJobCancelled is the abort cause of a call whose job was cancelled.
var errJobCancelled = errors.New("job cancelled")

// calls is the lane's registry of calls in flight: attempt id → the abort
// of the call's context. An attempt is in it from its claim until its
// outcome is written.
type calls struct {
	mu sync.Mutex
	m  map[int64]context.CancelCauseFunc
}

// add registers attempt id and returns the context its call runs under
// (a child of parent's values, not of its cancellation: a stop gives a
// call its grace period, see Lane.call) and the function that removes it.
func (c *calls) add(parent context.Context, id int64) (context.Context, func()) {
	ctx, abort := context.WithCancelCause(context.WithoutCancel(parent))
	c.mu.Lock()
	if c.m == nil {
		c.m = map[int64]context.CancelCauseFunc{}
	}
	c.m[id] = abort
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.m, id)
		c.mu.Unlock()
		abort(nil)
	}
}

// abort cancels attempt id's call with cause; false when the lane runs no
// call for it.
func (c *calls) abort(id int64, cause error) bool {
	c.mu.Lock()
	f, ok := c.m[id]
	c.mu.Unlock()
	if ok {
		f(cause)
	}
	return ok
}

func (c *calls) ids() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]int64, 0, len(c.m))
	for id := range c.m {
		ids = append(ids, id)
	}
	return ids
}

// CancelAttempt aborts the provider call of attempt id, whose job a cancel
// has just closed (store.Cancel's Cancelled.Attempt). An attempt this lane
// does not run is ignored: another lane's, or one already finished. The
// API calls it through api.Config.OnCancelled.
func (l *Lane) CancelAttempt(id int64) {
	if l.calls.abort(id, errJobCancelled) {
		l.log.Info("aborting the provider call of a cancelled job", "attempt_id", id)
	}
}

// watchCancels is the cross-process way in: every CancelPoll, while calls
// are in flight, it asks the store which of their attempts are no longer
// running and aborts those a cancel closed. An attempt closed by a rescue
// (this lane lost its lock) is left to end as before: its lane is
// stopping, and its late outcome is fenced out.
func (l *Lane) watchCancels(ctx context.Context) {
	everyTick(ctx, l.cfg.CancelPoll, l.abortCancelledCalls)
}

// abortCancelledCalls is one look of watchCancels.
func (l *Lane) abortCancelledCalls(ctx context.Context) {
	ids := l.calls.ids()
	if len(ids) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, l.cfg.DBTimeout)
	ended, err := l.store.AttemptsNotRunning(rctx, ids)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			l.log.WarnContext(ctx, "looking for cancelled calls", "err", err)
		}
		return
	}
	for _, a := range ended {
		if a.Class == inkwell.ClassCancelled && l.calls.abort(a.ID, errJobCancelled) {
			l.log.InfoContext(ctx, "aborting the provider call of a job cancelled elsewhere", "attempt_id", a.ID)
		}
	}
}

// abortCause is errJobCancelled when j's call was aborted by a cancel,
// else nil.
func (j *claimedJob) abortCause() error {
	if j.callCtx == nil {
		return nil
	}
	if err := context.Cause(j.callCtx); errors.Is(err, errJobCancelled) {
		return err
	}
	return nil
}

// aborted records the outcome of a call aborted by a cancel. The failure
// write is tried as any other and is fenced out (ECONFLICT, nothing
// written): the cancel already closed the attempt.
func (l *Lane) aborted(ctx context.Context, j *claimedJob, secs float64) error {
	wctx := context.WithoutCancel(ctx)
	err := l.record(ctx, j, false, func(wctx context.Context) error {
		return l.store.FailIfRunning(wctx, store.FailParams{JobID: j.Job.ID, AttemptID: j.Attempt.ID,
			Error: "call aborted: job cancelled", Class: inkwell.ClassCancelled})
	})
	switch {
	case inkwell.ErrorCode(err) == inkwell.ECONFLICT, err == nil:
		// err == nil: the attempt was still running (an abort without a
		// committed cancel); it is now failed, class cancelled, all the same.
		j.log.InfoContext(wctx, "call aborted: job cancelled", "provider_seconds", secs)
		l.observe(OutcomeCancelled, secs, j.Job)
		return nil
	default:
		l.observe(OutcomeAborted, secs, j.Job)
		return fmt.Errorf("%w: %w", errUnrecorded, err)
	}
}

// discarded logs a provider answer fenced out of its attempt: when the
// job was cancelled, a possibly paid answer was thrown away by the cancel,
// and the operator sees which one by its provider request id.
func (l *Lane) discarded(ctx context.Context, j *claimedJob, resp inkwell.ProviderResponse, secs float64, err error) {
	wctx := context.WithoutCancel(ctx)
	cancelled := errors.Is(j.abortCause(), errJobCancelled)
	if !cancelled {
		rctx, stop := context.WithTimeout(wctx, l.cfg.DBTimeout)
		job, jerr := l.store.Job(rctx, j.Job.ID)
		stop()
		cancelled = jerr == nil && job.Status == inkwell.StatusFailed && job.ErrorClass == inkwell.ClassCancelled
	}
	if cancelled {
		j.log.InfoContext(wctx, "provider answer discarded: job cancelled before its completion committed (cancel won); the provider may have billed it",
			"provider_request_id", resp.RequestID, "amount_micros", resp.AmountMicros)
		l.observe(OutcomeCancelled, secs, j.Job)
		return
	}
	j.log.WarnContext(wctx, "completion refused: attempt is no longer the running one; nothing written",
		"provider_request_id", resp.RequestID, "amount_micros", resp.AmountMicros, "err", err)
	l.observe(OutcomeFenced, secs, j.Job)
}
