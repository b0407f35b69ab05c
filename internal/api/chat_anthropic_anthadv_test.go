package api_test

// Adversary pass (anthropic): requests for a model served by Anthropic's
// Messages API that the provider's own mapping (internal/provider,
// toMessages) can never send. docs/providers.md: "What the Messages API
// cannot carry is refused at accept, 400, nothing written"; the rule: bad
// input gets a clear error and writes nothing.

import (
	"net/http"
	"testing"

	"github.com/inkwell/inkwell"
)

// TestAnthAdv_UnmappableAnthropicRequestsRefusedAtAccept: found in review,
// each body below passed accept (201, a job row and a reservation
// written), and only when a worker claimed it did the provider's mapping
// refuse it, failing the job as rejected. Accept now runs the same mapping
// for a model served by anthropic (catalog.Check, provider.CheckMessages)
// and answers 400 EINVALID with the mapping's message, writing nothing.
func TestAnthAdv_UnmappableAnthropicRequestsRefusedAtAccept(t *testing.T) {
	t.Parallel()
	e := catalogEnv(t)
	const user = `{"role":"user","content":"hi"}`
	for _, tc := range []struct{ name, body string }{
		// toMessages: "messages has no user or assistant message".
		{"OnlySystemMessages", `{"model":"claude","messages":[{"role":"system","content":"be brief"},{"role":"developer","content":"in French"}]}`},
		// toToolChoice: OpenAI's allowed_tools form has no function name.
		{"ToolChoiceAllowedTools", `{"model":"claude","messages":[` + user + `],
			"tools":[{"type":"function","function":{"name":"f"}}],
			"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"f"}}]}}}`},
		{"ToolChoiceUnknownString", `{"model":"claude","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"whenever"}`},
		// toTools: only function tools map.
		{"CustomTool", `{"model":"claude","messages":[` + user + `],"tools":[{"type":"custom","custom":{"name":"grammar"}}]}`},
		// imageBlock: neither a base64 data: URL nor http(s).
		{"ImageFTPURL", `{"model":"claude","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://example.com/a.png"}}]}]}`},
		{"ImageDataURLNotBase64", `{"model":"claude","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,rawbytes"}}]}]}`},
		// toolUses: arguments that are not a JSON object.
		{"ToolCallArgumentsNotAnObject", `{"model":"claude","messages":[` + user + `,
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"[1,2]"}}]},
			{"role":"tool","tool_call_id":"c1","content":"ok"}],"tools":[{"type":"function","function":{"name":"f"}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.contents()
			r := e.post("k-anthadv-"+tc.name, tc.body)
			if r.status != http.StatusBadRequest {
				t.Errorf("POST %s\n= %d %s\nwant 400 EINVALID and nothing written: the Messages API mapping refuses this request, "+
					"so the job can only fail (rejected) once a worker claims it", tc.body, r.status, r.body)
				return
			}
			assertError(t, r, http.StatusBadRequest, inkwell.EINVALID)
			e.assertUnchanged(before)
		})
	}
}

// TestAnthAdv_SystemImageRefused: found in review, a system message's
// image part reached Anthropic as if never written (the system prompt is
// text only, and the mapping kept the text): the model answered another
// conversation. It is now 400 EINVALID, nothing written. (A message's own
// fields beyond role, content, name, tool_calls and tool_call_id, such as
// an assistant's audio or a legacy function_call, are still not read by
// the mapping: not built, docs/providers.md says so.)
func TestAnthAdv_SystemImageRefused(t *testing.T) {
	t.Parallel()
	e := catalogEnv(t)
	for _, tc := range []struct{ name, body string }{
		{"SystemImagePart", `{"model":"claude","messages":[{"role":"system","content":[{"type":"text","text":"Judge against this chart:"},
			{"type":"image_url","image_url":{"url":"https://example.com/chart.png"}}]},{"role":"user","content":"Is 40 above the line?"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.contents()
			r := e.post("k-anthadv-field-"+tc.name, tc.body)
			if r.status != http.StatusBadRequest {
				t.Errorf("POST %s\n= %d; want 400 EINVALID naming what Anthropic's Messages API cannot carry (the mapping drops it silently)", tc.body, r.status)
				return
			}
			e.assertUnchanged(before)
		})
	}
}
