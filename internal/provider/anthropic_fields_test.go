package provider_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

// A message field the Messages API mapping does not send is refused by
// name before anything is written, not dropped: an assistant's "audio" (an
// answer's audio stored at OpenAI), a legacy "function_call", or a
// "refusal" with text. A null one says nothing (an SDK sends an answer
// back as it came: "refusal": null, "audio": null), and an answer's
// "annotations" (url citations) are no input: both are sent as before.
func TestCheckMessages_RefusesFieldsItWouldDrop(t *testing.T) {
	for _, tc := range []struct {
		name, messages, refused string
	}{
		{"audio", `[{"role":"user","content":"hi"},{"role":"assistant","content":"said aloud","audio":{"id":"audio_abc"}},{"role":"user","content":"again"}]`, "messages[1].audio"},
		{"function_call", `[{"role":"user","content":"hi"},{"role":"assistant","content":"calling","function_call":{"name":"f","arguments":"{}"}},{"role":"user","content":"and?"}]`, "messages[1].function_call"},
		{"refusal", `[{"role":"user","content":"hi"},{"role":"assistant","content":"","refusal":"I can't help with that."},{"role":"user","content":"why?"}]`, "messages[1].refusal"},
		{"unknown", `[{"role":"user","content":"hi","cache_hint":"x"}]`, "messages[0].cache_hint"},
		{"nulls and annotations", `[{"role":"user","content":"hi"},{"role":"assistant","content":"hello","refusal":null,"audio":null,"function_call":null,"annotations":[{"type":"url_citation"}]},{"role":"user","content":"more"}]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fields map[string]json.RawMessage
			if err := json.Unmarshal([]byte(`{"model":"claude-x","max_tokens":50,"messages":`+tc.messages+`}`), &fields); err != nil {
				t.Fatal(err)
			}
			c, err := inkwell.ParseChat(fields)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			err = provider.CheckMessages(c)
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("refused %v; want it sent", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("CheckMessages = %v; want a refusal naming %s", err, tc.refused)
			}
		})
	}
}
