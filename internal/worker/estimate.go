package worker

import (
	"unicode/utf8"

	"github.com/inkwell/inkwell"
)

// EstimateTokens is a call's token cost as a limiter sees it before the
// call: the prompt at about four characters a token, plus the answer's
// worst case at about four tokens for three words. The answer's usage
// corrects it afterwards (Limiter.Done).
func EstimateTokens(req inkwell.ProviderRequest) int {
	words := req.MaxWords
	if words <= 0 {
		words = inkwell.DefaultMaxWords
	}
	return (utf8.RuneCountInString(req.Prompt)+3)/4 + (words*4+2)/3
}
