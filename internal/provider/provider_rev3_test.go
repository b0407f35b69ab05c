package provider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

// TestRev3_HiddenTokensDoNotWrap: the Gemini rule charges
// total_tokens - prompt_tokens - completion_tokens as output when it is
// positive. A total so negative that the subtraction wraps around int64
// must not turn into ~2^63 hidden completion tokens: the answer reported
// 1 + 1 tokens (its total is nonsense), and before the rule it was kept
// and charged as such. With the wrap, a priced model's Cost is
// MaxInt64, the worker fails the paid answer as "impossible usage".
func TestRev3_HiddenTokensDoNotWrap(t *testing.T) {
	t.Parallel()
	body := `{"id":"chatcmpl-wrap","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":-9223372036854775808}}`
	url, _ := provrealServe(t, 200, map[string]string{"Content-Type": "application/json"}, []byte(body))
	resp, err := provrealProvider(t, "openai", url).Generate(context.Background(), provrealReq)
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	if resp.CompletionTokens != 1 {
		t.Errorf("completion tokens %d for an answer reporting 1 (total_tokens %d wrapped in total-prompt-completion); want 1",
			resp.CompletionTokens, int64(-9223372036854775808))
	}
}

// rev3MaxAnswerBytes mirrors provider.maxAnswerBytes (4 MiB).
const rev3MaxAnswerBytes = 4 << 20

// rev3AnswerOfSize is a chat.completion of exactly n bytes.
func rev3AnswerOfSize(t *testing.T, n int) []byte {
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

// TestRev3_ByteOrderMarkDoesNotEatTheSizeLimit: send reads up to
// maxAnswerBytes+1 bytes and strips a BOM afterwards, so the BOM's three
// bytes count against the limit. An answer whose JSON is within the limit
// (exactly maxAnswerBytes here, which is kept without a BOM) is cut
// short when a BOM precedes it, and the paid answer is failed as
// malformed "not chat-completion JSON" (and one over the limit gets that
// message instead of "answer larger than").
func TestRev3_ByteOrderMarkDoesNotEatTheSizeLimit(t *testing.T) {
	t.Parallel()
	body := rev3AnswerOfSize(t, rev3MaxAnswerBytes)
	// Control: without a BOM the same answer is kept.
	url, _ := provrealServe(t, 200, map[string]string{"Content-Type": "application/json"}, body)
	if _, err := provrealProvider(t, "openai", url).Generate(context.Background(), provrealReq); err != nil {
		t.Fatalf("control without a BOM: %v", err)
	}
	url, _ = provrealServe(t, 200, map[string]string{"Content-Type": "application/json"}, append([]byte("\xEF\xBB\xBF"), body...))
	resp, err := provrealProvider(t, "openai", url).Generate(context.Background(), provrealReq)
	if err != nil {
		t.Fatalf("the same %d-byte answer behind a BOM failed: %v; want it kept as it is without one", len(body), err)
	}
	if !bytes.HasPrefix([]byte(resp.Text), []byte("aaaa")) {
		t.Errorf("text %.20q...", resp.Text)
	}
}

// TestRev3_EmptyRefusalIsNoRefusal: the rule is "a refusal with text" is
// refused; a "refusal" of "" says nothing, like null, and the mapping
// loses nothing by leaving it out. Clients that serialise a message struct
// without omitting empty strings send it back as "".
func TestRev3_EmptyRefusalIsNoRefusal(t *testing.T) {
	t.Parallel()
	var fields map[string]json.RawMessage
	msgs := `[{"role":"user","content":"hi"},{"role":"assistant","content":"hello","refusal":""},{"role":"user","content":"more"}]`
	if err := json.Unmarshal([]byte(`{"model":"claude-x","max_tokens":50,"messages":`+msgs+`}`), &fields); err != nil {
		t.Fatal(err)
	}
	c, err := inkwell.ParseChat(fields)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if err := provider.CheckMessages(c); err != nil {
		t.Errorf("an empty refusal was refused: %v; want it let through (it has no text to drop)", err)
	}
}

// TestRev3_SDKEchoedAssistantMessagesPass guards what the official SDKs
// send back (openai-python model_dump of a ChatCompletionMessage;
// openai-node's raw message; a tool-calling answer).
func TestRev3_SDKEchoedAssistantMessagesPass(t *testing.T) {
	t.Parallel()
	for name, asst := range map[string]string{
		"python": `{"content":"hello","refusal":null,"role":"assistant","annotations":[],"audio":null,"function_call":null,"tool_calls":null}`,
		"node":   `{"role":"assistant","content":"hello","refusal":null,"annotations":[]}`,
		"tools":  `{"content":null,"refusal":null,"role":"assistant","annotations":[],"audio":null,"function_call":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			var fields map[string]json.RawMessage
			msgs := `[{"role":"user","content":"hi"},` + asst + `,`
			if name == "tools" {
				msgs += `{"role":"tool","tool_call_id":"call_1","content":"42"}]`
			} else {
				msgs += `{"role":"user","content":"more"}]`
			}
			body := `{"model":"claude-x","max_tokens":50,"tools":[{"type":"function","function":{"name":"f"}}],"messages":` + msgs + `}`
			if err := json.Unmarshal([]byte(body), &fields); err != nil {
				t.Fatal(err)
			}
			c, err := inkwell.ParseChat(fields)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if err := provider.CheckMessages(c); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
}
