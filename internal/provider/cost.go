package provider

import "github.com/inkwell/inkwell"

// chatOverheadTokens bounds what the chat-completions format adds to a
// prompt's tokens (the role markers and the reply's start: a few tokens).
const chatOverheadTokens = 16

// WorstCaseMicros is the most a request can cost on provider p, in micros:
// what accept reserves against the account's budget (docs/design.md §10). It is
// an upper bound of what each provider's answer is priced at:
//
//   - sim (and the simulator, which bills the same): exactly
//     Words(max_words) words at MicrosPerWord;
//   - openai priced per token (OpenAIConfig.MicrosPerToken): the prompt at
//     one token per byte (no tokenizer makes a token of less than a byte)
//     plus the chat format's overhead, plus max_tokens, at that price;
//   - openai priced per word (no MicrosPerToken, or an answer without
//     usage): at most max_tokens words (every word is at least one token)
//     at MicrosPerWord. The simulator's own amount (Words(max_words) words)
//     is below it.
//
// Any other provider is bounded as openai per word. The reservation is a
// bound, not the price: the completion charges what the answer cost.
func WorstCaseMicros(p inkwell.Provider, req inkwell.Request) int64 {
	switch p := p.(type) {
	case *Sim:
		return int64(Words(req.MaxWords)) * MicrosPerWord
	case *OpenAI:
		if p.cfg.MicrosPerToken > 0 {
			return int64(len(req.Prompt)+chatOverheadTokens+MaxTokens(req.MaxWords)) * p.cfg.MicrosPerToken
		}
	}
	return int64(MaxTokens(req.MaxWords)) * MicrosPerWord
}
