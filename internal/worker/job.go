package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/inkwell/inkwell/internal/store"
)

// runOne claims one job and runs it to an outcome. worked is false when
// nothing was queued.
func (l *Lane) runOne(ctx context.Context) (worked bool, err error) {
	// The claim is not cut by a stop signal: a claim whose commit raced
	// the signal would leave a running attempt nobody runs until the next
	// start. Once begun, it finishes, and its job gets the grace period.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.DBTimeout)
	c, err := l.store.Claim(cctx, l.cfg.Name)
	cancel()
	if err != nil {
		return false, fmt.Errorf("claim: %w", err)
	}
	if c == nil {
		return false, nil
	}
	log := l.log.With("job_id", c.Job.ID, "attempt_id", c.Attempt.ID, "attempt_number", c.Attempt.AttemptNumber)
	log.InfoContext(ctx, "job claimed")
	if l.cfg.Observer != nil {
		l.cfg.Observer.Claimed(l.cfg.Name)
	}
	var req inkwell.Request
	if err := json.Unmarshal(c.Job.Payload, &req); err != nil {
		return true, l.fail(ctx, c, fmt.Sprintf("payload unreadable: %v", err), 0)
	}
	resp, elapsed, callErr := l.call(ctx, c, req)
	if callErr != nil {
		msg := "provider: " + callErr.Error()
		if ctx.Err() != nil && errors.Is(callErr, context.Canceled) {
			msg = inkwell.ErrShutdownGrace
		}
		return true, l.fail(ctx, c, msg, elapsed)
	}
	crashpoint.Hit(crashpoint.ProviderAfterCall)
	return true, l.complete(ctx, c, req, resp, elapsed)
}

// call runs the provider outside any transaction. After ctx ends (a stop
// was asked for) the call still gets the grace period to finish.
func (l *Lane) call(ctx context.Context, c *store.Claimed, req inkwell.Request) (inkwell.ProviderResponse, float64, error) {
	callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(l.cfg.Grace, cancel)
		context.AfterFunc(callCtx, func() { t.Stop() })
	})
	defer stop()
	start := time.Now()
	resp, err := l.cfg.Provider.Generate(callCtx, inkwell.ProviderRequest{
		IdempotencyKey: inkwell.ProviderKey(c.Job.ID, c.Job.IdempotencyKey),
		Prompt:         req.Prompt,
		MaxWords:       req.MaxWords,
	})
	if err != nil && callCtx.Err() != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w: %w", context.Canceled, err)
	}
	return resp, time.Since(start).Seconds(), err
}

// complete records a provider answer. Its outcome is written even during
// shutdown, on a context that outlives the stop signal.
func (l *Lane) complete(ctx context.Context, c *store.Claimed, req inkwell.Request, resp inkwell.ProviderResponse, secs float64) error {
	// The API decides who pays (api.decideAccount) and stores it in the
	// payload; only a legacy row, adopted from before accounts existed, has
	// none, and it is charged to the default account as the API would.
	account := req.Account
	if account == "" {
		account = inkwell.DefaultAccount
	}
	err := l.record(ctx, func(wctx context.Context) error {
		return l.store.CompleteIfRunning(wctx, store.CompleteParams{
			JobID: c.Job.ID, AttemptID: c.Attempt.ID, Text: resp.Text,
			Account: account, AmountMicros: resp.AmountMicros, ProviderRequestID: resp.RequestID,
		})
	})
	wctx := context.WithoutCancel(ctx)
	log := l.log.With("job_id", c.Job.ID, "attempt_id", c.Attempt.ID, "attempt_number", c.Attempt.AttemptNumber)
	switch {
	case inkwell.ErrorCode(err) == inkwell.ECONFLICT && l.attemptDone(wctx, c):
		// A retried commit whose first try landed before its answer was lost.
		log.InfoContext(wctx, "job done (the first commit of the completion had landed)", "provider_request_id", resp.RequestID)
	case inkwell.ErrorCode(err) == inkwell.ECONFLICT:
		log.WarnContext(wctx, "completion refused: attempt is no longer the running one; nothing written", "err", err)
		l.observe(OutcomeFenced, secs, c.Job)
		return nil
	case inkwell.ErrorCode(err) == inkwell.EUNAVAILABLE:
		l.observe(OutcomeAborted, secs, c.Job)
		return fmt.Errorf("%w: %w", errUnrecorded, err)
	case err != nil:
		// The database refused this answer for good (it is not busy): record
		// a failed attempt that says why, rather than stop the lane and
		// leave the job running; a retry would get the same answer again.
		log.ErrorContext(wctx, "provider answer could not be stored", "err", err)
		return l.fail(ctx, c, "could not store the provider's answer: "+err.Error(), secs)
	default:
		log.InfoContext(wctx, "job done", "provider_request_id", resp.RequestID, "amount_micros", resp.AmountMicros, "provider_seconds", secs)
	}
	l.observe(OutcomeDone, secs, c.Job)
	return nil
}

// attemptDone reports whether the claimed attempt is already done: the
// evidence that a completion's commit landed although its answer did not
// reach the lane.
func (l *Lane) attemptDone(ctx context.Context, c *store.Claimed) bool {
	rctx, cancel := context.WithTimeout(ctx, l.cfg.DBTimeout)
	defer cancel()
	attempts, err := l.store.Attempts(rctx, c.Job.ID)
	if err != nil {
		return false
	}
	for _, a := range attempts {
		if a.ID == c.Attempt.ID {
			return a.Status == inkwell.StatusDone
		}
	}
	return false
}

func (l *Lane) fail(ctx context.Context, c *store.Claimed, msg string, secs float64) error {
	msg = storableError(msg)
	err := l.record(ctx, func(wctx context.Context) error {
		return l.store.FailIfRunning(wctx, store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: msg})
	})
	wctx := context.WithoutCancel(ctx)
	log := l.log.With("job_id", c.Job.ID, "attempt_id", c.Attempt.ID, "attempt_number", c.Attempt.AttemptNumber)
	if inkwell.ErrorCode(err) == inkwell.ECONFLICT {
		log.WarnContext(wctx, "failure not recorded: attempt is no longer the running one", "error", msg)
		l.observe(OutcomeFenced, secs, c.Job)
		return nil
	}
	if err != nil {
		l.observe(OutcomeAborted, secs, c.Job)
		return fmt.Errorf("%w: %w", errUnrecorded, err)
	}
	log.WarnContext(wctx, "job failed", "error", msg)
	l.observe(OutcomeFailed, secs, c.Job)
	return nil
}

func (l *Lane) observe(outcome string, secs float64, job inkwell.Job) {
	if l.cfg.Observer != nil {
		l.cfg.Observer.Finished(l.cfg.Name, outcome, secs, job)
	}
}

// errUnrecorded marks an outcome the lane could not write. The job stays
// running under this lane, which then stops: only a restart's recovery,
// on the evidence of the lock, may close it.
var errUnrecorded = errors.New("outcome not recorded")

// record writes an outcome, retrying while the database is unavailable
// (busy, locked, disk full) for up to Config.RecordPatience: the provider
// has answered and may have billed, so the answer is worth waiting for. It
// runs on a context that outlives a stop signal.
func (l *Lane) record(ctx context.Context, write func(ctx context.Context) error) error {
	deadline := time.Now().Add(l.cfg.RecordPatience)
	backoff := 50 * time.Millisecond
	for {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.DBTimeout)
		err := write(wctx)
		cancel()
		if inkwell.ErrorCode(err) != inkwell.EUNAVAILABLE || time.Now().Add(backoff).After(deadline) {
			return err
		}
		l.log.WarnContext(ctx, "database unavailable; retrying the write of an outcome", "err", err, "retry_in", backoff)
		time.Sleep(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}

// maxErrorBytes bounds an attempt's error text.
const maxErrorBytes = 2000

// storableError makes an error text safe to store on any dialect: valid
// UTF-8, no NUL, bounded.
func storableError(msg string) string {
	msg = strings.ToValidUTF8(strings.ReplaceAll(msg, "\x00", ""), "?")
	if len(msg) > maxErrorBytes {
		msg = strings.ToValidUTF8(msg[:maxErrorBytes], "") + "..."
	}
	return msg
}
