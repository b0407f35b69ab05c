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

// TestCheckMessages_EmptyRefusalIsNoRefusal: the rule is "a refusal with text" is
// refused; a "refusal" of "" says nothing, like null, and the mapping
// loses nothing by leaving it out. Clients that serialise a message struct
// without omitting empty strings send it back as "".
func TestCheckMessages_EmptyRefusalIsNoRefusal(t *testing.T) {
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

// TestCheckMessages_SDKEchoedAssistantMessagesPass guards what the official SDKs
// send back (openai-python model_dump of a ChatCompletionMessage;
// openai-node's raw message; a tool-calling answer).
func TestCheckMessages_SDKEchoedAssistantMessagesPass(t *testing.T) {
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
