package inkwell

import "math"

// Model is one model clients may name (a [[model]] of serve's config
// file, docs/providers.md): the provider that serves it, the name sent
// upstream, its prices per million tokens, and the most it may write.
type Model struct {
	Name                string // what clients send as "model"
	Provider            string // the [[provider]] that serves it
	Upstream            string // the name sent to the provider
	InputMicrosPerMTok  int64  // price of a million prompt tokens, in micros
	OutputMicrosPerMTok int64  // price of a million completion tokens, in micros
	MaxOutputTokens     int    // the most one answer may write; the bound when a request names none
}

// Priced says the model charges by usage at its prices. An unpriced model
// (no config file: today's flags) charges as its provider says.
func (m Model) Priced() bool { return m.InputMicrosPerMTok > 0 || m.OutputMicrosPerMTok > 0 }

// Cost is what inTokens prompt tokens and outTokens completion tokens cost
// at the model's prices, in micros, rounded up to the next micro. It never
// overflows: an impossible count costs math.MaxInt64, which no answer may
// be charged (the provider refuses it as malformed).
func (m Model) Cost(inTokens, outTokens int64) int64 {
	const mtok = 1_000_000
	if inTokens < 0 || outTokens < 0 || inTokens > 1<<32 || outTokens > 1<<32 {
		return math.MaxInt64
	}
	// Each product fits: 2^32 tokens times a price of at most
	// MaxPriceMicrosPerMTok (under 2^31) stays under 2^63.
	in, out := inTokens*m.InputMicrosPerMTok, outTokens*m.OutputMicrosPerMTok
	if in < 0 || out < 0 || in > math.MaxInt64-out {
		return math.MaxInt64
	}
	return (in + out + mtok - 1) / mtok
}

// MaxPriceMicrosPerMTok bounds a model's price: 2,000 units of the
// currency a million tokens, far above any model's, and low enough that
// Cost cannot overflow.
const MaxPriceMicrosPerMTok = 2_000 * 1_000_000

// OutputBound is the most tokens a request may be answered with on m: the
// request's own limit, else the model's.
func (m Model) OutputBound(c ChatRequest) int {
	if c.MaxOutputTokens > 0 {
		return c.MaxOutputTokens
	}
	return m.MaxOutputTokens
}

// WorstCase is the provable most a request can cost on a priced model
// (docs/design.md §12): every byte of its input a token, plus its output
// bound, at the model's prices.
func (m Model) WorstCase(c ChatRequest) int64 {
	return m.Cost(int64(c.InputBytes()), int64(m.OutputBound(c)))
}
