package inkwell

import "slices"

// ErrorClass says what kind of failure ended an attempt or a job
// (docs/design.md §9). It is stored in error_class on job_attempts and jobs;
// the retry policy and the operator views decide on it, never on the
// error's wording.
type ErrorClass string

// The error classes. The values are exactly the text stored.
const (
	ClassNotSent         ErrorClass = "not_sent"         // nothing reached the provider: connection refused, DNS, a limiter wait cut by a stop
	ClassRateLimited     ErrorClass = "rate_limited"     // the provider answered 429
	ClassProviderError   ErrorClass = "provider_error"   // the provider answered 5xx
	ClassRejected        ErrorClass = "rejected"         // the provider refused the request (other 4xx), or the request is unreadable
	ClassMalformed       ErrorClass = "malformed"        // an answer Inkwell cannot read
	ClassUnstorable      ErrorClass = "unstorable"       // an answer the database refuses
	ClassTimeout         ErrorClass = "timeout"          // no answer: the call timed out, or broke after the request was sent
	ClassWorkerRestarted ErrorClass = "worker_restarted" // closed by startup recovery or rescue
	ClassShutdown        ErrorClass = "shutdown"         // a graceful stop cut the call short
	ClassCancelled       ErrorClass = "cancelled"        // cancelled by a client or an operator
	ClassLegacy          ErrorClass = "legacy"           // stored before classes existed, and its words do not tell
)

// ErrorClasses lists every class.
var ErrorClasses = []ErrorClass{ClassNotSent, ClassRateLimited, ClassProviderError, ClassRejected, ClassMalformed,
	ClassUnstorable, ClassTimeout, ClassWorkerRestarted, ClassShutdown, ClassCancelled, ClassLegacy}

// Valid reports whether c is one of ErrorClasses.
func (c ErrorClass) Valid() bool { return slices.Contains(ErrorClasses, c) }

// RetrySafe reports whether the evidence behind class c says a second call
// cannot spend money twice, so an automatic retry may put the job back:
// always for not_sent, rate_limited and provider_error; for timeout and
// shutdown only when the provider honours idempotency keys (a second call
// under the same key is answered from the provider's record, not billed
// again). Never for the others: rejected, malformed and unstorable fail the
// same way again, cancelled was asked for, worker_restarted may be what
// kills the worker (and recovery never re-queues), legacy cannot tell.
func (c ErrorClass) RetrySafe(providerHonoursKeys bool) bool {
	switch c {
	case ClassNotSent, ClassRateLimited, ClassProviderError:
		return true
	case ClassTimeout, ClassShutdown:
		return providerHonoursKeys
	}
	return false
}

// NotBilled reports whether the evidence behind class c says the provider
// billed nothing for the attempt: not_sent (nothing reached it),
// rate_limited (it answered 429), provider_error (5xx) and rejected
// (another 4xx, or a request never sent because it is unreadable). A job
// all of whose attempts failed so releases its budget reservation
// (docs/design.md §10); any other class (timeout, shutdown, malformed,
// unstorable, worker_restarted, a cancel of a running call, legacy) may
// have been billed and keeps it.
func (c ErrorClass) NotBilled() bool {
	switch c {
	case ClassNotSent, ClassRateLimited, ClassProviderError, ClassRejected:
		return true
	}
	return false
}
