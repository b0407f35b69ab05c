package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/inkwell/inkwell"
)

// statusOf maps each error code to its HTTP status.
var statusOf = map[string]int{
	inkwell.EINVALID:         http.StatusBadRequest,
	inkwell.ETOOLARGE:        http.StatusRequestEntityTooLarge,
	inkwell.ENOTFOUND:        http.StatusNotFound,
	inkwell.EMETHOD:          http.StatusMethodNotAllowed,
	inkwell.EFORBIDDEN:       http.StatusForbidden,
	inkwell.EUNAUTHENTICATED: http.StatusUnauthorized,
	inkwell.ECONFLICT:        http.StatusConflict,
	inkwell.EKEYREUSED:       http.StatusUnprocessableEntity,
	inkwell.EUNAVAILABLE:     http.StatusServiceUnavailable,
	inkwell.ELANEHELD:        http.StatusServiceUnavailable,
	inkwell.ETOOMANY:         http.StatusTooManyRequests,
	inkwell.EBUDGET:          http.StatusPaymentRequired,
	inkwell.EINTERNAL:        http.StatusInternalServerError,
	inkwell.EMEDIATYPE:       http.StatusUnsupportedMediaType,
}

// writeError is the one place an error becomes an HTTP answer: the code
// picks the status, internal errors are logged and their text hidden.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := inkwell.ErrorCode(err)
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	msg := inkwell.ErrorMessage(err)
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client went away while waiting: no refusal, and nothing to
		// log as a failure (nor to count as the internal error operators
		// alert on).
		s.log.DebugContext(r.Context(), "client gone before its answer", "method", r.Method, "path", r.URL.Path)
		return
	}
	s.cfg.Metrics.Refusal(r.Pattern, code)
	switch {
	case status == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="inkwell"`)
	case status == http.StatusTooManyRequests:
		// Admission refused a new job: the queue drains at the lanes'
		// pace, so come back in a few seconds, with the same key (an
		// account's rpm set its own Retry-After already).
		if w.Header().Get("Retry-After") == "" {
			w.Header().Set("Retry-After", "5")
		}
	case status == http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	// Every refusal is logged: a client's mistake (4xx) at info with its
	// code and message, never the request's body or its token.
	attrs := []any{"method", r.Method, "path", r.URL.Path, "status", status, "code", code}
	switch {
	case status == http.StatusServiceUnavailable:
		s.log.WarnContext(r.Context(), "request refused: unavailable", append(attrs, "err", err)...)
	case status >= 500:
		s.log.ErrorContext(r.Context(), "request failed", append(attrs, "err", err)...)
	default:
		s.log.InfoContext(r.Context(), "request refused", append(attrs, "message", msg)...)
	}
	writeJSON(w, status, map[string]*inkwell.Error{"error": {Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
