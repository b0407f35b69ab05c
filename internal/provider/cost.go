package provider

import "github.com/inkwell/inkwell"

// chatOverheadTokens bounds what the chat-completions format adds to a
// prompt's tokens (the role markers and the reply's start: a few tokens).
const chatOverheadTokens = 16

// WorstCaseMicros is the most work w can cost on model m served by
// provider p, in micros: what accept reserves against the account's budget,
// an upper bound of the charge (the cases: docs/operations.md, "The worst case").
func WorstCaseMicros(p inkwell.Provider, m inkwell.Model, w inkwell.Work) int64 {
	if m.Priced() {
		return m.WorstCase(w.Chat)
	}
	bound := m.OutputBound(w.Chat)
	switch p := p.(type) {
	case *Sim:
		if w.Short != nil {
			return int64(Words(w.Short.MaxWords)) * MicrosPerWord
		}
		return int64(WordsForMaxTokens(bound)) * MicrosPerWord
	case *OpenAI:
		if p.cfg.MicrosPerToken > 0 {
			// An answer that names its own amount is charged that
			// (OpenAI.amount: provider-sim's, by the word), else its
			// tokens at the price: the worst case is the larger bound.
			tokens := m.InputBound(w.Chat) + chatOverheadTokens + int64(bound)
			return max(tokens*p.cfg.MicrosPerToken, int64(bound)*MicrosPerWord)
		}
	}
	return int64(bound) * MicrosPerWord
}

// ShortWorstCaseMicros is WorstCaseMicros for a short-form request on an
// unpriced model of a provider that is neither sim nor priced per token:
// what the drill reserves for its requests.
func ShortWorstCaseMicros(req inkwell.Request) int64 {
	return int64(MaxTokens(req.MaxWords)) * MicrosPerWord
}
