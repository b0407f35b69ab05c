// Package provider owns the implementations of inkwell.Provider, the paid
// text generator the worker calls outside any transaction:
//
//   - Sim writes a deterministic text in-process (the default provider);
//   - OpenAI speaks the OpenAI-compatible chat-completions API over HTTP and
//     sends the job-scoped Idempotency-Key, so a repeated call for the same
//     job is answered from the provider's record instead of billed again.
//
// It also owns the one text generator (Generate) and the one price list
// (Price) shared by Sim and by the standalone simulator in providersim, so
// that both answer the same prompt with the same words and the same bill.
//
// An OpenAI call makes exactly one HTTP request: it never retries, because
// retrying a paid call is the worker's decision, taken on a new attempt with
// the same key. Failures come back as *CallError, whose Class says what went
// wrong (timeout, connection refused, rate limited, ...).
//
// It imports the standard library and the root inkwell package only; never
// store, worker or api.
package provider
