// Package jobwait owns the in-process wait for a job's end: the Hub that
// long-polls (GET /v1/jobs/{id}?wait=30s) wait on, keyed by job id, and
// that every path which ends a job wakes after its commit: the worker
// lane's completion and failure and the API's cancel in this process, and
// the store's watch of other processes' ends (store.WatchEnded).
//
// A wake says "this job may have ended": the waiter reads the job again
// and decides. A spurious wake costs one read; a missed one costs a wait
// that runs out, never a wrong answer. It imports nothing of Inkwell's.
package jobwait

import (
	"sync"
	"sync/atomic"
)

// Hub wakes the waiters of a job. The zero value is not usable; use New.
type Hub struct {
	mu       sync.Mutex
	waits    map[int64]*wait
	stopping bool // Stop: the lane claims nothing more
	closed   bool
	waiters  atomic.Int64 // subscribed, not yet released
}

// wait is one job's waiters: ch is closed to wake them all; n counts
// those still subscribed, so the entry goes when the last one leaves.
type wait struct {
	ch chan struct{}
	n  int
}

// New returns an empty Hub.
func New() *Hub { return &Hub{waits: make(map[int64]*wait)} }

// Subscribe registers a waiter for job id. The channel is closed when the
// job may have ended (Wake, WakeAll) or the hub closes. The waiter must
// call release once it stops waiting (woken or not), which frees the entry
// when it was the last: a client that disconnects leaves nothing behind.
// Subscribe before reading the job, so an end committed between the read
// and the wait is not missed.
func (h *Hub) Subscribe(id int64) (woken <-chan struct{}, release func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		ch := make(chan struct{})
		close(ch)
		return ch, func() {}
	}
	w := h.waits[id]
	if w == nil {
		w = &wait{ch: make(chan struct{})}
		h.waits[id] = w
	}
	w.n++
	h.waiters.Add(1)
	var once sync.Once
	return w.ch, func() { once.Do(func() { h.release(id, w) }) }
}

func (h *Hub) release(id int64, w *wait) {
	h.waiters.Add(-1)
	h.mu.Lock()
	defer h.mu.Unlock()
	w.n--
	if w.n == 0 && h.waits[id] == w {
		delete(h.waits, id)
	}
}

// Wake wakes every waiter of each id (ids nobody waits for cost a map
// look-up). Call it after the commit that ended the jobs.
func (h *Hub) Wake(ids ...int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		if w := h.waits[id]; w != nil {
			close(w.ch)
			delete(h.waits, id)
		}
	}
}

// WakeAll wakes every waiter: for an end whose jobs are not named (a
// recovery run), and after a watch that may have missed ends reconnects.
func (h *Hub) WakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wakeAll()
}

func (h *Hub) wakeAll() {
	for id, w := range h.waits {
		close(w.ch)
		delete(h.waits, id)
	}
}

// Stop wakes every waiter and says the server is stopping (Stopping): its
// lane claims nothing more, so a waiter on a job not yet running answers
// now, while one whose job runs may wait on for the answer its call is
// still allowed to bring (the grace period). Close comes after.
func (h *Hub) Stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopping = true
	h.wakeAll()
}

// Stopping reports whether Stop (or Close) was called.
func (h *Hub) Stopping() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stopping || h.closed
}

// Close wakes every waiter and makes later Subscribes wake at once: a
// server shutting down answers its long-polls with the job as it is.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	h.wakeAll()
}

// Closed reports whether Close was called: a woken waiter then answers
// with what it has instead of waiting again.
func (h *Hub) Closed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// IDs returns the ids with at least one waiter, in no order: the store's
// SQLite watch reads only these jobs when the database changed.
func (h *Hub) IDs() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]int64, 0, len(h.waits))
	for id := range h.waits {
		ids = append(ids, id)
	}
	return ids
}

// Len is the number of jobs with at least one waiter.
func (h *Hub) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waits)
}

// Waiters is the number of waiters subscribed now (a job may have many):
// serve's gauge inkwell_long_polls_waiting.
func (h *Hub) Waiters() int64 { return h.waiters.Load() }
