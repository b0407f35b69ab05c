package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
)

// Client calls one Inkwell server. It is safe for concurrent use.
type Client struct {
	base           string
	hc             *http.Client
	token          string
	tries          int
	maxDelay       time.Duration
	requestTimeout time.Duration
	pollWait       time.Duration
	onRetry        func(RetryEvent)
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends an API token (ink_…) as "Authorization: Bearer".
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc instead of a client of its own. Leave its Timeout
// zero: each call sets its own deadline (long-polls are long).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithTries bounds how many times one call is sent in all, the first send
// included (default 6; 1: never re-send).
func WithTries(n int) Option { return func(c *Client) { c.tries = max(1, n) } }

// WithMaxDelay bounds each pause before a re-send, a server's Retry-After
// included (default 30s).
func WithMaxDelay(d time.Duration) Option { return func(c *Client) { c.maxDelay = d } }

// WithRequestTimeout bounds one send of a call other than a long-poll
// (default 30s). A send that runs out is a network error: its outcome is
// unknown, and Submit re-sends it under the same key.
func WithRequestTimeout(d time.Duration) Option { return func(c *Client) { c.requestTimeout = d } }

// WithPollWait is the wait Wait asks the server for in each long-poll
// (default 30s; the server cuts anything above 60s; at least 100ms).
func WithPollWait(d time.Duration) Option {
	return func(c *Client) { c.pollWait = max(d, 100*time.Millisecond) }
}

// WithOnRetry calls fn before each pause and re-send (to log it).
func WithOnRetry(fn func(RetryEvent)) Option { return func(c *Client) { c.onRetry = fn } }

// RetryEvent is one re-send about to happen: after try number Try failed
// with Err, the client pauses Delay and sends again.
type RetryEvent struct {
	Try   int
	Err   error
	Delay time.Duration
}

// New returns a client of the server at baseURL (e.g.
// "http://127.0.0.1:8080").
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: &http.Client{}, tries: 6, maxDelay: 30 * time.Second,
		requestTimeout: 30 * time.Second, pollWait: 30 * time.Second}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Submission is the answer to a submit: the job, whether this send made
// it, and the key it was sent under.
type Submission struct {
	inkwell.JobDetail
	// Created: 201, this send made the job; false: 200, the key already
	// had this job (an earlier send got through), whatever its status.
	Created bool
	// Key is the idempotency key, set even when Submit fails: re-send
	// with SubmitKey(ctx, Key, req) when OutcomeUnknown(err).
	Key string
}

// Submit sends req under a new idempotency key (NewKey). See SubmitKey.
func (c *Client) Submit(ctx context.Context, req inkwell.Request) (Submission, error) {
	return c.SubmitKey(ctx, NewKey(), req)
}

// SubmitKey sends req under key: POST /v1/jobs. A network error, 429 or
// 503 is re-sent under the same key after a pause (the server's
// Retry-After, else a growing back-off with jitter), up to the client's
// tries and within ctx; the server answers a re-send with the job the
// first send made. A refusal is an *Error: invalid (400: the message names
// the field), key_reused (422: key already used for another body),
// too_many (429 after the last try), …
func (c *Client) SubmitKey(ctx context.Context, key string, req inkwell.Request) (Submission, error) {
	sub := Submission{Key: key}
	body, err := json.Marshal(req)
	if err != nil {
		return sub, fmt.Errorf("submit: %w", err)
	}
	status, b, err := c.call(ctx, call{method: http.MethodPost, path: "/v1/jobs", body: body, key: key, resendOnNetErr: true})
	if err != nil {
		return sub, fmt.Errorf("submit (key %s): %w", key, err)
	}
	sub.Created = status == http.StatusCreated
	return sub, decode(b, &sub.JobDetail)
}

// Get reads a job with its attempts, result and charge.
func (c *Client) Get(ctx context.Context, id int64) (inkwell.JobDetail, error) {
	var d inkwell.JobDetail
	_, b, err := c.call(ctx, call{method: http.MethodGet, path: jobPath(id, ""), resendOnNetErr: true})
	if err != nil {
		return d, fmt.Errorf("get job %d: %w", id, err)
	}
	return d, decode(b, &d)
}

// Retry moves a failed job back to queued (POST /v1/jobs/{id}/retry). A
// job that is not failed is a conflict (409). It is re-sent on 429 and
// 503 (nothing was done), not after a network error: the retry may have
// landed, and Get tells.
func (c *Client) Retry(ctx context.Context, id int64) (inkwell.Job, error) {
	var out struct{ Job inkwell.Job }
	_, b, err := c.call(ctx, call{method: http.MethodPost, path: jobPath(id, "/retry")})
	if err != nil {
		return out.Job, fmt.Errorf("retry job %d: %w", id, err)
	}
	return out.Job, decode(b, &out)
}

// Cancel cancels a queued or running job (POST /v1/jobs/{id}/cancel):
// it ends failed, class cancelled. A cancel is safe to re-send (a job
// already cancelled is answered as it is), so it is re-sent after network
// errors too. When a completion won (409, conflict) the returned detail
// is the job as it is now, beside the *Error.
func (c *Client) Cancel(ctx context.Context, id int64) (inkwell.JobDetail, error) {
	var d inkwell.JobDetail
	status, b, err := c.call(ctx, call{method: http.MethodPost, path: jobPath(id, "/cancel"), resendOnNetErr: true})
	if err != nil && status != http.StatusConflict {
		return d, fmt.Errorf("cancel job %d: %w", id, err)
	}
	if derr := decode(b, &d); derr != nil && err == nil {
		err = derr
	}
	if err != nil {
		err = fmt.Errorf("cancel job %d: %w", id, err)
	}
	return d, err
}

// NewKey returns a new random idempotency key.
func NewKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "ik-" + hex.EncodeToString(b)
}

// call is one API call and how it may be re-sent.
type call struct {
	method, path string
	body         []byte
	key          string
	// resendOnNetErr: sending it twice does no harm (a keyed submit, a
	// read, a cancel), so a network error is re-sent too.
	resendOnNetErr bool
	timeout        time.Duration // one send's bound (0: the client's)
}

// call sends cl until it gets an answer that is not a reason to re-send,
// the tries run out or ctx ends. It returns the last answer's status and
// body; any answer but 2xx is an *Error.
func (c *Client) call(ctx context.Context, cl call) (int, []byte, error) {
	for try := 1; ; try++ {
		status, b, err := c.send(ctx, cl)
		delay, again := c.resendAfter(ctx, cl, err, try)
		if !again {
			return status, b, err
		}
		if c.onRetry != nil {
			c.onRetry(RetryEvent{Try: try, Err: err, Delay: delay})
		}
		if serr := sleep(ctx, delay); serr != nil {
			return status, b, fmt.Errorf("%w (gave up: %w)", err, serr)
		}
	}
}

// resendAfter decides whether a send that failed with err is sent again,
// and after what pause.
func (c *Client) resendAfter(ctx context.Context, cl call, err error, try int) (time.Duration, bool) {
	if err == nil || try >= c.tries || ctx.Err() != nil {
		return 0, false
	}
	var e *Error
	switch {
	case errors.As(err, &e) && resendable(e.Status):
		if e.RetryAfter > 0 {
			return min(e.RetryAfter, c.maxDelay), true
		}
		return c.backoff(try), true
	case e == nil && cl.resendOnNetErr:
		return c.backoff(try), true
	}
	return 0, false
}

// backoff is the pause after try: 200 ms doubled per try, at most
// maxDelay, the upper half of it at random (so clients refused together do
// not come back together).
func (c *Client) backoff(try int) time.Duration {
	d := min(c.maxDelay, 200*time.Millisecond<<min(try-1, 16))
	return d/2 + mathrand.N(d/2+1)
}

// send sends cl once.
func (c *Client) send(ctx context.Context, cl call) (int, []byte, error) {
	timeout := cl.timeout
	if timeout == 0 {
		timeout = c.requestTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, cl.method, c.base+cl.path, bytes.NewReader(cl.body))
	if err != nil {
		return 0, nil, err
	}
	if cl.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cl.key != "" {
		req.Header.Set("Idempotency-Key", cl.key)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("read the answer (%s): %w", resp.Status, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp.StatusCode, b, nil
	}
	return resp.StatusCode, b, refusal(resp, b)
}

// refusal reads a non-2xx answer into an *Error.
func refusal(resp *http.Response, b []byte) *Error {
	e := &Error{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header, time.Now())}
	var body struct {
		Error *struct{ Code, Message string }
	}
	if json.Unmarshal(b, &body) == nil && body.Error != nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
		return e
	}
	e.Message = strings.TrimSpace(string(b[:min(len(b), 200)]))
	return e
}

func decode(b []byte, out any) error {
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	return nil
}

func jobPath(id int64, suffix string) string { return fmt.Sprintf("/v1/jobs/%d%s", id, suffix) }

// sleep pauses d or until ctx ends (then its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
