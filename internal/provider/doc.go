// Package provider owns the implementations of inkwell.Provider (sim,
// openai, anthropic), the paid call the worker makes outside any
// transaction, and the text generator and price list it shares with
// providersim. A call is one HTTP request and never retries: that is the
// worker's decision (docs/architecture.md, "One HTTP request per paid
// call"). Failures come back as *CallError.
package provider
