package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpproxy"

	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/inkwell/inkwell/internal/store"
)

// Outcomes of one send, as the Observer hears them.
const (
	OutcomeDelivered = "delivered" // a 2xx, recorded
	OutcomeFailed    = "failed"    // no 2xx; tried again later
	OutcomeGaveUp    = "gave_up"   // no 2xx on the last attempt allowed
)

// Observer hears each send's outcome and duration (the api's Metrics
// implements it). Nil hears nothing.
type Observer interface {
	WebhookSent(outcome string, seconds float64)
}

// Config tunes a Sender. The zero value is the production default.
type Config struct {
	// Timeout bounds one send, from connect to the end of the answer's
	// headers and the first bytes of its body (default 15s; Standard
	// Webhooks suggests 15 to 30).
	Timeout time.Duration
	// RetryBase and RetryCap shape the back-off after a failed send n:
	// RetryBase·2^(n-1), at most RetryCap, the upper half random
	// (defaults 5s and 1h). A Retry-After from the receiver wins, up to
	// RetryCap.
	RetryBase, RetryCap time.Duration
	// MaxAttempts ends the retries: the delivery is given up after this
	// many failed sends (default 30, about a day at the defaults).
	// 'inkwell webhooks replay' sends a given-up delivery again.
	MaxAttempts int
	// Concurrency is how many deliveries are sent at once (default 4).
	Concurrency int
	// Poll is how often an idle sender looks for due deliveries (default 1s).
	Poll     time.Duration
	Logger   *slog.Logger
	Observer Observer
	// Jitter returns a number in [0, 1); nil uses math/rand/v2.
	Jitter func() float64
	// Transport carries the requests; nil: a clone of
	// http.DefaultTransport that honours HTTPS_PROXY (e.g. an SSRF
	// filtering proxy) for every host, loopback ones included
	// (proxyFromEnvironment). Redirects are never followed.
	Transport http.RoundTripper
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = 15 * time.Second
	}
	if c.RetryBase <= 0 {
		c.RetryBase = 5 * time.Second
	}
	if c.RetryCap <= 0 {
		c.RetryCap = time.Hour
	}
	c.RetryCap = max(c.RetryCap, c.RetryBase)
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 30
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Jitter == nil {
		c.Jitter = rand.Float64
	}
	if c.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = proxyFromEnvironment(httpproxy.FromEnvironment())
		c.Transport = t
	}
	return c
}

// Sender sends due webhook deliveries (see the package comment).
type Sender struct {
	st     *store.Store
	cfg    Config
	client *http.Client
	wake   chan struct{}

	mu   sync.Mutex
	inst string // the installation id, read once
}

// New makes a Sender over st.
func New(st *store.Store, cfg Config) *Sender {
	cfg = cfg.withDefaults()
	return &Sender{
		st:  st,
		cfg: cfg,
		client: &http.Client{
			Transport: cfg.Transport,
			Timeout:   cfg.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse // a 3xx is a failure: update the URL instead
			},
		},
		wake: make(chan struct{}, 1),
	}
}

// Wake makes an idle sender look for due deliveries now.
func (s *Sender) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// lease is how long a claimed delivery is ours: the send's time-out and a
// margin for recording its outcome. After it, another sender (or this one
// restarted after a crash) may claim it again; a late outcome of the first
// is then fenced out (failure) or harmless (delivered).
func (s *Sender) lease() time.Duration { return s.cfg.Timeout + 5*time.Second }

// Run sends due deliveries until ctx ends, up to Concurrency at once: a
// pool of send slots, each claimed afresh as it frees, so that a send to
// a receiver that hangs until the time-out holds its own slot only and
// a delivery that comes due meanwhile goes out on a free one. A database
// error is logged and tried again at the next poll. When ctx ends, Run
// waits for the sends in flight (each is cut short and recorded) and
// returns nil.
func (s *Sender) Run(ctx context.Context) error {
	log := s.cfg.Logger
	t := time.NewTimer(0)
	defer t.Stop()
	freed := make(chan struct{}, s.cfg.Concurrency)
	var sends sync.WaitGroup
	defer sends.Wait()
	busy := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.wake:
		case <-freed:
			busy--
		}
		for drained := false; !drained; { // every slot freed so far
			select {
			case <-freed:
				busy--
			default:
				drained = true
			}
		}
		if busy == s.cfg.Concurrency {
			continue // a slot's end wakes the loop
		}
		free := s.cfg.Concurrency - busy
		n, err := s.start(ctx, free, &sends, freed)
		busy += n
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			log.Warn("webhooks: claim failed; trying again", "err", err, "in", s.cfg.Poll.String())
		}
		// Fewer due than slots free, or every slot taken (a freed one claims
		// again at once): look again at the next poll, or when woken.
		resetTimer(t, s.cfg.Poll)
	}
}

// start claims up to free due deliveries and sends each in its own
// goroutine, which signals freed when its outcome is recorded. It returns
// how many it claimed.
func (s *Sender) start(ctx context.Context, free int, sends *sync.WaitGroup, freed chan<- struct{}) (int, error) {
	inst, err := s.installation(ctx)
	if err != nil {
		return 0, err
	}
	claims, err := s.st.ClaimWebhooks(ctx, free, s.lease())
	if err != nil {
		return 0, err
	}
	for _, c := range claims {
		sends.Go(func() {
			defer func() { freed <- struct{}{} }()
			s.send(ctx, inst, c)
		})
	}
	return len(claims), nil
}

func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	select {
	case <-t.C:
	default:
	}
	t.Reset(d)
}

// SendDue claims up to Concurrency due deliveries, sends them at once,
// records each outcome, and returns how many it claimed.
func (s *Sender) SendDue(ctx context.Context) (int, error) {
	inst, err := s.installation(ctx)
	if err != nil {
		return 0, err
	}
	claims, err := s.st.ClaimWebhooks(ctx, s.cfg.Concurrency, s.lease())
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, c := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.send(ctx, inst, c)
		}()
	}
	wg.Wait()
	return len(claims), nil
}

func (s *Sender) installation(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inst == "" {
		in, err := s.st.Installation(ctx)
		if err != nil {
			return "", fmt.Errorf("webhooks: read the installation id: %w", err)
		}
		s.inst = in.ID
	}
	return s.inst, nil
}

// send posts one claimed delivery and records what happened.
func (s *Sender) send(ctx context.Context, inst string, c store.WebhookSend) {
	log := s.cfg.Logger.With("delivery_id", c.ID, "job_id", c.JobID, "account", c.Account, "attempt", c.Attempts)
	start := time.Now()
	status, retryAfter, err := s.post(ctx, inst, c)
	// The outcome is recorded even when ctx ended during the send (a
	// graceful stop): without it the row would wait for its lease.
	rec, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err == nil {
		crashpoint.Hit(crashpoint.WebhookAfterSend)
		if err := s.st.WebhookDelivered(rec, c.ID, status); err != nil {
			// Sent but not recorded: the lease ends and it is sent again
			// (at least once, same webhook-id).
			log.Warn("webhooks: delivered, but recording it failed; it will be sent again", "err", err)
		}
		s.observe(OutcomeDelivered, start)
		log.Debug("webhook delivered", "status", status)
		return
	}
	p := store.WebhookFailParams{ID: c.ID, Attempts: c.Attempts, Status: status, Error: err.Error()}
	outcome := OutcomeFailed
	if c.Attempts >= s.cfg.MaxAttempts {
		p.GiveUp, outcome = true, OutcomeGaveUp
		p.NextAt = s.st.Now()
		p.Error = fmt.Sprintf("gave up after %d attempts: %s", c.Attempts, p.Error)
	} else {
		p.NextAt = s.st.Now().Add(s.backoff(c.Attempts, retryAfter))
	}
	// No answer, 429 or 5xx: the receiver is down or refuses for now, and
	// the account's other due deliveries would each spend a slot (up to a
	// time-out) learning it again: they wait with this one.
	p.ReceiverDown = status == 0 || status == http.StatusTooManyRequests || status >= 500
	p.URL = c.URL
	if ctx.Err() != nil && status == 0 { // cut short by a stop: try again at the next start
		p.NextAt, p.GiveUp, p.ReceiverDown, outcome = s.st.Now(), false, false, OutcomeFailed
		p.Error = "send cut short: the sender stopped"
	}
	held, rerr := s.st.WebhookFailed(rec, p)
	if rerr != nil {
		log.Warn("webhooks: recording a failed send failed; the lease will end and it is sent again", "err", rerr)
	}
	s.observe(outcome, start)
	log.Info("webhook not delivered", "outcome", outcome, "status", status, "err", p.Error, "next_attempt_at", p.NextAt.UTC().Format(time.RFC3339))
	if held > 0 {
		log.Info("webhooks: the account's receiver is down; its other due deliveries wait with this one", "held", held,
			"next_attempt_at", p.NextAt.UTC().Format(time.RFC3339))
	}
}

func (s *Sender) observe(outcome string, start time.Time) {
	if s.cfg.Observer != nil {
		s.cfg.Observer.WebhookSent(outcome, time.Since(start).Seconds())
	}
}

// post sends the signed request. It returns the answer's status (0 when
// there was none), its Retry-After, and an error unless it was a 2xx.
func (s *Sender) post(ctx context.Context, inst string, c store.WebhookSend) (int, time.Duration, error) {
	body, err := Body(c.WebhookDelivery)
	if err != nil {
		return 0, 0, fmt.Errorf("build the body: %w", err)
	}
	msgID := c.MessageID(inst)
	ts := time.Now().Unix() // the attempt's time, by the real clock the receiver compares with
	sig, err := Sign(c.Secret, msgID, ts, body)
	if err != nil {
		return 0, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return 0, 0, fmt.Errorf("webhook URL: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Inkwell-Webhooks/1")
	req.Header.Set(HeaderID, msgID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, sig)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, 0, sendError(err, s.cfg.Timeout)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return resp.StatusCode, 0, nil
	}
	msg := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if loc := resp.Header.Get("Location"); resp.StatusCode >= 300 && resp.StatusCode <= 399 && loc != "" {
		msg += fmt.Sprintf(" (redirect to %s, not followed: set that URL instead)", clip(loc, 200))
	}
	if t := clip(strings.TrimSpace(string(snippet)), 200); t != "" {
		msg += ": " + t
	}
	return resp.StatusCode, retryAfter(resp.Header.Get("Retry-After")), errors.New(msg)
}

// sendError says in words why no answer came.
func sendError(err error, timeout time.Duration) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Errorf("no answer within %s", timeout)
		}
		err = ue.Err
	}
	return fmt.Errorf("no answer: %v", err)
}

// retryAfter reads a Retry-After of seconds or an HTTP date (0: none).
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, time.Until(t))
	}
	return 0
}

// backoff is the wait after failed send n: RetryBase·2^(n-1), at most
// RetryCap, of which the upper half is random; a Retry-After wins, up to
// RetryCap.
func (s *Sender) backoff(n int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, s.cfg.RetryCap)
	}
	step := s.cfg.RetryCap
	if n-1 < 40 {
		step = min(s.cfg.RetryCap, s.cfg.RetryBase<<(n-1))
	}
	if step <= 0 { // overflow
		step = s.cfg.RetryCap
	}
	return step/2 + time.Duration(s.cfg.Jitter()*float64(step/2))
}

// clip cuts s to at most n bytes on a rune boundary and keeps it printable.
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
