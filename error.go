package inkwell

import (
	"errors"
	"fmt"
)

// Error codes. The API maps each to one HTTP status in one place.
const (
	ECONFLICT        = "conflict"           // the row is not in the state the transition needs
	EKEYREUSED       = "key_reused"         // same idempotency key, different body
	EINVALID         = "invalid"            // bad input
	ETOOLARGE        = "too_large"          // body over the limit
	ENOTFOUND        = "not_found"          // no such row or endpoint
	EMETHOD          = "method_not_allowed" // the endpoint exists, the method does not
	EFORBIDDEN       = "forbidden"          // refused whatever the body: e.g. a cross-site browser request, or a token whose role or account may not act
	EUNAUTHENTICATED = "unauthenticated"    // no valid API token where one is required (docs/design.md §10)
	EUNAVAILABLE     = "unavailable"        // database busy, locked or full: retry later
	ELANEHELD        = "lane_held"          // another live process holds the lane lock
	ETOOMANY         = "too_many"           // admission: the queue is full (serve --max-queued), or the account's rpm is used up; retry later
	EBUDGET          = "budget_exceeded"    // the account's budget cannot cover the job's worst-case cost (docs/design.md §10)
	EINTERNAL        = "internal"           // a bug or an unexpected failure
)

// EMEDIATYPE is a request body whose Content-Type the route does not read
// (415). Its own block keeps the one above aligned as it was.
const EMEDIATYPE = "unsupported_media_type"

// Error is an error with a machine-readable code and a message fit for a
// client. Its JSON form is the body of every refusal.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with the given code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// EINTERNAL when there is none.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err == nil {
		return ""
	}
	return EINTERNAL
}

// ErrorMessage returns the client-safe message of err.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
