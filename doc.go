// Package inkwell is the vocabulary of the Inkwell job service: job and
// attempt statuses, the request a client sends, the rows a job owns, the
// Provider interface the worker calls, and the Error type every layer returns.
//
// It imports only the standard library. Everything that talks to a database
// lives in internal/store, the worker lane in internal/worker, HTTP in
// internal/api; they all speak these types.
package inkwell
