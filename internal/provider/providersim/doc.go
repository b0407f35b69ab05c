// Package providersim is the standalone provider simulator behind
// `inkwell provider-sim`: an HTTP server speaking OpenAI's chat completions
// and Anthropic's messages (messages.go), with its own SQLite ledger of what
// it billed, which plays the paid outside world in drills and tests
// (docs/design.md §5, where its billing rules are). It imports provider (the
// shared text and price), never store, worker or api.
package providersim
