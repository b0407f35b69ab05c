package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/inkwell/inkwell"
)

// Long-poll (docs/client.md): GET /v1/jobs/{id}?wait=30s answers as soon
// as the job is done or failed, or when the wait runs out (then with the
// job as it is, 200 all the same). The handler waits on the jobwait hub,
// woken after the commit that ends the job; it never polls the database.

// MaxWait caps ?wait=: a longer wait is cut to it (the client asks again).
const MaxWait = 60 * time.Second

// waitWriteMargin is how long past its wait a long-poll may take to write
// its answer: the server's WriteTimeout is pushed back by wait plus this.
const waitWriteMargin = 30 * time.Second

// waitParam reads ?wait=: a Go duration ("30s", "1m") or whole seconds
// ("30"); absent or zero: no wait. Negative or unreadable is EINVALID;
// above MaxWait it is cut to MaxWait.
func waitParam(r *http.Request) (time.Duration, error) {
	q := r.URL.Query()
	if !q.Has("wait") {
		return 0, nil
	}
	v := q.Get("wait")
	d, err := time.ParseDuration(v)
	if n, nerr := strconv.Atoi(v); nerr == nil {
		d, err = time.Duration(n)*time.Second, nil
	}
	if err != nil || d < 0 {
		return 0, inkwell.Errorf(inkwell.EINVALID, "wait %q must be a duration such as 30s (at most %s), or whole seconds", v, MaxWait)
	}
	return min(d, MaxWait), nil
}

// ended says whether a job is in an end state a long-poll answers at once.
// A rescheduled job is queued: not ended.
func ended(status string) bool {
	return status == inkwell.StatusDone || status == inkwell.StatusFailed
}

// showWaiting reads job id for its owner, waiting up to wait for it to
// end. It subscribes before each read, so an end committed between the
// read and the wait wakes it; each wake costs one read.
func (s *Server) showWaiting(w http.ResponseWriter, r *http.Request, id int64, wait time.Duration) (inkwell.JobDetail, error) {
	if wait <= 0 {
		return s.showOwned(r.Context(), id)
	}
	// serve's WriteTimeout is shorter than a long wait: push the write
	// deadline past it (the next request on the connection gets the
	// server's own again). The read deadline needs nothing: net/http
	// clears it while the handler runs and watches for a client that
	// hangs up.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + waitWriteMargin))
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		woken, release := s.cfg.Waits.Subscribe(id)
		d, err := s.showOwned(r.Context(), id)
		// Closed: the server has stopped its lane. Stopping: its lane
		// claims nothing more, so only a running job's answer may still come.
		if err != nil || ended(d.Job.Status) || s.cfg.Waits.Closed() ||
			(s.cfg.Waits.Stopping() && d.Job.Status != inkwell.StatusRunning) {
			release()
			return d, err
		}
		select {
		case <-woken:
			release()
		case <-timer.C:
			release()
			// The wait ran out: the job as it is now, read again. A claim
			// wakes no waiter, so the read above may say queued of a job
			// that has been running for most of the wait.
			if now, err := s.showOwned(r.Context(), id); err == nil {
				return now, nil
			}
			return d, nil
		case <-r.Context().Done(): // the client went away: free the waiter
			release()
			return d, r.Context().Err()
		}
	}
}

// showOwned reads job id as its owner may see it: another account's job is
// not found, as a job that does not exist.
func (s *Server) showOwned(ctx context.Context, id int64) (inkwell.JobDetail, error) {
	d, err := s.cfg.Store.Show(ctx, id)
	if err == nil && !ownedBy(principalOf(ctx), d.Job) {
		err = inkwell.Errorf(inkwell.ENOTFOUND, "job %d not found", id)
	}
	return d, err
}
