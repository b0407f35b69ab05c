package provider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestOpenAI_HiddenTokensDoNotWrap: the Gemini rule charges
// total_tokens - prompt_tokens - completion_tokens as output when it is
// positive. A total so negative that the subtraction wraps around int64
// must not turn into ~2^63 hidden completion tokens: the answer reported
// 1 + 1 tokens (its total is nonsense), and before the rule it was kept
// and charged as such. With the wrap, a priced model's Cost is
// MaxInt64, the worker fails the paid answer as "impossible usage".
func TestOpenAI_HiddenTokensDoNotWrap(t *testing.T) {
	t.Parallel()
	body := `{"id":"chatcmpl-wrap","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":-9223372036854775808}}`
	url, _ := serveAnswer(t, 200, map[string]string{"Content-Type": "application/json"}, []byte(body))
	resp, err := providerOfKind(t, "openai", url).Generate(context.Background(), sayHiRequest)
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	if resp.CompletionTokens != 1 {
		t.Errorf("completion tokens %d for an answer reporting 1 (total_tokens %d wrapped in total-prompt-completion); want 1",
			resp.CompletionTokens, int64(-9223372036854775808))
	}
}

// answerSizeLimit mirrors provider.maxAnswerBytes (4 MiB).
const answerSizeLimit = 4 << 20

// answerOfSize is a chat.completion of exactly n bytes.
func answerOfSize(t *testing.T, n int) []byte {
	t.Helper()
	head := `{"id":"chatcmpl-big","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"`
	tail := `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`
	pad := n - len(head) - len(tail)
	b := []byte(head + strings.Repeat("a", pad) + tail)
	if len(b) != n || !json.Valid(b) {
		t.Fatalf("fixture: %d bytes, valid %t", len(b), json.Valid(b))
	}
	return b
}

// TestOpenAI_ByteOrderMarkDoesNotEatTheSizeLimit: a BOM's three bytes
// must not count against maxAnswerBytes. Were send to read up to
// maxAnswerBytes+1 bytes and strip a BOM afterwards, an answer whose JSON
// is within the limit (exactly maxAnswerBytes here, which is kept without
// a BOM) would be cut short when a BOM precedes it, and the paid answer
// failed as malformed "not chat-completion JSON" (and one over the limit
// would get that message instead of "answer larger than").
func TestOpenAI_ByteOrderMarkDoesNotEatTheSizeLimit(t *testing.T) {
	t.Parallel()
	body := answerOfSize(t, answerSizeLimit)
	// Control: without a BOM the same answer is kept.
	url, _ := serveAnswer(t, 200, map[string]string{"Content-Type": "application/json"}, body)
	if _, err := providerOfKind(t, "openai", url).Generate(context.Background(), sayHiRequest); err != nil {
		t.Fatalf("control without a BOM: %v", err)
	}
	url, _ = serveAnswer(t, 200, map[string]string{"Content-Type": "application/json"}, append([]byte("\xEF\xBB\xBF"), body...))
	resp, err := providerOfKind(t, "openai", url).Generate(context.Background(), sayHiRequest)
	if err != nil {
		t.Fatalf("the same %d-byte answer behind a BOM failed: %v; want it kept as it is without one", len(body), err)
	}
	if !bytes.HasPrefix([]byte(resp.Text), []byte("aaaa")) {
		t.Errorf("text %.20q...", resp.Text)
	}
}
