package provider_test

import (
	"encoding/json"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/provider"
)

// TestWorstCase_PerTokenCountsWhatBytesDoNotShow: serve without a config
// file, --provider openai --provider-micros-per-token, charges
// usage.total_tokens at that price, so its worst case counts the prompt
// tokens a request's bytes do not show, as a priced model's does
// (Model.InputBound): an image part's max_image_tokens and the tools'
// instructions. Without them an image request's answer was capped at a
// worst case its usage passed.
func TestWorstCase_PerTokenCountsWhatBytesDoNotShow(t *testing.T) {
	t.Parallel()
	const perToken = 1000 // the per-token bound above max_tokens × the word price, so it is the one compared
	p, err := provider.NewOpenAI(provider.OpenAIConfig{URL: "http://127.0.0.1:1", MicrosPerToken: perToken})
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.Single(catalog.Provider{Kind: catalog.KindOpenAI}, "gpt-4o", 1000)
	m, _, err := cat.Lookup("any-model")
	if err != nil {
		t.Fatal(err)
	}
	if m.ImageTokens != inkwell.DefaultImageTokens {
		t.Fatalf("the no-file model counts %d tokens an image, want DefaultImageTokens %d", m.ImageTokens, inkwell.DefaultImageTokens)
	}
	worst := func(body string) (int64, inkwell.ChatRequest) {
		t.Helper()
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &fields); err != nil {
			t.Fatal(err)
		}
		c, err := inkwell.ParseChat(fields)
		if err != nil {
			t.Fatal(err)
		}
		return provider.WorstCaseMicros(p, m, inkwell.Work{Chat: c}), c
	}
	text, tc := worst(`{"model":"any-model","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"what is it?"}]}]}`)
	image, ic := worst(`{"model":"any-model","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}`)
	tools, oc := worst(`{"model":"any-model","max_tokens":10,"tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":[{"type":"text","text":"what is it?"}]}]}`)
	if want := text + perToken*(int64(ic.InputBytes()-tc.InputBytes())+inkwell.DefaultImageTokens); image != want {
		t.Errorf("with an image: worst case %d, want %d (the text's %d, the image's bytes and %d tokens at %d)", image, want, text, inkwell.DefaultImageTokens, perToken)
	}
	if want := text + perToken*(int64(oc.InputBytes()-tc.InputBytes())+inkwell.ToolPromptTokens); tools != want {
		t.Errorf("with tools: worst case %d, want %d (the text's %d, the tools' bytes and %d tokens at %d)", tools, want, text, inkwell.ToolPromptTokens, perToken)
	}
}
