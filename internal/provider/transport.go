package provider

// One Generate is at most one HTTP request on the wire: sendOnce keeps the
// transport from sending it again, noRedirects from following a redirect,
// and callTrace counts and logs a resend all the same. Why each is needed:
// docs/architecture.md, "One HTTP request per paid call".

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/inkwell/inkwell"
)

// sendOnce gives r its body and makes it not replayable: with a body and
// no GetBody, net/http never sends it a second time after it may have been
// written. The body lets go of its bytes once they are read or it is
// closed, so a call waiting for its answer no longer holds the request it
// sent (net/http keeps the request, and so its body, until the answer).
func sendOnce(r *http.Request, body []byte) {
	r.Body = &sentBody{b: body}
	r.ContentLength = int64(len(body))
	r.GetBody = nil
}

// sentBody is a request body read once, that drops its bytes at the end.
// net/http may close it from another goroutine than the one reading it.
//
// A close before any read keeps the bytes: the HTTP/2 transport closes the
// body of a request it never wrote (a connection that became unusable
// before the stream opened) and then sends the same request on another
// connection, which must read the whole body.
type sentBody struct {
	mu   sync.Mutex
	b    []byte
	read bool // a read began: a close may drop what is left
}

func (s *sentBody) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.b) == 0 {
		s.b = nil
		return 0, io.EOF
	}
	s.read = true
	n := copy(p, s.b)
	s.b = s.b[n:]
	if len(s.b) == 0 {
		s.b = nil // read: the answer may be minutes away
	}
	return n, nil
}

func (s *sentBody) Close() error {
	s.mu.Lock()
	if s.read {
		s.b = nil
	}
	s.mu.Unlock()
	return nil
}

// noRedirects returns a copy of c (a new client when nil) whose redirects
// are answers: a paid call is never sent to a second address.
func noRedirects(c *http.Client) *http.Client {
	var cp http.Client
	if c != nil {
		cp = *c
	}
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// endpointURL is the call URL of a provider whose base URL is raw (with or
// without /v1) and whose API path below the base is path.
func endpointURL(raw, path string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", inkwell.Errorf(inkwell.EINVALID, "provider url %q: want http(s)://host[:port][/v1]", raw)
	}
	u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v1") + path
	return u.String(), nil
}

// fillCallDefaults fills the settings every HTTP provider shares when unset:
// the call timeout, the logger and the clock.
func fillCallDefaults(timeout *time.Duration, logger **slog.Logger, now *func() time.Time) {
	if *timeout <= 0 {
		*timeout = DefaultTimeout
	}
	if *logger == nil {
		*logger = slog.Default()
	}
	if *now == nil {
		*now = time.Now
	}
}

// send makes a call's one HTTP request and reads its answer, at most a byte
// past maxAnswerBytes besides a UTF-8 byte order mark before it, which is
// dropped and does not count (RFC 8259 §8.1 lets a reader ignore one;
// a proxy or a Windows-hosted gateway may add it); a failure of either is
// a reachedError. A 2xx answer whose body arrived whole, as complete JSON,
// is kept even when the connection then failed before the message's own
// end (a proxy that closes without the last chunk of a chunked body): it
// is a paid answer in hand. A JSON value cut short is never valid JSON, so
// a partial answer is still a failure.
func send(ctx context.Context, client *http.Client, req *http.Request, trace *callTrace, scrub func(string) string) (*http.Response, []byte, error) {
	res, err := client.Do(req)
	if err != nil {
		return nil, nil, reachedError(ctx, err, trace, scrub)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxAnswerBytes+1+int64(len(byteOrderMark))))
	body = bytes.TrimPrefix(body, byteOrderMark) // the mark does not count toward the limit
	if err != nil && !(res.StatusCode >= 200 && res.StatusCode <= 299 && len(body) <= maxAnswerBytes && json.Valid(body)) {
		return nil, nil, reachedError(ctx, err, trace, scrub)
	}
	return res, body, nil
}

// byteOrderMark is UTF-8's: EF BB BF.
var byteOrderMark = []byte("\ufeff")

// callTrace is what the transport reported about one Generate. Its hooks
// may run on the transport's goroutines (HTTP/1 reports WroteRequest from
// its write loop), hence the mutex.
type callTrace struct {
	mu       sync.Mutex
	conns    int   // connections obtained for this call
	wrote    bool  // some connection reported the request written, or failing to be
	writeErr error // the last write's error, nil when it was written in full
}

// connected reports whether the request got as far as a connection, so
// that the provider may have received it.
func (c *callTrace) connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conns > 0
}

// resendSink is where a provider reports a resend of one of its calls:
// its logger, its OnResend, and its scrub (the API key never reaches a log).
type resendSink struct {
	logger   *slog.Logger
	onResend func()
	scrub    func(string) string
}

// trace is traceCall with the OpenAI provider's sink.
func (p *OpenAI) trace(ctx context.Context, providerKey string) (context.Context, *callTrace) {
	return traceCall(ctx, providerKey, resendSink{logger: p.cfg.Logger, onResend: p.cfg.OnResend, scrub: p.scrub})
}

// traceCall returns ctx with hooks that count the connections of one call
// and report each one after the first to sink: a warning with the job's
// provider key (never the API key), and OnResend. The count is
// conservative: an HTTP/2 retry on a connection found unusable before
// anything was written counts too, and its warning says
// written_before=false.
func traceCall(ctx context.Context, providerKey string, sink resendSink) (context.Context, *callTrace) {
	ct := &callTrace{}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			ct.mu.Lock()
			ct.conns++
			n, wrote, writeErr := ct.conns, ct.wrote, ct.writeErr
			ct.mu.Unlock()
			if n > 1 {
				sink.resent(ctx, providerKey, n, info, wrote, writeErr)
			}
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			ct.mu.Lock()
			ct.wrote, ct.writeErr = true, info.Err
			ct.mu.Unlock()
		},
	}), ct
}

// resent reports the n-th connection of one call.
func (s resendSink) resent(ctx context.Context, providerKey string, n int, info httptrace.GotConnInfo, wrote bool, writeErr error) {
	attrs := []slog.Attr{
		slog.String("provider_key", providerKey),
		slog.Int("connection", n),
		slog.Bool("reused", info.Reused),
		slog.Bool("written_before", wrote),
	}
	if writeErr != nil {
		attrs = append(attrs, slog.String("write_err", oneLine(s.scrub(writeErr.Error()))))
	}
	if info.Conn != nil {
		attrs = append(attrs, slog.String("remote_addr", info.Conn.RemoteAddr().String()))
	}
	s.logger.LogAttrs(ctx, slog.LevelWarn,
		"provider call sent again by the HTTP transport: a provider that ignores the idempotency key bills it twice", attrs...)
	if s.onResend != nil {
		s.onResend()
	}
}
