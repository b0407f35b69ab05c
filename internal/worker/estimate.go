package worker

import (
	"unicode/utf8"

	"github.com/inkwell/inkwell"
)

// EstimateTokens is a call's token cost as a limiter sees it before the
// call: the prompt at about four characters a token, plus the answer's
// worst case, two tokens a word: the bound the openai provider sends as
// max_tokens (provider.MaxTokens). The answer's usage corrects it
// afterwards (Limiter.Done).
func EstimateTokens(req inkwell.ProviderRequest) int {
	words := req.MaxWords
	if words <= 0 {
		words = inkwell.DefaultMaxWords
	}
	return (utf8.RuneCountInString(req.Prompt)+3)/4 + 2*words
}
