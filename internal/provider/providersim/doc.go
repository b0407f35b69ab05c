// Package providersim is the standalone provider simulator behind
// `inkwell provider-sim`: an HTTP server speaking the OpenAI-compatible
// POST /v1/chat/completions and Anthropic's POST /v1/messages (messages.go)
// that plays the paid outside world in drills and tests (docs/design.md
// §5, §12). Anthropic honours no idempotency key, and neither does its
// route here: every message answered is billed, under the key it was sent
// with (LedgerEntry.SentKey).
//
// It owns its own ledger, a SQLite file, which is the provider's truth
// about money: each new Idempotency-Key is billed once, a repeated key gets
// the same completion (same id, same text) and no new bill, and a call
// without a key is billed every time. The bill is committed before the
// answer is written, so an answer lost on the way (the client died or timed
// out) is still billed, exactly as a real provider would; a retry with the
// same key then gets the stored answer.
//
// It can add latency, answer 500 or hang, chosen by a seeded random source
// so a run can be reproduced; these are decided before billing, so a failed
// or hung call is never billed. It can enforce requests and tokens per
// minute (Config.RPM, TPM; limits.go): a call past them is answered 429
// with a Retry-After and not billed, and every answer reports its usage
// (prompt, completion and total tokens) as the OpenAI API does. GET /ledger reports the ledger, and
// ReadLedger reads the file directly, with or without a running server.
//
// It is not Inkwell's database: the rule that only internal/store writes SQL
// covers Inkwell's own rows, and this ledger belongs to the simulated
// provider. It imports provider (for the shared text and price), never
// store, worker or api.
package providersim
