package provider

import "github.com/inkwell/inkwell"

// chatOverheadTokens bounds what the chat-completions format adds to a
// prompt's tokens (the role markers and the reply's start: a few tokens).
const chatOverheadTokens = 16

// WorstCaseMicros is the most work w can cost on model m served by
// provider p, in micros: what accept reserves against the account's budget
// (docs/design.md §10, §12). It is an upper bound of what the answer is
// charged:
//
//   - a priced model (a config file's prices): every byte of the request's
//     input a token, plus its output bound, at the model's prices
//     (inkwell.Model.WorstCase); the charge is the answer's usage at them;
//   - unpriced, sim (and the simulator, which bills the same): exactly the
//     words it writes, at MicrosPerWord;
//   - unpriced, openai priced per token (OpenAIConfig.MicrosPerToken): the
//     input at one token per byte plus the chat format's overhead, plus the
//     output bound, at that price;
//   - unpriced otherwise (openai by the word, anthropic): the output bound
//     in words (every word is at least one token) at MicrosPerWord, an
//     upper bound of Price(text), which they charge.
//
// The reservation is a bound, not the price: the completion charges what
// the answer cost.
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
			return int64(w.Chat.InputBytes()+chatOverheadTokens+bound) * p.cfg.MicrosPerToken
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
