package provider_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

// The limit in force always goes out, under the configured name only:
// null limits, both names (equal), the short form (no Chat fields).
func TestOpenAI_LimitFieldAlwaysSent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, field, body string
		short             bool
		bound             int
		want              float64
	}{
		{"null max_tokens", "max_tokens", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":null}`, false, 77, 77},
		{"null both", "max_tokens", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":null,"max_completion_tokens":null}`, false, 77, 77},
		{"both equal", "max_tokens", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":20,"max_completion_tokens":20}`, false, 0, 20},
		{"short form", "max_tokens", ``, true, 0, float64(inkwell.ShortWords(10) * inkwell.TokensPerWord)},
		{"short form mct", "max_completion_tokens", ``, true, 0, float64(inkwell.ShortWords(10) * inkwell.TokensPerWord)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := startCapture(t, http.StatusOK, okCompletion, nil)
			p, err := provider.NewOpenAI(provider.OpenAIConfig{URL: srv.URL, LimitField: c.field})
			if err != nil {
				t.Fatal(err)
			}
			req := inkwell.ProviderRequest{IdempotencyKey: "job-1"}
			if c.short {
				req.Prompt, req.MaxWords = "hi", 10
			} else {
				req.Chat = mustChat(t, c.body)
				if c.bound > 0 {
					req.Chat.MaxOutputTokens = c.bound
				}
			}
			if _, err := p.Generate(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			var sent map[string]any
			if err := json.Unmarshal(srv.mustOneRequest(t).Body, &sent); err != nil {
				t.Fatal(err)
			}
			other := "max_completion_tokens"
			if c.field == other {
				other = "max_tokens"
			}
			if sent[c.field] != c.want {
				t.Errorf("sent %s = %v, want %v (body %v)", c.field, sent[c.field], c.want, sent)
			}
			if _, ok := sent[other]; ok {
				t.Errorf("sent %s too: %v", other, sent)
			}
		})
	}
}
