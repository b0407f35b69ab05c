package provider_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

// oldUnmapped is unmappedFields as it was before ChatMessage.Others: a map
// decode of each message, exact names.
func oldUnmapped(raw json.RawMessage) string {
	var each []map[string]json.RawMessage
	if json.Unmarshal(raw, &each) != nil {
		return ""
	}
	mapped := []string{"role", "content", "name", "tool_calls", "tool_call_id"}
	for i, m := range each {
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, name := range names {
			v := m[name]
			switch string(bytes.Join(bytes.Fields(v), nil)) {
			case "null", `""`, "[]", "{}":
				continue
			}
			if slices.Contains(mapped, name) || name == "annotations" {
				continue
			}
			return fmt.Sprintf("messages[%d].%s", i, name)
		}
	}
	return ""
}

// TestCheckMessages_OthersAsBefore: what unmappedFields refused before
// Others (a field left out of the Messages API call) it still refuses, at
// accept and on the payload the lane reads back (ChatPayload, ReadPayload),
// except the names the decoder reads as ChatMessage's own in another case.
func TestCheckMessages_OthersAsBefore(t *testing.T) {
	corpus := []string{
		`[{"role":"user","content":"hi"},{"role":"assistant","content":"x","audio":{"id":"a"}},{"role":"user","content":"y"}]`,
		`[{"role":"user","content":"hi"},{"role":"assistant","content":"x","\u0061udio":{"id":"a"}},{"role":"user","content":"y"}]`,
		`[{"role":"user","content":"hi"},{"role":"assistant","content":"x","audio" : null ,"refusal":"no"},{"role":"user","content":"y"}]`,
		`[{"role":"user","content":"hi"},{"role":"assistant","content":"x","function_call":{"name":"f","arguments":"{}"}},{"role":"user","content":"y"}]`,
		`[{"role":"user","content":"hi"},{"role":"assistant","content":"x","refusal":[[]]},{"role":"user","content":"y"}]`,
		`[{"role":"user","content":"hi"},{"role":"assistant","content":"x","<audio>":{"id":"a"}},{"role":"user","content":"y"}]`,
		`[{"role":"user","content":"hi"},{"role":"assistant","content":"x","a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"audio":{"id":"a"}},{"role":"user","content":"y"}]`,
		`[{"role":"user","content":"hi"},{"role":"assistant","content":"x","au\u2028dio":{"id":"a"}},{"role":"user","content":"y"}]`,
		`[{"role":"user","content":"hi"},{"role":"assistant","content":"x","refusal":"\u0000"},{"role":"user","content":"y"}]`,
		`[{"role":"user","content":"hi"},{"role":"assistant","content":"x","refusal":" "},{"role":"user","content":"y"}]`,
		`[{"role":"user","content":"hi"},{"role":"assistant","content":"x","function_call":"   "},{"role":"user","content":"y"}]`,
		`[{"role":"user","content":"hi"},{"role":"assistant","content":"x","Audio":{"id":"a"}},{"role":"user","content":"y"}]`,
	}
	for _, msgs := range corpus {
		body := `{"model":"claude-x","max_tokens":50,"messages":` + msgs + `}`
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &fields); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		want := oldUnmapped(fields["messages"])
		c, err := inkwell.ParseChat(fields)
		if err != nil {
			t.Logf("%s: refused at parse: %v", msgs, err)
			continue
		}
		check := func(where string, c inkwell.ChatRequest) {
			err := provider.CheckMessages(c)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if want != "" && !strings.Contains(got, want) {
				t.Errorf("%s %s: CheckMessages = %q; before Others it refused %s", where, msgs, got, want)
			}
		}
		check("accept", c)
		payload := inkwell.ChatPayload(c, "acme", nil)
		w, err := inkwell.ReadPayload(payload)
		if err != nil {
			t.Fatalf("%s: ReadPayload: %v", payload, err)
		}
		check("lane (payload read back)", w.Chat)
		if a, b := c.UnsizedInputs(), w.Chat.UnsizedInputs(); a != b {
			t.Errorf("%s: UnsizedInputs %d at accept, %d read back", msgs, a, b)
		}
	}
}
