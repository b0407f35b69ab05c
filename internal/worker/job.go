package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/inkwell/inkwell/internal/limiter"
	"github.com/inkwell/inkwell/internal/store"
)

// claim claims up to n queued jobs for this lane's free slots. The claim
// is not cut by a stop signal: a claim whose commit raced the signal would
// leave running attempts nobody runs until the next start. Once begun, it
// finishes, and its jobs get the grace period.
func (l *Lane) claim(ctx context.Context, n int) ([]*store.Claimed, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.DBTimeout)
	defer cancel()
	claimed, err := l.store.ClaimUpTo(cctx, l.lock, n)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return claimed, nil
}

// run takes one claimed job to an outcome: the provider call outside any
// transaction, then its completion or failure. It returns the job its slot
// runs next, claimed in the outcome's own transaction (nil: none; see
// nextLock), and errUnrecorded when the outcome could not be written.
func (l *Lane) run(ctx context.Context, c *store.Claimed, s *slot) (next *store.Claimed, err error) {
	j := &claimedJob{Claimed: c, slot: s, log: l.log.With("job_id", c.Job.ID, "attempt_id", c.Attempt.ID, "attempt_number", c.Attempt.AttemptNumber)}
	err = l.runJob(ctx, j)
	return j.next, err
}

// nextLock is what an outcome passes to ask for its slot's next job: the
// lane's lock, or nil once the lane is stopping (no new claims) or where
// the slot was freed when its call ended (slot.go).
func (l *Lane) nextLock(ctx context.Context, j *claimedJob) *store.LaneLock {
	if ctx.Err() != nil || j.slot.freed {
		return nil
	}
	return l.lock
}

func (l *Lane) runJob(ctx context.Context, j *claimedJob) (err error) {
	c := j.Claimed
	j.log.InfoContext(ctx, "job claimed")
	if l.cfg.Observer != nil {
		l.cfg.Observer.Claimed(l.cfg.Name)
	}
	// From here until its call ends, a cancel aborts the call (cancel.go).
	// The registry is also what the lane runs (stranded.go): an attempt
	// whose outcome could not be recorded stays in it, since its call
	// was made and only restart recovery may close it.
	var unregister func()
	j.callCtx, unregister = l.calls.add(ctx, c.Attempt.ID)
	defer func() {
		if !errors.Is(err, errUnrecorded) {
			unregister()
		}
	}()
	w, err := inkwell.ReadPayload(c.Job.Payload)
	c.Job.Payload = nil // read: a call in flight holds the request once, as its provider request
	if err != nil {
		return l.fail(ctx, j, failure{msg: fmt.Sprintf("payload unreadable: %v", err), class: inkwell.ClassRejected}, 0)
	}
	rt, err := l.route(w.Chat.Model)
	if err != nil { // the model left the config file after the job was accepted: nothing was sent
		return l.fail(ctx, j, failure{msg: "not sent: " + inkwell.ErrorMessage(err), class: inkwell.ClassRejected}, 0)
	}
	j.route = &rt
	preq := providerRequest(l.installation.ProviderKey(c.Job.ID, c.Job.IdempotencyKey), w, rt)
	j.bounds = boundsOf(preq, l.chargeCap(c, w, rt))
	resp, elapsed, callErr := l.call(ctx, j, preq, estimate(w, preq))
	j.slot.callEnded()
	if callErr != nil {
		if j.abortCause() != nil {
			return l.aborted(ctx, j, elapsed)
		}
		if busy, ok := errors.AsType[*limiter.BusyError](callErr); ok {
			return l.giveBack(ctx, j, busy.For, elapsed)
		}
		f := failure{msg: "provider: " + callErr.Error()}
		f.class, f.retryAfter = classify(ctx, callErr)
		switch {
		case errors.Is(callErr, errNotCalled):
			f.msg = "not sent: stopped while waiting for the provider's rate limit; the provider was not called"
		case f.class == inkwell.ClassShutdown:
			f.msg = inkwell.ErrShutdownGrace
		}
		return l.fail(ctx, j, f, elapsed)
	}
	crashpoint.Hit(crashpoint.ProviderAfterCall)
	return l.complete(ctx, j, resp, elapsed)
}

// claimedJob is one claimed job on its way to an outcome, with the logger
// that names it in every line.
type claimedJob struct {
	*store.Claimed
	slot     *slot // the slot it runs in
	log      *slog.Logger
	stopSeen time.Time // when record first saw the stop signal with an answer unstored
	// next is the job claimed for this slot in the transaction that wrote
	// this job's outcome; the slot runs it next.
	next *store.Claimed
	// callCtx is the context the provider call runs under; a cancel
	// aborts it with errJobCancelled as its cause (cancel.go).
	callCtx context.Context
	// route is where the call goes (nil until the payload is read).
	route *Route
	// bounds is what the charge needs of the request (chargeMicros). The
	// request itself is not kept: a call in flight holds nothing of it
	// but what is on its way to the provider.
	bounds callBounds
}

// call runs the provider outside any transaction. After ctx ends (a stop
// was asked for) the call still gets the grace period to finish; a cancel
// of its job aborts it at once (j.callCtx, see cancel.go).
func (l *Lane) call(ctx context.Context, j *claimedJob, preq inkwell.ProviderRequest, est int) (resp inkwell.ProviderResponse, secs float64, err error) {
	callCtx, cancel := context.WithCancel(j.callCtx)
	defer cancel()
	stop := context.AfterFunc(l.operatorStop(ctx), func() {
		t := time.AfterFunc(l.cfg.Grace, cancel)
		context.AfterFunc(callCtx, func() { t.Stop() })
	})
	defer stop()
	start := time.Now()
	if lim := j.route.Limiter; lim != nil {
		// Nothing is sent before the limiter lets it: a call stopped while
		// it waits reached no provider.
		// A stop ends the wait at once (ctx, not callCtx): no new call
		// starts after a stop.
		// A cancel ends it too.
		waitCtx, stopWait := context.WithCancel(ctx)
		defer stopWait()
		defer context.AfterFunc(callCtx, stopWait)()
		if err := l.admit(waitCtx, lim, est); err != nil {
			if _, busy := errors.AsType[*limiter.BusyError](err); busy {
				return inkwell.ProviderResponse{}, time.Since(start).Seconds(), err
			}
			return inkwell.ProviderResponse{}, time.Since(start).Seconds(), fmt.Errorf("%w: %w", errNotCalled, err)
		}
		defer func() {
			doneErr := err
			if cause := j.abortCause(); cause != nil && err != nil {
				doneErr = cause // aborted by a cancel: neither a provider failure nor a 429
			}
			lim.Done(est, resp.TokensUsed, doneErr)
		}()
	}
	resp, err = j.route.Provider.Generate(callCtx, preq)
	if err != nil && callCtx.Err() != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w: %w", context.Canceled, err)
	}
	return resp, time.Since(start).Seconds(), err
}

// complete records a provider answer. The answer is in hand and may have
// been paid for, so it is stored unless the attempt was fenced out: the
// write waits out a busy, locked or full database for as long as the
// process lives (after a stop signal, for the grace period).
func (l *Lane) complete(ctx context.Context, j *claimedJob, resp inkwell.ProviderResponse, secs float64) error {
	// Who pays was decided at accept (inkwell.Payer) and stored in
	// jobs.account (the default account for rows adopted from before
	// accounts existed).
	account := j.Job.Account
	if account == "" {
		account = inkwell.DefaultAccount
	}
	resp.AmountMicros = chargeMicros(j.route, j.bounds, resp)
	if j.route.Model.Priced() && resp.AmountMicros > inkwell.MaxChargeMicros {
		// Usage no call could have had (a provider's bug): an answer whose
		// cost cannot be told is not stored, as any malformed answer.
		return l.fail(ctx, j, failure{msg: fmt.Sprintf("answer reports an impossible usage (%d prompt + %d completion tokens, more than %d micros at %q's prices): not stored",
			resp.PromptTokens, resp.CompletionTokens, int64(inkwell.MaxChargeMicros), j.route.Model.Name), class: inkwell.ClassMalformed}, secs)
	}
	reported := resp.AmountMicros
	var capped bool
	if resp.AmountMicros, capped = capCharge(reported, j.bounds); capped {
		j.log.WarnContext(context.WithoutCancel(ctx), "answer reports more than its request could cost: charged the worst case accept reserved, the usage kept as reported",
			"model", j.route.Model.Name, "prompt_tokens", resp.PromptTokens, "completion_tokens", resp.CompletionTokens,
			"reported_micros", reported, "charged_micros", resp.AmountMicros, "provider_request_id", resp.RequestID)
		if o, ok := l.cfg.Observer.(ChargeCapObserver); ok {
			o.ChargeCapped(l.cfg.Name, j.route.Model.Name, reported, resp.AmountMicros)
		}
	}
	err := l.record(ctx, j, true, func(wctx context.Context) error {
		var err error
		j.next, err = l.store.CompleteAndClaim(wctx, store.CompleteParams{
			JobID: j.Job.ID, AttemptID: j.Attempt.ID, Text: resp.Text,
			Account: account, AmountMicros: resp.AmountMicros, ProviderRequestID: resp.RequestID,
			Model: j.route.Model.Name, Response: resp.Response, FinishReason: resp.FinishReason,
			PromptTokens: resp.PromptTokens, CompletionTokens: resp.CompletionTokens, Usage: resp.Usage,
		}, l.nextLock(ctx, j))
		return err
	})
	wctx := context.WithoutCancel(ctx)
	switch {
	case errors.Is(err, store.ErrAlreadyDone):
		// A retried commit whose first try landed before its answer was lost.
		j.log.InfoContext(wctx, "job done (the first commit of the completion had landed)", "provider_request_id", resp.RequestID)
	case inkwell.ErrorCode(err) == inkwell.ECONFLICT:
		l.discarded(ctx, j, resp, secs, err) // cancelled, or closed by recovery: logged with the provider request id
		return nil
	case isUnavailable(err):
		j.log.ErrorContext(wctx, "PROVIDER ANSWER NOT STORED: the database stayed unavailable until the lane had to stop; "+
			"the job stays running until recovery closes it, and a retry calls the provider again under the same key",
			"provider_request_id", resp.RequestID, "amount_micros", resp.AmountMicros, "err", err)
		l.observe(OutcomeAborted, secs, j.Job)
		return fmt.Errorf("%w: %w", errUnrecorded, err)
	case err != nil:
		// The database refused this answer for good (it is not busy): record
		// a failed attempt that says why, rather than stop the lane and
		// leave the job running; a retry would get the same answer again.
		j.log.ErrorContext(wctx, "provider answer could not be stored", "err", err)
		return l.fail(ctx, j, failure{msg: "could not store the provider's answer: " + err.Error(), class: inkwell.ClassUnstorable}, secs)
	default:
		j.log.InfoContext(wctx, "job done", "provider_request_id", resp.RequestID, "amount_micros", resp.AmountMicros, "provider_seconds", secs)
	}
	l.ended(j.Job.ID)
	l.observe(OutcomeDone, secs, j.Job)
	return nil
}

// failure is why a call failed: the error text stored, its class, and a
// 429's Retry-After.
type failure struct {
	msg        string
	class      inkwell.ErrorClass
	retryAfter time.Duration
	// heldFor is set for a call the provider's limiter held back, never
	// sent (giveBack): the job waits this long, whatever the retry policy.
	heldFor time.Duration
}

// fail records a failed attempt. In the same transaction its job fails, or
// goes back to queued when the retry policy says a second call cannot
// spend money twice (reschedule).
func (l *Lane) fail(ctx context.Context, j *claimedJob, f failure, secs float64) error {
	msg := storableError(f.msg)
	pol := l.retryPolicy(j)
	var d retryDecision
	var retryAt *time.Time
	err := l.record(ctx, j, false, func(wctx context.Context) error {
		// Decided on each try of the write, after a count that waits
		// for the database as the write does.
		if f.heldFor > 0 {
			d = retryDecision{wait: f.heldFor}
		} else {
			t, err := l.tally(wctx, j, f.class)
			if err != nil {
				return err
			}
			d = pol.decide(f.class, j.Attempt.AttemptNumber, t, f.retryAfter)
		}
		retryAt = nil
		if d.wait > 0 {
			// The back-off is measured on the store's clock, the one the
			// claim compares not_before with (on PostgreSQL the
			// database's, whatever this host's clock says).
			at := l.store.Now().Add(d.wait)
			retryAt = &at
		}
		var err error
		j.next, err = l.store.FailAndClaim(wctx, store.FailParams{JobID: j.Job.ID, AttemptID: j.Attempt.ID, Error: msg, Class: f.class,
			RetryAt: retryAt, ProviderHonoursKeys: pol.ProviderHonoursKeys, GaveUpAfter: d.gaveUpAfter, HeldBack: f.heldFor > 0}, l.nextLock(ctx, j))
		return err
	})
	wctx := context.WithoutCancel(ctx)
	if inkwell.ErrorCode(err) == inkwell.ECONFLICT {
		j.log.WarnContext(wctx, "failure not recorded: attempt is no longer the running one", "error", msg, "error_class", f.class)
		l.observe(OutcomeFenced, secs, j.Job)
		return nil
	}
	if err != nil {
		l.observe(OutcomeAborted, secs, j.Job)
		return fmt.Errorf("%w: %w", errUnrecorded, err)
	}
	switch {
	case retryAt != nil && f.heldFor > 0:
		j.log.InfoContext(wctx, "job given back unsent: its provider's limit would hold it, and the slot serves other providers' jobs meanwhile",
			"provider", j.route.Model.Provider, "not_before", retryAt.UTC().Format(time.RFC3339Nano))
		l.requeued(j.Job.ID)
		l.observe(OutcomeRescheduled, secs, j.Job)
		l.kickIn(d.wait)
		return nil
	case retryAt != nil:
		limit, most := "max_attempts", pol.MaxAttempts
		if f.class == inkwell.ClassRateLimited {
			limit, most = "max_rate_limited", pol.maxRateLimited()
		}
		j.log.WarnContext(wctx, "attempt failed; job queued again for an automatic retry", "error", msg, "error_class", f.class,
			"not_before", retryAt.UTC().Format(time.RFC3339Nano), limit, most)
		l.requeued(j.Job.ID)
		l.observe(OutcomeRescheduled, secs, j.Job)
		l.kickIn(d.wait)
		return nil
	case d.gaveUpAfter > 0:
		j.log.WarnContext(wctx, "job failed: automatic retry gave up", "error", msg, "error_class", f.class, "attempts", d.gaveUpAfter)
	default:
		j.log.WarnContext(wctx, "job failed", "error", msg, "error_class", f.class)
	}
	l.ended(j.Job.ID)
	l.observe(OutcomeFailed, secs, j.Job)
	return nil
}

// tally counts the job's attempts since its last retry by hand, this
// failing one included, for the retry policy. A failure that is never
// retried, and a first attempt, need no read. An unavailable database is
// returned, for record to wait for it as it waits to write the failure;
// any other error leaves the counts unknown (every attempt of the job
// counts toward --max-attempts, as before 429s were counted apart).
func (l *Lane) tally(ctx context.Context, j *claimedJob, c inkwell.ErrorClass) (tally, error) {
	this := 0
	if c == inkwell.ClassRateLimited {
		this = 1
	}
	switch {
	case !l.retryPolicy(j).mayRetry(c):
		return tally{}, nil
	case j.Attempt.AttemptNumber == 1:
		return tally{known: true, since: 1, rateLimited: this}, nil
	}
	n, err := l.store.AutoRetryCounts(ctx, j.Job.ID)
	if isUnavailable(err) {
		return tally{}, err
	}
	if err != nil {
		j.log.WarnContext(context.WithoutCancel(ctx), "could not count the job's attempts since its last retry by hand; counting every attempt toward --max-attempts", "err", err)
		return tally{}, nil
	}
	return tally{known: true, since: n.Attempts + 1, rateLimited: n.RateLimited + this}, nil
}

// ended tells Config.OnEnded that a job ended here (its commit is done).
func (l *Lane) ended(jobID int64) {
	if l.cfg.OnEnded != nil {
		l.cfg.OnEnded(jobID)
	}
}

// requeued tells Config.OnRequeued that a job went back to queued here
// (its commit is done).
func (l *Lane) requeued(jobID int64) {
	if l.cfg.OnRequeued != nil {
		l.cfg.OnRequeued(jobID)
	}
}

func (l *Lane) observe(outcome string, secs float64, job inkwell.Job) {
	if l.cfg.Observer != nil {
		l.cfg.Observer.Finished(l.cfg.Name, outcome, secs, job)
	}
}

// errNotCalled marks a call that never started: the lane stopped while it
// waited for the provider's rate limit.
var errNotCalled = errors.New("stopped before the provider was called")

// errUnrecorded marks an outcome the lane could not write. The job stays
// running under this lane, which then stops: only a restart's recovery,
// on the evidence of the lock, may close it.
var errUnrecorded = errors.New("outcome not recorded")

// isUnavailable says whether a write may succeed if tried again: the
// database was busy, locked or full, or did not answer within the try's
// deadline (queued behind other writers, or behind another process's
// lock). Neither means the row was refused.
func isUnavailable(err error) bool {
	return inkwell.ErrorCode(err) == inkwell.EUNAVAILABLE || errors.Is(err, context.DeadlineExceeded)
}

// record writes an outcome on a context that outlives a stop signal,
// trying again while the database is unavailable. An answer (answer=true)
// is tried for as long as the process lives, or, once ctx has ended (a
// stop), for the grace period; a failure for Config.RecordPatience. While
// an answer waits, AnswersWaiting counts it (heartbeats write it to the
// lanes row, the views show it) and the log says so.
func (l *Lane) record(ctx context.Context, j *claimedJob, answer bool, write func(ctx context.Context) error) error {
	giveUp := time.Now().Add(l.cfg.RecordPatience)
	backoff := 50 * time.Millisecond
	var lastLog time.Time
	for try := 1; ; try++ {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.DBTimeout)
		err := write(wctx)
		cancel()
		if !isUnavailable(err) {
			if try > 1 && answer {
				l.waiting.Add(-1)
				j.log.InfoContext(ctx, "answer stored after waiting for the database", "tries", try)
			}
			return err
		}
		if answer && try == 1 {
			l.waiting.Add(1)
		}
		if answer {
			giveUp = l.answerDeadline(ctx, j)
		}
		if time.Now().Add(backoff).After(giveUp) {
			if answer {
				l.waiting.Add(-1)
			}
			return err
		}
		if time.Since(lastLog) >= 15*time.Second {
			lastLog = time.Now()
			msg := "database unavailable; retrying the write of a failure"
			if answer {
				msg = "answer waiting to be stored: database unavailable; retrying"
			}
			j.log.WarnContext(ctx, msg, "err", err, "tries", try, "retry_in", backoff)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}

// answerDeadline is how long an unstored answer is tried: for as long as
// the process lives, until an operator's stop (a stop the lane makes on
// its own does not count: operatorStop); then for the grace period, said
// loudly once.
func (l *Lane) answerDeadline(ctx context.Context, j *claimedJob) time.Time {
	if l.operatorStop(ctx).Err() == nil {
		return time.Now().Add(24 * time.Hour) // pushed forward at every try: no limit while running
	}
	if j.stopSeen.IsZero() {
		j.stopSeen = time.Now()
		j.log.ErrorContext(context.WithoutCancel(ctx), "stopping with a provider answer not stored yet: the database is unavailable; "+
			"still trying for the grace period", "grace", l.cfg.Grace)
	}
	return j.stopSeen.Add(l.cfg.Grace)
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

// holdAtMost is how long a lane serving several providers lets one call
// wait in its provider's limiter before it gives the job back (giveBack):
// long enough for the ordinary pace of an rpm or tpm, short next to a
// 429's pause, so that one provider's limit does not keep every slot from
// the others' jobs (docs/providers.md, "Limits").
const holdAtMost = time.Second

// waitMostLimiter is a limiter that can say no instead of waiting long
// (*limiter.Limiter).
type waitMostLimiter interface {
	WaitAtMost(ctx context.Context, tokens int, most time.Duration) error
}

// admit waits for lim to admit a call of est tokens. A lane whose
// calls go to more than one provider waits at most holdAtMost (the error
// is then a *limiter.BusyError); a lane with one provider has nothing else
// for its slots to do, and waits as long as the limit says.
func (l *Lane) admit(ctx context.Context, lim Limiter, est int) error {
	if wm, ok := lim.(waitMostLimiter); ok && len(l.limiters()) > 1 {
		return wm.WaitAtMost(ctx, est, holdAtMost)
	}
	return lim.Wait(ctx, est)
}

// giveBack puts a job whose call its provider's limiter held back (a 429's
// pause, or the line at its rpm or tpm) back to queued, unsent, until
// about when the limiter would have let it go: its attempt fails as
// rate_limited, "not sent", marked held_back, and its slot takes the next
// job, which may go to another provider. It is not an automatic retry:
// nothing was sent, it happens whatever --max-attempts says, and automatic
// retry counts it neither as an attempt nor as a 429.
func (l *Lane) giveBack(ctx context.Context, j *claimedJob, held time.Duration, secs float64) error {
	held = max(held, 10*time.Millisecond)
	msg := fmt.Sprintf("not sent: provider %s's limits (a 429's pause, or its rpm or tpm) would have held this call about %s more; given back to the queue so that the lane's slots serve other providers' jobs meanwhile",
		j.route.Model.Provider, held.Round(time.Millisecond))
	return l.fail(ctx, j, failure{msg: msg, class: inkwell.ClassRateLimited, heldFor: held}, secs)
}
