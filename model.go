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
	// ImageTokens is the most prompt tokens one image part (image_url) may
	// cost beyond its own bytes: an image a URL names is a few bytes of
	// request and hundreds to tens of thousands of tokens of input. The
	// config file's max_image_tokens, DefaultImageTokens when it names none.
	ImageTokens int64
	// InputTokens is the most prompt tokens the model's provider bills for
	// one request (its context window: a longer prompt is refused, not
	// billed), 0 when the config file's max_input_tokens names none. It
	// caps InputBound, and is what bounds a part nothing else does (a
	// document stored at the provider, ChatRequest.UnsizedInputs).
	InputTokens int64
}

// Priced says the model charges by usage at its prices. An unpriced model
// (no config file: today's flags) charges as its provider says.
func (m Model) Priced() bool { return m.InputMicrosPerMTok > 0 || m.OutputMicrosPerMTok > 0 }

// Cost is what inTokens prompt tokens and outTokens completion tokens cost
// at the model's prices, in micros, rounded up to the next micro. It never
// overflows: an impossible count or price costs math.MaxInt64, more than
// any answer may be charged.
func (m Model) Cost(inTokens, outTokens int64) int64 {
	const mtok = 1_000_000
	bad := func(n int64, limit int64) bool { return n < 0 || n > limit }
	if bad(inTokens, 1<<32) || bad(outTokens, 1<<32) || bad(m.InputMicrosPerMTok, MaxPriceMicrosPerMTok) || bad(m.OutputMicrosPerMTok, MaxPriceMicrosPerMTok) {
		return math.MaxInt64
	}
	// Each product is under 2^32 × 2^31 = 2^63; divided before they are
	// added, the sum and its rounding cannot overflow.
	in, out := inTokens*m.InputMicrosPerMTok, outTokens*m.OutputMicrosPerMTok
	return in/mtok + out/mtok + (in%mtok+out%mtok+mtok-1)/mtok
}

// MaxChargeMicros bounds what one job may cost, reserved or charged: a
// million currency units. No writing request costs that; an answer said to
// cost more is malformed, a request whose worst case is more is refused,
// and an account's sums stay far inside int64.
const MaxChargeMicros = 1_000_000 * 1_000_000

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
// (docs/design.md §12): its InputBound in prompt tokens plus its output
// bound, at the model's prices.
func (m Model) WorstCase(c ChatRequest) int64 {
	return m.Cost(m.InputBound(c), int64(m.OutputBound(c)))
}

// InputBound is the most prompt tokens a request can be billed on m:
// every byte of its input a token; ToolPromptTokens more with tools (a
// provider adds its own instructions for them); the model's ImageTokens
// more for each image part (its bytes, a URL, do not show what it
// costs). Every worst case that counts prompt tokens counts these.
//
// A model with InputTokens (max_input_tokens) is never billed more
// prompt tokens than that, so the bound is at most InputTokens, and is
// InputTokens when the request has a part whose cost nothing else
// bounds (UnsizedInputs). Without it such a part counts its bytes only,
// and an answer billed past the bound is charged the bound (capped and
// logged by the lane).
func (m Model) InputBound(c ChatRequest) int64 {
	in := int64(c.InputBytes())
	if len(c.Tools) > 0 {
		in += ToolPromptTokens
	}
	// At most MaxMessages × (1 MiB / the smallest part) images, each at
	// most MaxImageTokens: no overflow; Cost refuses the absurd.
	if m.InputTokens == 0 {
		return in + int64(c.ImageParts())*m.ImageTokens
	}
	images, unsized := c.inputParts()
	in += int64(images) * m.ImageTokens
	if in > m.InputTokens || unsized > 0 {
		return m.InputTokens
	}
	return in
}

// DefaultImageTokens is a model's ImageTokens when the config file names
// none: the largest per-image figure of the providers' published
// pricing we checked when it was set (OpenAI's gpt-4o-mini at high
// detail, eight tiles: 2,833 + 8 × 5,667 = 48,169 tokens), rounded up.
// It reserves far more than most models need (gpt-4o: 1,445; Claude
// before Opus 4.7: about 1,600; Opus 4.7, Sonnet 5 and later: 4,784),
// which is safe for the operator; a model's own max_image_tokens should
// say what its provider documents for that model.
const DefaultImageTokens = 50_000

// MaxImageTokens bounds max_image_tokens.
const MaxImageTokens = 1 << 24

// MaxInputTokens bounds max_input_tokens: Cost counts at most 2^32 prompt
// tokens.
const MaxInputTokens = 1 << 32

// ToolPromptTokens bounds the tokens a provider adds to a request that has
// tools, which the request's bytes do not show (Anthropic's tool-use
// system prompt is a few hundred).
const ToolPromptTokens = 1024
