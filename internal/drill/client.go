package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inkwell/inkwell"
)

// Outcome is what a client knows about one request it sent.
type Outcome string

const (
	// OutcomeOK: the server answered 2xx; the request took effect.
	OutcomeOK Outcome = "ok"
	// OutcomeRefused: certainly not carried out: the server answered with
	// a refusal (which writes nothing), or no connection could be made.
	OutcomeRefused Outcome = "refused"
	// OutcomeUnknown: the connection broke after the request was sent; it
	// may or may not have taken effect.
	OutcomeUnknown Outcome = "unknown"
)

const pathJobs = "/v1/jobs"

// Sent is one request a drill client sent, with what came of it.
type Sent struct {
	Seq     int
	Client  string
	Path    string // pathJobs, or /v1/jobs/{id}/retry
	Key     string // the Idempotency-Key of a POST /v1/jobs
	JobID   int64  // the job the answer named, or the job retried
	Outcome Outcome
	Status  int           // the HTTP status, 0 without an answer
	Detail  string        // why, for refusals and unknowns
	At      time.Duration // when the outcome was known, since the scenario began
	// AfterPrune marks a re-send of a key whose job was pruned; Pruned
	// says the answer's job carried pruned_at.
	AfterPrune, Pruned bool
}

func (s Sent) String() string {
	what := "POST " + s.Path
	if s.Key != "" {
		what += " key=" + s.Key
	}
	res := string(s.Outcome)
	switch {
	case s.Outcome == OutcomeOK && s.JobID != 0:
		res += fmt.Sprintf(" %d job %d", s.Status, s.JobID)
	case s.Status != 0:
		res += fmt.Sprintf(" %d %s", s.Status, s.Detail)
	case s.Detail != "":
		res += " (" + s.Detail + ")"
	}
	if s.AfterPrune {
		what = "re-send after the prune: " + what
		if s.Pruned {
			res += " (pruned)"
		}
	}
	return what + " -> " + res
}

// requestLog records every POST of a scenario, in the order sent.
type requestLog struct {
	start time.Time
	mu    sync.Mutex
	list  []Sent
	gets  atomic.Int64
}

func (l *requestLog) add(s Sent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s.Seq, s.At = len(l.list)+1, time.Since(l.start)
	l.list = append(l.list, s)
}

func (l *requestLog) all() []Sent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Sent(nil), l.list...)
}

// target is the base URL of the serve process the clients talk to: the
// last one started, dead or alive, as a real client keeps its server's
// address while the server restarts.
type target struct{ url atomic.Pointer[string] }

func (t *target) set(u string) { t.url.Store(&u) }

func (t *target) get() string {
	if p := t.url.Load(); p != nil {
		return *p
	}
	return ""
}

// item is one request a client wants done, and what it learned of it.
type item struct {
	key string
	req inkwell.Request
	// model is the model the job names: "" for the short form on the
	// default model (drill), modelClaude for the chat form (models.go).
	model string
	pause time.Duration // think time before it is first sent
	// gate, when not nil, holds the first send until it is closed: the
	// scenario opens it when a later serve is ready (see runSpec.openGate).
	gate   <-chan struct{}
	jobID  int64
	status string // as last read from the server
	text   string
	// cancel says when the client cancels the job (joblife.go); class and
	// waiting are the job's error_class and whether it has a not_before,
	// as last read; cancelAnswer the status of the answer to its cancel
	// (200 or 409; 0 before one came).
	cancel       cancelWhen
	class        string
	waiting      bool
	cancelAnswer int
	// overBudget: the account's budget cannot cover the request, so its
	// accept must be refused 402 budget_exceeded, writing nothing
	// (inflight_budget.go). refused says that answer came: the client has
	// nothing more to do for it. Any other answer the checker judges
	// (InvBudgetRefused); the client goes on as for any request.
	overBudget, refused bool
}

// finished says the client has nothing more to do for the item: its job
// is done, or cancelled as asked, or done with its too-late cancel
// answered.
func (it item) finished() bool {
	if it.refused {
		return true
	}
	switch it.cancel {
	case cancelNever:
		return it.status == inkwell.StatusDone
	case cancelDone:
		return it.status == inkwell.StatusDone && it.cancelAnswer != 0
	}
	// Cancelled as asked, or done: the completion won (the cancel came
	// too late, or the point was never reached; the drill says so).
	return (it.cancelled() && it.cancelAnswer != 0) || it.status == inkwell.StatusDone
}

func (it item) cancelled() bool {
	return it.status == inkwell.StatusFailed && it.class == string(inkwell.ClassCancelled)
}

// wantsCancel says the client should send (or re-send) the item's cancel
// now: its moment has come and no answer came yet.
func (it item) wantsCancel() bool {
	if it.cancelAnswer != 0 || it.jobID == 0 {
		return false
	}
	switch it.cancel {
	case cancelRunning:
		return it.status == inkwell.StatusRunning || it.cancelled()
	case cancelBackoff:
		return (it.status == inkwell.StatusQueued && it.waiting) || it.cancelled()
	case cancelDone:
		return it.status == inkwell.StatusDone
	}
	return false
}

// client behaves as a careful real client: it sends each request with its
// own key, re-sends it while the answer is unknown, then waits for the job,
// retrying it when it failed (when retries are allowed at the moment).
type client struct {
	name  string
	http  *http.Client
	srv   *target
	log   *requestLog
	retry *atomic.Bool
	// holdEach: after each request is answered, wait until its job has
	// left queued (claimed, or already ended) before sending the next. The
	// lane then claims each job alone, one claim per job, so a point's
	// N-th hit is the N-th job's accept or claim (the in-flight family).
	holdEach bool

	mu    sync.Mutex
	items []item
}

// newHTTPClient returns a client that never re-sends on its own. Go's
// transport replays a request carrying an Idempotency-Key when a reused
// keep-alive connection turns out dead; without keep-alives no connection
// is reused, so every send is one the drill decided and recorded.
func newHTTPClient() *http.Client {
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true},
	}
}

// run submits every item in order, then waits until all are done.
func (c *client) run(ctx context.Context) error {
	for i := range c.items {
		if err := c.awaitGate(ctx, i); err != nil {
			return err
		}
		if err := sleep(ctx, c.items[i].pause); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		if err := c.submit(ctx, i); err != nil {
			return err
		}
		if c.holdEach {
			if err := c.awaitClaimed(ctx, i); err != nil {
				return err
			}
		}
	}
	return c.await(ctx)
}

// awaitGate holds item i until its gate opens, reading meanwhile the jobs
// already sent (never retrying them: a retry is for after the sends).
func (c *client) awaitGate(ctx context.Context, i int) error {
	g := c.items[i].gate
	if g == nil {
		return nil
	}
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-g:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%s: waiting to send key %s: %w", c.name, c.items[i].key, context.Cause(ctx))
		case <-tick.C:
			c.pollOnce(ctx, false)
		}
	}
}

// awaitClaimed polls item i's job until it is no longer queued: running
// (claimed), or already failed or done. While serve is down it keeps
// polling, as a client waiting for its server does.
func (c *client) awaitClaimed(ctx context.Context, i int) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		it := c.items[i]
		c.mu.Unlock()
		if it.refused || (it.status != "" && it.status != inkwell.StatusQueued) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: waiting for job %d (key %s) to be claimed: %w", c.name, it.jobID, it.key, context.Cause(ctx))
		case <-tick.C:
		}
		if d, err := c.get(ctx, it.jobID); err == nil {
			c.record(i, d)
		}
	}
}

// submit sends item i until an answer comes: 2xx, or a refusal that a
// re-send cannot change (a refused request writes nothing, so giving up
// then is safe, and is a drill or server bug worth stopping for, unless
// it is the 402 an over-budget item expects).
func (c *client) submit(ctx context.Context, i int) error {
	c.mu.Lock()
	it := c.items[i]
	c.mu.Unlock()
	body := it.body()
	b := backoff{}
	for {
		if base := c.srv.get(); base != "" {
			var d inkwell.JobDetail
			s := c.post(ctx, base, pathJobs, it.key, body, &d)
			if ctx.Err() != nil {
				return fmt.Errorf("%s: submit key %s: %w", c.name, it.key, context.Cause(ctx))
			}
			s.Key = it.key
			if s.Outcome == OutcomeOK {
				s.JobID = d.Job.ID
			}
			c.log.add(s)
			switch {
			case s.Outcome == OutcomeOK:
				c.record(i, d) // a re-send may find the job done already
				return nil
			case s.Outcome == OutcomeRefused && it.overBudget && s.Status == http.StatusPaymentRequired && s.Detail == inkwell.EBUDGET:
				c.mu.Lock()
				c.items[i].refused = true // as expected: nothing was written, nothing to wait for
				c.mu.Unlock()
				return nil
			case s.Outcome == OutcomeRefused && permanent(s.Status):
				return fmt.Errorf("%s: key %s refused for good: %d %s", c.name, it.key, s.Status, s.Detail)
			}
		}
		if err := b.wait(ctx); err != nil {
			return fmt.Errorf("%s: submit key %s: %w", c.name, it.key, err)
		}
	}
}

// await polls every job until all are done, retrying failed ones while
// c.retry allows it.
func (c *client) await(ctx context.Context) error {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if c.pollOnce(ctx, true) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: waiting for jobs %s: %w", c.name, c.pending(), context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// pollOnce reads every job sent and not yet seen done, and retries each
// failed one when mayRetry and c.retry allow it. It reports whether every
// job is done.
func (c *client) pollOnce(ctx context.Context, mayRetry bool) (allDone bool) {
	allDone = true
	for i := range c.items {
		c.mu.Lock()
		it := c.items[i]
		c.mu.Unlock()
		if it.finished() {
			continue
		}
		allDone = false
		if it.jobID == 0 {
			continue // not sent yet
		}
		d, err := c.get(ctx, it.jobID)
		if err != nil {
			continue // server down: keep waiting
		}
		c.record(i, d)
		c.mu.Lock()
		it = c.items[i]
		c.mu.Unlock()
		if it.wantsCancel() && mayRetry {
			c.cancelJob(ctx, i)
			continue
		}
		// A cancelled job stays cancelled: the client asked for it.
		if d.Job.Status == inkwell.StatusFailed && !it.cancelled() && mayRetry && c.retry.Load() {
			c.retryJob(ctx, it.jobID)
		}
	}
	return allDone
}

// record keeps what the server last said about item i.
func (c *client) record(i int, d inkwell.JobDetail) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items[i].jobID, c.items[i].status = d.Job.ID, d.Job.Status
	c.items[i].class, c.items[i].waiting = string(d.Job.ErrorClass), d.Job.NotBefore != nil
	if d.Result != nil {
		c.items[i].text = d.Result.Text
	}
}

func (c *client) retryJob(ctx context.Context, id int64) {
	var out json.RawMessage
	s := c.post(ctx, c.srv.get(), fmt.Sprintf("%s/%d/retry", pathJobs, id), "", nil, &out)
	if ctx.Err() != nil {
		return
	}
	s.JobID = id
	c.log.add(s)
}

// cancelJob sends item i's cancel. 200 (cancelled, or already) and 409
// (done, or failed otherwise: the job says which) are answers; without
// one, it is re-sent at the next poll.
func (c *client) cancelJob(ctx context.Context, i int) {
	c.mu.Lock()
	id := c.items[i].jobID
	c.mu.Unlock()
	var d inkwell.JobDetail
	s := c.post(ctx, c.srv.get(), fmt.Sprintf("%s/%d/cancel", pathJobs, id), "", nil, &d)
	if ctx.Err() != nil {
		return
	}
	s.JobID = id
	c.log.add(s)
	switch {
	case s.Outcome == OutcomeOK:
		c.record(i, d)
	case s.Status == http.StatusConflict:
	default:
		return
	}
	c.mu.Lock()
	c.items[i].cancelAnswer = s.Status
	c.mu.Unlock()
}

// statuses returns the last status read for each item ("" before its
// first answer).
func (c *client) statuses() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.items))
	for i, it := range c.items {
		out[i] = it.status
	}
	return out
}

func (c *client) pending() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var p []string
	for _, it := range c.items {
		if !it.finished() {
			p = append(p, fmt.Sprintf("%d(%s)", it.jobID, orNone(it.status)))
		}
	}
	return strings.Join(p, " ")
}

// post sends one POST and classifies its outcome; out is filled on 2xx.
func (c *client) post(ctx context.Context, base, path, key string, body []byte, out any) Sent {
	s := Sent{Client: c.name, Path: path}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		s.Outcome, s.Detail = OutcomeRefused, err.Error()
		return s
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := c.http.Do(req)
	if err != nil {
		s.Outcome, s.Detail = classify(err)
		return s
	}
	defer res.Body.Close()
	s.Status = res.StatusCode
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		s.Outcome, s.Detail = OutcomeUnknown, "answer cut short: "+err.Error()
		return s
	}
	if res.StatusCode/100 != 2 {
		var e struct{ Error inkwell.Error }
		_ = json.Unmarshal(raw, &e)
		s.Outcome, s.Detail = OutcomeRefused, e.Error.Code
		return s
	}
	if err := json.Unmarshal(raw, out); err != nil {
		s.Outcome, s.Detail = OutcomeUnknown, "answer unreadable: "+err.Error()
		return s
	}
	s.Outcome = OutcomeOK
	return s
}

func (c *client) get(ctx context.Context, id int64) (inkwell.JobDetail, error) {
	c.log.gets.Add(1)
	var d inkwell.JobDetail
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s%s/%d", c.srv.get(), pathJobs, id), nil)
	if err != nil {
		return d, err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return d, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return d, fmt.Errorf("GET job %d: %s", id, res.Status)
	}
	return d, json.NewDecoder(res.Body).Decode(&d)
}

// classify names the outcome of a request that got no answer. A failed
// dial never reached the server: refused. Anything else broke after the
// request may have arrived: unknown.
func classify(err error) (Outcome, string) {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return OutcomeRefused, "connection refused: not delivered"
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	return OutcomeUnknown, "connection broke: " + msg
}

// permanent reports whether a refusal will be the same on every re-send:
// a 4xx other than 429. A 5xx (database busy) is worth re-sending.
func permanent(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusTooManyRequests
}

// backoff waits 10ms, then longer, up to 200ms, between re-sends.
type backoff struct{ d time.Duration }

func (b *backoff) wait(ctx context.Context) error {
	b.d = min(max(b.d*2, 10*time.Millisecond), 200*time.Millisecond)
	return sleep(ctx, b.d)
}

// sleep is the client's think time: a timer that ctx cuts short.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return context.Cause(ctx)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

func orNone(s string) string {
	if s == "" {
		return "unanswered"
	}
	return s
}
