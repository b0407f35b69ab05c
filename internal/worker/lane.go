package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// Config configures a Lane. Zero durations take the defaults shown.
type Config struct {
	Name      string           // lane name (default "local")
	Provider  inkwell.Provider // required
	Logger    *slog.Logger     // nil discards
	Heartbeat time.Duration    // heartbeat interval (default 2s)
	Poll      time.Duration    // how often an idle lane looks for work queued by other processes (default 1s)
	Grace     time.Duration    // how long a running provider call may finish after stop (default 30s)
	// Concurrency is how many provider calls the lane runs at once, each
	// its own claim, attempt and fenced completion (default 1).
	Concurrency int
	DBTimeout   time.Duration // bound on each database call of the loop (default 10s)
	// RecordPatience is how long an outcome's write is retried while the
	// database is unavailable before the lane gives up and stops (default 1m).
	RecordPatience time.Duration
	// Rescue is how often a lane on PostgreSQL looks for dead lanes whose
	// orphans it can close on proof (default 2s); see rescue.go.
	Rescue time.Duration
	// Observer, if set, hears about each outcome (metrics live in the caller).
	Observer Observer
	// Limiter, if set, paces the lane's provider calls within the
	// provider's limits (requests and tokens per minute, 429 pauses).
	Limiter Limiter
	// Router, if set, picks each job's model, provider and limiter by the
	// model it names (route.go); Provider and Limiter are then unused.
	Router Router
	// Retry is automatic retry (retry.go); the zero value retries nothing.
	Retry RetryPolicy
	// CancelPoll is how often, while calls are in flight, the lane asks the
	// store whether any of their attempts was cancelled (or closed) by
	// another process, and aborts those calls (default: Heartbeat). A
	// cancel made through this process's API aborts at once (CancelAttempt).
	CancelPoll time.Duration
	// OnEnded, if set, is called with a job's id after the commit that
	// ended it here (done, or failed for good; not a reschedule): serve
	// wakes the job's long-polls with it.
	OnEnded func(jobID int64)
	// OnRequeued, if set, is called with a job's id after the commit that
	// put it back to queued here (an automatic retry, a job given back
	// unsent, a stranded attempt put back): serve wakes the job's waiters
	// with it, so that while it stops they answer at once (a stopping
	// lane claims nothing, so the job will not run here) instead of
	// waiting out the grace period for an end that cannot come.
	OnRequeued func(jobID int64)
	// OnStopping, if set, is called once when the lane stops claiming on
	// its own (its lock lost, its files deleted, an outcome it could not
	// record), with why; it still drains its calls and answers: serve
	// turns /readyz to 503 stopping with it. An operator's stop does not
	// call it (serve knows of that one).
	OnStopping func(cause error)
}

// beat is what the lane's heartbeat writes besides the time.
func (l *Lane) beat() store.LaneBeat {
	b := store.LaneBeat{AnswersWaiting: l.waiting.Load(), Slots: l.cfg.Concurrency, SlotsInUse: int(l.inFlight.Load())}
	if until := l.pausedUntil(); until.After(time.Now()) {
		b.PausedUntil = until
	}
	return b
}

// Limiter paces a lane's provider calls (docs/design.md §8). Every call of the lane
// asks Wait before it starts and reports Done when it ends.
type Limiter interface {
	// Wait blocks until a call estimated at tokens may start, or ctx ends
	// (then it returns ctx's error and the call is not made).
	Wait(ctx context.Context, tokens int) error
	// Done reports how the call ended: the estimate it waited for, the
	// tokens the answer says it used (0: unknown), and its error. A 429
	// among them pauses every call of the lane until its Retry-After.
	Done(estimated, used int, err error)
	// PausedUntil is when a 429's pause ends (zero or past: not paused);
	// heartbeats write it for operators.
	PausedUntil() time.Time
}

// Observer receives lane events; the API's metrics implement it.
type Observer interface {
	Claimed(lane string)
	Finished(lane, outcome string, providerSeconds float64, job inkwell.Job)
}

// ChargeCapObserver, when an Observer implements it too, hears of each
// answer charged less than it reported (capCharge): the micros it
// reported and the micros charged, by model.
type ChargeCapObserver interface {
	ChargeCapped(lane, model string, reportedMicros, chargedMicros int64)
}

// Outcomes passed to Observer.Finished.
const (
	OutcomeDone    = "done"
	OutcomeFailed  = "failed"
	OutcomeFenced  = "fenced"
	OutcomeAborted = "aborted"
	// OutcomeRescheduled: the attempt failed and the job went back to
	// queued for an automatic retry.
	OutcomeRescheduled = "rescheduled"
	// OutcomeCancelled: the job was cancelled while its call was in
	// flight; the call was aborted (or its answer discarded) and nothing
	// was written: the cancel had closed the attempt. Not a provider
	// failure.
	OutcomeCancelled = "cancelled"
)

// laneStore is what a lane needs of the store.
type laneStore interface {
	LockLane(ctx context.Context, lane string) (*store.LaneLock, error)
	Recover(ctx context.Context, l *store.LaneLock, dryRun bool) (store.RecoveryReport, error)
	RegisterLane(ctx context.Context, l *store.LaneLock) error
	Heartbeat(ctx context.Context, l *store.LaneLock, b store.LaneBeat) error
	StopLane(ctx context.Context, l *store.LaneLock, reason string) error
	CheckFiles(ctx context.Context) error
	ClaimUpTo(ctx context.Context, l *store.LaneLock, n int) ([]*store.Claimed, error)
	CompleteAndClaim(ctx context.Context, p store.CompleteParams, next *store.LaneLock) (*store.Claimed, error)
	FailAndClaim(ctx context.Context, p store.FailParams, next *store.LaneLock) (*store.Claimed, error)
	FailIfRunning(ctx context.Context, p store.FailParams) error
	AutoRetryCounts(ctx context.Context, jobID int64) (store.RetryCounts, error) // retry.go
	Installation(ctx context.Context) (inkwell.Installation, error)
	Now() time.Time // the store's clock
	// Cancel (cancel.go).
	AttemptsNotRunning(ctx context.Context, ids []int64) ([]store.EndedAttempt, error)
	Job(ctx context.Context, id int64) (inkwell.Job, error)
	// Rescue on proof (rescue.go).
	CanRescue() bool
	OutcomesClaim() bool // slot.go
	LanesWithRunning(ctx context.Context, except string) ([]string, error)
	RunningAttemptsOf(ctx context.Context, lane string, age time.Duration) ([]store.AttemptRef, error) // stranded.go
	LockLaneForRescue(ctx context.Context, lane string, by *store.LaneLock) (*store.LaneLock, error)
	Rescue(ctx context.Context, l *store.LaneLock) (store.RecoveryReport, error)
}

// Lane is one worker lane. Open it, Run it, and Close it.
type Lane struct {
	cfg   Config
	store laneStore
	log   *slog.Logger
	lock  *store.LaneLock
	wake  chan struct{}
	// installation goes into every provider idempotency key (read at Open).
	installation inkwell.Installation

	rescueScans atomic.Int64  // completed looks for dead lanes (rescue.go)
	waiting     atomic.Int64  // provider answers in hand, not yet stored (job.go record)
	inFlight    atomic.Int64  // slots in use: claimed jobs not yet called, and calls in flight (slot.go)
	freed       chan struct{} // a slot was freed
	writing     chan struct{} // answers written after their slot was freed, at most answersPerSlot × Concurrency (slot.go)
	restored    atomic.Int64  // lock file restorations already logged
	calls       calls         // calls in flight by attempt id, for cancel (cancel.go)
	// operator is Run's context, which only an operator's stop ends
	// (serve's SIGTERM); the lane's own stops (its lock lost, its files
	// deleted, an outcome it could not record) end the lane's context
	// only. Set before Run starts anything that reads it.
	operator context.Context
}

// New returns a lane over st. It panics on a missing provider: a
// programmer's mistake at construction time.
func New(st laneStore, cfg Config) *Lane {
	if cfg.Provider == nil && cfg.Router == nil {
		panic("worker.New: nil Provider and Router")
	}
	if cfg.Name == "" {
		cfg.Name = "local"
	}
	setDefault(&cfg.Heartbeat, 2*time.Second)
	setDefault(&cfg.Poll, time.Second)
	setDefault(&cfg.Grace, 30*time.Second)
	setDefault(&cfg.DBTimeout, 10*time.Second)
	setDefault(&cfg.RecordPatience, time.Minute)
	setDefault(&cfg.Rescue, 2*time.Second)
	setDefault(&cfg.CancelPoll, cfg.Heartbeat)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	return &Lane{cfg: cfg, store: st, log: log.With("component", "worker", "lane", cfg.Name),
		wake: make(chan struct{}, 1), freed: make(chan struct{}, 1), writing: make(chan struct{}, answersPerSlot*cfg.Concurrency)}
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// Lock takes the lane lock without waiting, refusing with the holder named
// when another live process holds it. Open calls it when it has not been
// called; serve calls it first, so a refused process never serves at all.
func (l *Lane) Lock(ctx context.Context) error {
	if l.lock != nil {
		return nil
	}
	lock, err := l.store.LockLane(ctx, l.cfg.Name)
	if err != nil {
		return err
	}
	l.lock = lock
	return nil
}

// Open takes the lane lock (see Lock), runs startup recovery and registers
// this incarnation. Nothing is claimed before Open returns. On error the
// lock is released.
func (l *Lane) Open(ctx context.Context) (store.RecoveryReport, error) {
	if err := l.Lock(ctx); err != nil {
		return store.RecoveryReport{}, err
	}
	rep, err := l.store.Recover(ctx, l.lock, false)
	if err == nil {
		l.logRecovery(ctx, rep)
		err = l.store.RegisterLane(ctx, l.lock)
	}
	if err == nil {
		l.installation, err = l.store.Installation(ctx)
	}
	if err != nil {
		l.lock.Release()
		l.lock = nil
		return rep, err
	}
	return rep, nil
}

func (l *Lane) logRecovery(ctx context.Context, rep store.RecoveryReport) {
	ev, _ := json.Marshal(rep.Evidence)
	l.log.InfoContext(ctx, "startup recovery", "recovery_run_id", rep.RunID,
		"attempts_closed", rep.AttemptsClosed, "attempts_backfilled", rep.AttemptsBackfilled,
		"jobs_failed", rep.JobsFailed, "evidence", string(ev))
	for _, a := range rep.Anomalies {
		l.log.WarnContext(ctx, "invariant break left unchanged", "recovery_run_id", rep.RunID, "anomaly", a)
	}
}

// Wake tells an idle lane that a job was just queued, so it claims at once
// instead of at its next poll.
func (l *Lane) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// kickIn wakes the lane after d, when a job it put back for an automatic
// retry may run again, instead of at the next poll after it.
func (l *Lane) kickIn(d time.Duration) { time.AfterFunc(d, l.Wake) }

// Name is the lane's name.
func (l *Lane) Name() string { return l.cfg.Name }

// AnswersWaiting is how many provider answers the lane holds and has not
// stored yet because the database is unavailable (busy, locked or full).
func (l *Lane) AnswersWaiting() int64 { return l.waiting.Load() }

// Run claims and runs jobs until ctx ends or the lane loses its lock. When
// ctx ends it stops claiming, lets a running provider call finish within
// the grace period, records the outcome, marks the lane stopped and
// returns nil. It returns an error when the lane had to stop on its own.
func (l *Lane) Run(ctx context.Context) error {
	if l.lock == nil {
		return errors.New("worker: Run before Open")
	}
	l.operator = ctx
	laneCtx, stopLane := context.WithCancelCause(ctx)
	defer stopLane(nil)
	if l.cfg.OnStopping != nil {
		defer context.AfterFunc(laneCtx, func() {
			if ctx.Err() == nil { // its own stop, not the operator's
				l.cfg.OnStopping(context.Cause(laneCtx))
			}
		})()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); l.heartbeat(laneCtx, stopLane) }()
	// Cancels are watched until the last call has ended, through a stop's
	// grace period too.
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatch()
	wg.Add(1)
	go func() { defer wg.Done(); l.watchCancels(watchCtx) }()
	if l.store.CanRescue() { // SQLite: one lane per file in practice; orphans close at restart
		wg.Add(1)
		go func() { defer wg.Done(); l.rescue(laneCtx) }()
	}
	l.log.InfoContext(ctx, "lane running", "pid", l.lock.Self.PID, "incarnation", l.lock.Self.Incarnation)
	unrecorded := l.loop(laneCtx, stopLane)
	stopWatch()
	stopLane(nil)
	wg.Wait()
	cause := context.Cause(laneCtx)
	reason := "shutdown"
	var runErr error
	if cause != nil && !errors.Is(cause, context.Canceled) {
		reason, runErr = "stopped: "+cause.Error(), cause
	} else if unrecorded != nil { // during a shutdown: still not a clean one
		reason, runErr = "shutdown with an outcome not recorded: "+unrecorded.Error(), unrecorded
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.DBTimeout)
	defer cancel()
	if err := l.store.StopLane(sctx, l.lock, reason); err != nil {
		l.log.ErrorContext(sctx, "record lane stop", "err", err)
	}
	l.log.InfoContext(sctx, "lane stopped", "reason", reason)
	return runErr
}

// Close releases the lane lock.
func (l *Lane) Close() error {
	if l.lock == nil {
		return nil
	}
	return l.lock.Release()
}

// loop claims jobs for the lane's free slots and runs each in its own
// goroutine, until ctx ends or the lane must stop; then it claims nothing
// more and waits for every call in flight (each gets the grace period and
// its outcome is recorded). It returns the error of an outcome it could
// not record, if one ended it.
func (l *Lane) loop(ctx context.Context, stopLane context.CancelCauseFunc) error {
	poll := time.NewTicker(l.cfg.Poll)
	defer poll.Stop()
	var calls sync.WaitGroup
	var unrecorded atomic.Pointer[error]
	backlog := false // the last claim filled every free slot: more may be queued
	for ctx.Err() == nil {
		if err := l.checkLock(ctx); err != nil { // fencing: no claim without the lock
			l.log.ErrorContext(ctx, "lane lock lost; no more claims, stopping the lane", "err", err)
			stopLane(err)
			break
		}
		if backlog {
			// Outcomes commit in groups, so slots free in bursts: with a
			// backlog, gather the burst before claiming, so one claim (one
			// durable commit) fills many slots instead of one each.
			l.gatherFreed(ctx)
		}
		free := l.cfg.Concurrency - int(l.inFlight.Load())
		if free == 0 {
			l.waitFor(ctx, l.freed, nil)
			continue
		}
		if ctx.Err() != nil { // a stop while gathering: claim nothing more
			break
		}
		claimed, err := l.claim(ctx, free)
		if err != nil {
			l.log.ErrorContext(ctx, "lane step", "err", err)
		}
		for _, c := range claimed {
			l.inFlight.Add(1)
			// A slot runs its job, then the job claimed with its outcome
			// (Lane.run), and so on while the queue has work: one durable
			// commit per job for its outcome and its successor's claim. It
			// frees when an outcome claims nothing.
			calls.Go(func() {
				s := &slot{l: l}
				defer s.free()
				for c != nil {
					next, err := l.run(ctx, c, s)
					if errors.Is(err, errUnrecorded) {
						l.log.ErrorContext(ctx, "stopping the lane: a job's outcome could not be recorded; restart recovery will close it", "err", err)
						unrecorded.CompareAndSwap(nil, &err)
						stopLane(err)
					}
					c = next // claimed, so run even after a stop: it gets the grace period
				}
			})
		}
		if backlog = err == nil && len(claimed) == free; backlog {
			continue // every free slot filled: more may be queued
		}
		l.waitFor(ctx, l.wake, poll.C) // the queue is empty (or the claim failed)
	}
	calls.Wait()
	if e := unrecorded.Load(); e != nil {
		return *e
	}
	return nil
}

// gatherFreed waits, briefly, for more slots to free once the queue is
// known to have a backlog (the last claim filled every free slot): until
// every slot is free, gatherIdle passes with none freeing, or
// coalesceWait has passed. A lane whose last claim emptied the queue
// skips it, so a new job's claim never waits. On PostgreSQL, where a
// claim is a statement of its own, a claim of 15 jobs costs little more
// than one of 8 (most of its cost is the statement's, not its rows'), so
// larger claims drain faster; that holds only since answers no longer
// hold the slots (answersPerSlot). Figures: docs/benchmarks.md, "A fourth
// sitting". On SQLite, where an outcome claims its slot's next job, it
// changed nothing measurable.
func (l *Lane) gatherFreed(ctx context.Context) {
	if l.inFlight.Load() == 0 {
		return
	}
	t := time.NewTimer(coalesceWait)
	defer t.Stop()
	idle := time.NewTimer(gatherIdle)
	defer idle.Stop()
	for l.inFlight.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-idle.C:
			return
		case <-l.freed:
			idle.Reset(gatherIdle)
		}
	}
}

// coalesceWait bounds how long a lane with a backlog gathers freed slots
// before it claims: short next to any real provider call.
const coalesceWait = time.Millisecond

// gatherIdle ends the gathering early when no slot has freed for this
// long: the slots still taken are in calls that are not ending now (a
// slow or hung call among fast ones), so waiting the rest of
// coalesceWait for them would only delay the claim. The slots of a
// zero-latency claim free within it of each other: one lane × 16 on
// PostgreSQL still claimed 15.2–15.5 jobs at a time with it.
const gatherIdle = 250 * time.Microsecond

// release frees a slot and tells the loop.
func (l *Lane) release() {
	l.inFlight.Add(-1)
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// waitFor waits until ctx ends or a or b delivers (a nil channel never does).
// operatorStop is the context whose end is an operator's stop: Run's,
// or ctx outside Run. A stop the lane makes on its own ends the lane's
// context, not this one: it claims nothing more, but its calls in flight
// run to their end and their answers are tried until stored, for as long
// as the process lives (the completion is fenced by its attempt, so a
// lane that lost its lock may still store it safely, or be refused).
// Only an operator's stop bounds them by the grace period.
func (l *Lane) operatorStop(ctx context.Context) context.Context {
	if l.operator != nil {
		return l.operator
	}
	return ctx
}

func (l *Lane) waitFor(ctx context.Context, a <-chan struct{}, b <-chan time.Time) {
	select {
	case <-ctx.Done():
	case <-a:
	case <-b:
	}
}

func (l *Lane) heartbeat(ctx context.Context, stopLane context.CancelCauseFunc) {
	t := time.NewTicker(l.cfg.Heartbeat)
	defer t.Stop()
	first := make(chan struct{}, 1) // beat at once: the row says the lane's slots from the start
	first <- struct{}{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-first:
		case <-t.C:
		case <-l.lock.Lost(): // PostgreSQL: the lock session is gone; stop now
		}
		if err := l.checkLock(ctx); err != nil {
			l.log.ErrorContext(ctx, "lane lock lost; stopping the lane", "err", err)
			stopLane(err)
			return
		}
		// The database's own files (SQLite): deleted or replaced under this
		// process, they are saved where the error says and the lane stops;
		// its calls in flight still finish and are stored as in a shutdown.
		if err := l.store.CheckFiles(context.WithoutCancel(ctx)); err != nil {
			l.log.ErrorContext(ctx, "database files deleted or replaced; stopping the lane", "err", err)
			stopLane(err)
			return
		}
		hctx, cancel := context.WithTimeout(ctx, l.cfg.DBTimeout)
		err := l.store.Heartbeat(hctx, l.lock, l.beat())
		cancel()
		switch {
		case inkwell.ErrorCode(err) == inkwell.ECONFLICT:
			err = fmt.Errorf("lanes row no longer names this incarnation: %w", err)
			l.log.ErrorContext(ctx, "lane taken over; stopping the lane", "err", err)
			stopLane(err)
			return
		case err != nil && ctx.Err() == nil:
			l.log.WarnContext(ctx, "heartbeat", "err", err)
		case err == nil:
			sctx, cancel := context.WithTimeout(ctx, l.cfg.DBTimeout)
			l.closeStranded(sctx) // stranded.go
			cancel()
		}
	}
}

// checkLock checks the lane's lock (see store.LaneLock.Check) and logs
// each time it had to take the lock again on a deleted or replaced file.
func (l *Lane) checkLock(ctx context.Context) error {
	err := l.lock.Check()
	if n := l.lock.Restored(); n > l.restored.Load() {
		l.restored.Store(n)
		l.log.WarnContext(ctx, "lane lock file was deleted or replaced; took the lock on the new file and carried on "+
			"(a process that starts this lane meanwhile is refused: this one is alive)", "lock", l.lock.Path)
	}
	return err
}
