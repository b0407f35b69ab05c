package limiter

import (
	"sync"
	"time"
)

// Window is admission's per-account request limit (an account's rpm,
// docs/design.md §10): at most rpm new requests in any sliding minute, per key.
// It remembers the time of each request taken in the last minute (a list
// of at most rpm times per key), so a refusal can say exactly when the
// next one fits. A request that turns out not to create anything (a
// re-send, a refusal further on) is given back with GiveBack.
//
// It lives in one process: each `inkwell serve` counts the requests it
// receives itself, so N servers behind a balancer admit up to N times rpm.
// It is safe for concurrent use; the zero value is not: use NewWindow.
type Window struct {
	mu   sync.Mutex
	keys map[string]*recent
}

// recent is one key's request times within the last minute, oldest first.
type recent struct {
	times []time.Time
}

// NewWindow returns an empty per-key window.
func NewWindow() *Window { return &Window{keys: make(map[string]*recent)} }

// Take admits one request of key under rpm (0 or less: unlimited, nothing
// remembered). It returns the request's ticket (give it to GiveBack when
// the request created nothing) or, when rpm requests were taken in the
// last minute, ok false and how long until the oldest of them leaves it.
func (w *Window) Take(key string, rpm int) (ticket time.Time, retryAfter time.Duration, ok bool) {
	if rpm <= 0 {
		return time.Time{}, 0, true
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.keys[key]
	if r == nil {
		r = &recent{}
		w.keys[key] = r
	}
	r.expire(now)
	if len(r.times) >= rpm {
		return time.Time{}, r.times[len(r.times)-rpm].Add(time.Minute).Sub(now), false
	}
	r.times = append(r.times, now)
	return now, 0, true
}

// GiveBack returns a request Take admitted: it no longer counts.
func (w *Window) GiveBack(key string, ticket time.Time) {
	if ticket.IsZero() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.keys[key]
	if r == nil {
		return
	}
	for i := len(r.times) - 1; i >= 0; i-- {
		if r.times[i].Equal(ticket) {
			r.times = append(r.times[:i], r.times[i+1:]...)
			break
		}
	}
	if len(r.times) == 0 {
		delete(w.keys, key)
	}
}

// expire drops the times older than a minute.
func (r *recent) expire(now time.Time) {
	cut := now.Add(-time.Minute)
	i := 0
	for i < len(r.times) && !r.times[i].After(cut) {
		i++
	}
	if i > 0 {
		r.times = append(r.times[:0], r.times[i:]...)
	}
}
