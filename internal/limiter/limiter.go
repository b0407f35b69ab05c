package limiter

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Back-off after a 429 that carries no Retry-After, and the bound on any
// one pause (a Retry-After past it is a bad date or a quota that would
// refuse the call anyway; the lane looks again after MaxPause).
const (
	BackoffBase = time.Second
	BackoffCap  = time.Minute
	MaxPause    = 15 * time.Minute
)

// Config configures a Limiter. The zero value limits nothing and still
// pauses the lane after a 429.
type Config struct {
	RPM int // requests per minute; 0: unlimited
	// TPM is tokens per minute, counted by the caller's estimate before
	// the call and corrected by the answer's usage; 0: unlimited.
	TPM    int
	Logger *slog.Logger // pauses are logged here; nil discards
	// OnWait, when set, hears how long each Wait took, admitted or not
	// (cmd/inkwell feeds inkwell_provider_limiter_wait_seconds with it).
	OnWait func(time.Duration)
}

// Limiter paces one lane's provider calls. It is safe for any number of
// concurrent callers. Create it with New.
type Limiter struct {
	log    *slog.Logger
	onWait func(time.Duration)

	mu          sync.Mutex
	reqs, toks  bucket
	queue       []*waiter // first come first served; queue[0] alone watches the clock
	pausedUntil time.Time
	backoffs    int   // 429s without Retry-After since the last answer: the next back-off doubles
	inFlight    int   // calls admitted whose Done has not come yet
	limited     int64 // 429s reported to Done, ever
	// promised is when the callers WaitAtMost gave back were told to come
	// back, those still to come (busy.go).
	promised []promise
}

// waiter is one caller of Wait. wake tells it that the line or the
// limits changed and it should look again.
type waiter struct {
	tokens float64
	wake   chan struct{}
}

// New returns a limiter for cfg. It panics on a negative limit: the
// command refuses one before it builds anything.
func New(cfg Config) *Limiter {
	if cfg.RPM < 0 || cfg.TPM < 0 {
		panic("limiter.New: negative limit")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := time.Now()
	return &Limiter{
		log:    log.With("component", "limiter"),
		onWait: cfg.OnWait,
		reqs:   newBucket(cfg.RPM, now),
		toks:   newBucket(cfg.TPM, now),
	}
}

// Wait blocks until a call estimated at tokens may be sent: it is first in
// line, the lane is not paused, and both buckets hold enough. It returns
// ctx's error, and admits nothing, if ctx ends first.
func (l *Limiter) Wait(ctx context.Context, tokens int) error {
	return l.wait(ctx, tokens, 0)
}

// wait is Wait, giving up after most when most > 0: then the error is a
// *BusyError whose For is estimated from the caller's place in line
// before it leaves it.
func (l *Limiter) wait(ctx context.Context, tokens int, most time.Duration) error {
	start := time.Now()
	defer l.observe(start)
	if err := ctx.Err(); err != nil {
		return err
	}
	var giveUp <-chan time.Time
	if most > 0 {
		t := time.NewTimer(most)
		defer t.Stop()
		giveUp = t.C
	}
	w := &waiter{tokens: float64(max(tokens, 0)), wake: make(chan struct{}, 1)}
	l.mu.Lock()
	l.queue = append(l.queue, w)
	for {
		delay := time.Duration(-1) // not first in line: wait to be woken
		if l.queue[0] == w {
			if delay = l.delayLocked(w.tokens, time.Now()); delay <= 0 {
				l.admitLocked(w)
				l.mu.Unlock()
				return nil
			}
		}
		l.mu.Unlock()
		err := w.sleep(ctx, delay, giveUp)
		l.mu.Lock()
		if err != nil {
			if errors.Is(err, errGaveUp) {
				err = &BusyError{For: l.promiseLocked(w, w.tokens, time.Now())}
			}
			l.leaveLocked(w)
			l.mu.Unlock()
			return err
		}
	}
}

// Done reports how an admitted call ended: its estimate, the tokens its
// answer says it used (0: unknown, the estimate stands) and its error. A
// 429 pauses the lane.
func (l *Limiter) Done(estimated, used int, err error) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight = max(0, l.inFlight-1)
	if used > 0 {
		l.toks.give(float64(estimated-used), now) // a refund, or a debt when negative
	}
	if retryAfter, ok := rateLimit(err); ok {
		l.limited++
		l.pauseLocked(now, retryAfter)
	} else if err == nil {
		l.backoffs = 0
	}
	l.wakeFirstLocked()
}

// PausedUntil is when the lane's pause after a 429 ends; the zero time when
// the lane is not paused.
func (l *Limiter) PausedUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !time.Now().Before(l.pausedUntil) {
		return time.Time{}
	}
	return l.pausedUntil
}

// InFlight is how many admitted calls have not reported Done yet.
func (l *Limiter) InFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight
}

// Waiting is how many calls wait in line now.
func (l *Limiter) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}

// RateLimited is how many calls the provider answered with 429, ever.
func (l *Limiter) RateLimited() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limited
}

func (l *Limiter) observe(start time.Time) {
	if l.onWait != nil {
		l.onWait(time.Since(start))
	}
}

// delayLocked is how long the first in line must still wait: the pause,
// then each bucket.
func (l *Limiter) delayLocked(tokens float64, now time.Time) time.Duration {
	return max(l.pausedUntil.Sub(now), l.reqs.wait(1, now), l.toks.wait(tokens, now))
}

// admitLocked lets the first in line go, and tells the next one it is first.
func (l *Limiter) admitLocked(w *waiter) {
	l.reqs.take(1)
	l.toks.take(w.tokens)
	l.inFlight++
	l.leaveLocked(w)
}

// leaveLocked takes w out of the line; if it was first, the next one is.
func (l *Limiter) leaveLocked(w *waiter) {
	i := slices.Index(l.queue, w)
	if i < 0 {
		return
	}
	l.queue = slices.Delete(l.queue, i, i+1)
	if i == 0 {
		l.wakeFirstLocked()
	}
}

// wakeFirstLocked tells the first in line to look at the limits again.
func (l *Limiter) wakeFirstLocked() {
	if len(l.queue) > 0 {
		select {
		case l.queue[0].wake <- struct{}{}:
		default:
		}
	}
}

// pauseLocked pauses the lane after a 429: for its Retry-After, or for the
// next back-off. A 429 without one that arrives while the lane is already
// paused was sent before the pause began: it does not double the back-off.
func (l *Limiter) pauseLocked(now time.Time, retryAfter time.Duration) {
	paused := now.Before(l.pausedUntil)
	d := retryAfter
	if d <= 0 {
		if paused {
			return
		}
		d = jitter(min(BackoffCap, BackoffBase<<min(l.backoffs, 16)))
		l.backoffs++
	}
	until := now.Add(min(d, MaxPause))
	if !until.After(l.pausedUntil) {
		return
	}
	l.pausedUntil = until
	if paused {
		l.log.Debug("provider answered 429 again; pause extended", "paused_until", until, "retry_after", retryAfter)
		return
	}
	l.log.Warn("provider answered 429: every call of the lane waits until the pause ends",
		"paused_until", until, "pause", d.Round(time.Millisecond), "retry_after", retryAfter)
}

// errGaveUp: the caller's own bound (WaitAtMost's most) passed first.
var errGaveUp = errors.New("limiter: gave up waiting")

// sleep waits until w is woken, delay passes (never when delay < 0), ctx
// ends (its error) or giveUp fires (errGaveUp; nil: never).
func (w *waiter) sleep(ctx context.Context, delay time.Duration, giveUp <-chan time.Time) error {
	var timeout <-chan time.Time
	if delay >= 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-giveUp:
		return errGaveUp
	case <-w.wake:
	case <-timeout:
	}
	return nil
}

// jitter spreads a back-off over its upper half, so that lanes paused by
// the same provider do not all come back at once.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// rateLimited is how a provider error says the provider refused the call
// for its rate limit (HTTP 429), and for how long: *provider.CallError
// implements it.
type rateLimited interface {
	RateLimited() (retryAfter time.Duration, ok bool)
}

// rateLimit reports whether err (or an error it wraps) is a 429, and its
// Retry-After (0: none sent).
func rateLimit(err error) (time.Duration, bool) {
	var rl rateLimited
	if err == nil || !errors.As(err, &rl) {
		return 0, false
	}
	return rl.RateLimited()
}
