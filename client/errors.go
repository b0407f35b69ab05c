package client

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Error is a refusal by the server: the HTTP status and the JSON error
// body's code and message ({"error": {"code", "message"}}). Codes are the
// inkwell.E* constants (invalid, key_reused, not_found, too_many, …).
type Error struct {
	Status  int    // HTTP status, e.g. 422
	Code    string // e.g. "key_reused"; "" when the body was not Inkwell's error form
	Message string // for people: says what to fix
	// RetryAfter is the answer's Retry-After (429, 503), 0 when absent.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("server answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
	}
	return fmt.Sprintf("%s (%d): %s", e.Code, e.Status, e.Message)
}

// Code returns the error code of the *Error in err's chain, or "" when
// there is none (a network error, a context that ended).
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// OutcomeUnknown reports whether a call that returned err may still have
// taken effect on the server: the request may have arrived and the answer
// been lost (a network error, a deadline), or the server failed while
// handling it (5xx). For Submit, re-send it with the same key (SubmitKey):
// that is always safe. A 4xx refusal is known: the server wrote nothing.
func OutcomeUnknown(err error) bool {
	if err == nil {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status >= 500
	}
	return true // no answer: the request may have arrived, or not
}

// resendable says whether a refusal asks the client to come back later:
// 429 (queue full, rate limit) and 503 (busy, recovering); 502 and 504 are
// a proxy's way of saying the same. Nothing was written for any of them
// but 502/504, whose outcome is unknown and which the key makes safe.
func resendable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
