package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/inkwell/inkwell"
)

// Failure classes of one OpenAI call, the Class of a *CallError. The worker
// and operators read them: a timeout or a 5xx may or may not have been
// billed (retry with the same key), a 4xx will fail the same way again.
const (
	ClassTimeout     = "timeout"            // no full answer within the call's timeout
	ClassConnRefused = "connection refused" // nothing listens at the URL
	ClassNetwork     = "network error"      // DNS, reset, TLS: the request may not have arrived
	ClassRateLimited = "rate limited"       // HTTP 429
	ClassServer      = "server error"       // HTTP 5xx
	ClassClient      = "client error"       // other HTTP 4xx: key, model or request refused
	ClassMalformed   = "malformed answer"   // not JSON, no choices, no content, no id, odd status
	ClassCanceled    = "canceled"           // the caller's ctx was canceled (shutdown)
)

// CallError is a failed provider call. Its text names the class, and never
// contains the API key: Msg is scrubbed before it is stored.
type CallError struct {
	Class      string
	Status     int           // HTTP status, 0 when no answer arrived
	Msg        string        // what happened, fit for jobs.error
	RetryAfter time.Duration // the 429's Retry-After, when it sent one
	Err        error         // the transport error underneath, if any
	// Reached says the request may have reached the provider: it answered,
	// or a connection was obtained before the failure. False is evidence
	// that nothing was sent (DNS, dial, a timeout before any connection).
	Reached bool
	// ShouldRetry is the answer's x-should-retry header, the provider's
	// own word on whether the same call can succeed if sent again: "true",
	// "false", or "" (absent, or anything else). OpenAI's and Anthropic's
	// SDKs obey it over the status, and so does ErrorClass wherever that
	// cannot make a paid call's outcome less certain: a refusal (4xx) the
	// provider says to retry is retried as a provider error, a provider
	// error (5xx) it says not to retry is a refusal. A gateway's 502, 504,
	// 520 or 524 stays ambiguous whatever it says, and a 429 stays a rate
	// limit (the lane's pause).
	ShouldRetry string
}

// ErrorClass is the failure class stored on the attempt (docs/design.md §9),
// from the evidence the call left: what the provider answered, or how far
// the request got. The worker's retry policy decides on it.
func (e *CallError) ErrorClass() inkwell.ErrorClass {
	switch e.Class {
	case ClassRateLimited:
		return inkwell.ClassRateLimited
	case ClassServer:
		if gatewayGaveUp(e.Status) {
			// A gateway in front of the provider stopped waiting for it:
			// the provider may have answered, and billed, behind it. As
			// ambiguous as a timeout: retried only where keys are honoured.
			return inkwell.ClassTimeout
		}
		if e.ShouldRetry == "false" {
			return inkwell.ClassRejected
		}
		return inkwell.ClassProviderError
	case ClassClient:
		if e.ShouldRetry == "true" {
			return inkwell.ClassProviderError
		}
		return inkwell.ClassRejected
	case ClassMalformed:
		return inkwell.ClassMalformed
	case ClassConnRefused:
		return inkwell.ClassNotSent
	}
	if !e.Reached { // timeout, network error or stop before any connection
		return inkwell.ClassNotSent
	}
	if e.Class == ClassCanceled {
		return inkwell.ClassShutdown
	}
	return inkwell.ClassTimeout // no answer, and the request may have arrived
}

// gatewayGaveUp reports a 502 (Bad Gateway) or 504 (Gateway Timeout), or
// Cloudflare's 520 (the origin's answer was empty or unreadable) or 524
// (the origin took the request and did not answer in time; Cloudflare
// stands in front of api.openai.com and api.anthropic.com): an
// intermediary's word that the provider's own answer did not reach it,
// not the provider's that it did nothing. A 500, 503 or 529 is the
// provider refusing the call itself; Cloudflare's 521, 522, 523, 525 and
// 526 say it never reached the origin, and are server errors too.
func gatewayGaveUp(status int) bool {
	return status == 502 || status == 504 || status == 520 || status == 524
}

// Error names the class first, so jobs.error says what kind of failure it was.
func (e *CallError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("provider call: %s: HTTP %d: %s", e.Class, e.Status, e.Msg)
	}
	return fmt.Sprintf("provider call: %s: %s", e.Class, e.Msg)
}

// Unwrap gives the transport error, so errors.Is(err, context.Canceled)
// tells a shutdown from a provider failure.
func (e *CallError) Unwrap() error { return e.Err }

// RateLimited reports whether the provider refused the call for its rate
// limit (HTTP 429), and the Retry-After it asked for (0: none). The lane's
// limiter finds it through errors.As and pauses every call of the lane.
func (e *CallError) RateLimited() (retryAfter time.Duration, ok bool) {
	return e.RetryAfter, e.Class == ClassRateLimited
}

// AsCallError returns the *CallError in err's chain, if any.
func AsCallError(err error) (*CallError, bool) {
	var ce *CallError
	ok := errors.As(err, &ce)
	return ce, ok
}

// transportError classifies an error from sending the request or reading
// the answer. ctx is the caller's context; the call's own timeout is a
// child of it, so a canceled ctx is a shutdown and anything else that ran
// out of time is a timeout.
func transportError(ctx context.Context, err error, scrub func(string) string) *CallError {
	e := &CallError{Class: ClassNetwork, Msg: scrub(err.Error()), Err: err}
	var ne net.Error
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		e.Class, e.Err = ClassCanceled, errors.Join(ctx.Err(), err)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		e.Class = ClassTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		e.Class = ClassConnRefused
	}
	return e
}

// statusError classifies a non-2xx answer. body is the start of what the
// server said, already scrubbed; header is the answer's.
func statusError(status int, body string, header http.Header, now time.Time) *CallError {
	e := &CallError{Status: status, Msg: body, RetryAfter: retryAfter(header, now), Reached: true}
	switch {
	case status == 429:
		e.Class = ClassRateLimited
	case status >= 500:
		e.Class = ClassServer
	case status >= 400:
		e.Class = ClassClient
	default: // 1xx or a redirect we did not follow
		e.Class = ClassMalformed
	}
	if e.Msg == "" {
		e.Msg = "empty body"
	}
	if e.Class == ClassServer && gatewayGaveUp(status) {
		e.Msg += " (a gateway's answer: the provider may have answered, and billed, behind it; outcome unknown)"
		return e
	}
	switch e.ShouldRetry = shouldRetry(header); {
	case e.ShouldRetry == "false" && e.Class == ClassServer:
		e.Msg += " (the provider's x-should-retry: false: not retried)"
	case e.ShouldRetry == "true" && e.Class == ClassClient:
		e.Msg += " (the provider's x-should-retry: true: retried as a provider error)"
	}
	return e
}

// shouldRetry reads an x-should-retry header: "true", "false", or "" for
// none or anything else. A value it cannot read says nothing, and neither
// do several lines that do not all say the same.
func shouldRetry(h http.Header) string {
	said := ""
	for _, line := range h.Values("X-Should-Retry") {
		switch v := strings.ToLower(strings.TrimSpace(line)); {
		case v != "true" && v != "false", said != "" && v != said:
			return ""
		default:
			said = v
		}
	}
	return said
}

func malformed(status int, format string, args ...any) *CallError {
	return &CallError{Class: ClassMalformed, Status: status, Msg: fmt.Sprintf(format, args...), Reached: true}
}

// oneLine shortens a server's words to fit in an error column, as valid
// UTF-8 without NUL: a proxy's Latin-1 error page must not make the
// attempt's error unstorable.
func oneLine(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "?")
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = strings.ToValidUTF8(s[:300], "") + "..."
	}
	return s
}

// reachedError is transportError with what the call's trace saw: after a
// connection was obtained, the provider may have received the request and
// billed it, and the message says that the outcome is unknown; before, the
// request was not sent.
func reachedError(ctx context.Context, err error, trace *callTrace, scrub func(string) string) *CallError {
	e := transportError(ctx, err, scrub)
	e.Reached = trace.connected()
	if e.Class == ClassNetwork && e.Reached {
		e.Msg = "outcome unknown, the request may have reached the provider and been billed: " + e.Msg
	}
	return e
}

// redirectError is the error for a 3xx answer: never followed, because a
// paid call is sent once, to the configured URL only.
func redirectError(status int, location string) *CallError {
	where := oneLine(location)
	if where == "" {
		where = "(no Location)"
	}
	return malformed(status, "the provider redirected the call to %s; a paid call is sent once, to the configured URL, and never follows a redirect: configure the URL it redirects to", where)
}
