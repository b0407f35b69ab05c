package provider_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

const okCompletion = `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Fine."},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`

// TestOpenAI_OutputLimitField: an openai provider sends the output limit
// under the one name its API reads. By default the client's own name is
// kept and max_completion_tokens is added when the request named none;
// with LimitField max_tokens (Mistral, Azure's older API versions, which
// refuse max_completion_tokens as an unknown field) the limit goes out as
// max_tokens only, whatever name the client used, and bounded as before.
func TestOpenAI_OutputLimitField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, field, body string
		want              map[string]any // the limit fields sent; nil: absent
	}{
		{"default, none named", "", `{"messages":[{"role":"user","content":"hi"}]}`, map[string]any{"max_completion_tokens": 77.0, "max_tokens": nil}},
		{"default, max_tokens named", "", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":50}`, map[string]any{"max_tokens": 50.0, "max_completion_tokens": nil}},
		{"max_tokens, none named", "max_tokens", `{"messages":[{"role":"user","content":"hi"}]}`, map[string]any{"max_tokens": 77.0, "max_completion_tokens": nil}},
		{"max_tokens, max_completion_tokens named", "max_tokens", `{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":40}`, map[string]any{"max_tokens": 40.0, "max_completion_tokens": nil}},
		{"max_completion_tokens, max_tokens named", "max_completion_tokens", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":30}`, map[string]any{"max_completion_tokens": 30.0, "max_tokens": nil}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := startCapture(t, http.StatusOK, okCompletion, nil)
			p, err := provider.NewOpenAI(provider.OpenAIConfig{URL: srv.URL, LimitField: c.field})
			if err != nil {
				t.Fatal(err)
			}
			chat := mustChat(t, c.body)
			if chat.MaxOutputTokens == 0 {
				chat.MaxOutputTokens = 77 // the bound in force, as the lane sets it
			}
			if _, err := p.Generate(t.Context(), inkwell.ProviderRequest{IdempotencyKey: "job-1", Chat: chat}); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			var sent map[string]any
			if err := json.Unmarshal(srv.mustOneRequest(t).Body, &sent); err != nil {
				t.Fatal(err)
			}
			for name, want := range c.want {
				if got, ok := sent[name]; (want == nil) == ok || ok && got != want {
					t.Errorf("sent %s = %v (present %t), want %v", name, got, ok, want)
				}
			}
		})
	}
	if _, err := provider.NewOpenAI(provider.OpenAIConfig{URL: "http://127.0.0.1:1", LimitField: "max_output_tokens"}); inkwell.ErrorCode(err) != inkwell.EINVALID {
		t.Errorf("NewOpenAI with LimitField max_output_tokens: %v, want refused", err)
	}
}
