// Package limiter keeps one worker lane's provider calls within the
// provider's requests and tokens per minute, and pauses the lane after a
// 429 (docs/scaling.md, "Provider limits"). Window is the sliding minute of
// an account's rpm at admission (docs/design.md §10).
//
// A Limiter satisfies worker.Limiter without importing it: a call asks Wait
// before it is sent and reports Done when it ends. Standard library only.
package limiter
