package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
)

// TestAccept_UnmappableAnthropicRequestsAreRefused: requests for a model
// served by Anthropic's Messages API that the provider's own mapping
// (internal/provider, toMessages) can never send. docs/providers.md: "What
// the Messages API cannot carry is refused at accept, 400, nothing
// written"; the rule: bad input gets a clear error and writes nothing.
// Accepted (201, a job row and a reservation written), each body below
// would be refused only when a worker claimed it, failing the job as
// rejected. So accept runs the same mapping for a model served by
// anthropic (catalog.Check, provider.CheckMessages) and answers 400
// EINVALID with the mapping's message, writing nothing.
func TestAccept_UnmappableAnthropicRequestsAreRefused(t *testing.T) {
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
			r := e.post("k-unmappable-"+tc.name, tc.body)
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

// TestAccept_AnthropicSystemImageIsRefused: a system message's image
// part cannot reach Anthropic (the system prompt is text only); sent
// with its text alone, the model would answer another conversation. It
// is 400 EINVALID, nothing written. (A message's own fields beyond
// role, content, name, tool_calls and tool_call_id, such as an
// assistant's audio or a legacy function_call, are still not read by
// the mapping: not built, docs/providers.md says so.)
func TestAccept_AnthropicSystemImageIsRefused(t *testing.T) {
	t.Parallel()
	e := catalogEnv(t)
	for _, tc := range []struct{ name, body string }{
		{"SystemImagePart", `{"model":"claude","messages":[{"role":"system","content":[{"type":"text","text":"Judge against this chart:"},
			{"type":"image_url","image_url":{"url":"https://example.com/chart.png"}}]},{"role":"user","content":"Is 40 above the line?"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.contents()
			r := e.post("k-system-image-"+tc.name, tc.body)
			if r.status != http.StatusBadRequest {
				t.Errorf("POST %s\n= %d; want 400 EINVALID naming what Anthropic's Messages API cannot carry (the mapping drops it silently)", tc.body, r.status)
				return
			}
			assertError(t, r, http.StatusBadRequest, inkwell.EINVALID)
			if !strings.Contains(string(r.body), "system") {
				t.Errorf("the refusal %s does not name the system message", r.body)
			}
			e.assertUnchanged(before)
		})
	}
}

// TestAccept_AnthropicMappingAcceptsWhatTheLaneSends: requests for a
// model served by Anthropic that the lane could send before accept ran
// the mapping are still accepted, 201: an assistant turn with content
// null and tool_calls, a system message whose content is an array of
// text parts, an empty system message, a final assistant turn of white
// space with tool_calls, and a prefill ending in white space. The
// prefill's white space is trimmed only in what is sent: the stored
// payload (and so the request hash) is the body as sent, and a re-send
// is 200 with the same job.
func TestAccept_AnthropicMappingAcceptsWhatTheLaneSends(t *testing.T) {
	t.Parallel()
	e := catalogEnv(t)
	const user = `{"role":"user","content":"hi"}`
	const tools = `"tools":[{"type":"function","function":{"name":"f"}}]`
	for _, tc := range []struct{ name, body string }{
		{"AssistantNullContentToolCalls", `{"model":"claude","messages":[` + user + `,
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"ok"}],` + tools + `}`},
		{"SystemTextPartsArray", `{"model":"claude","messages":[{"role":"system","content":[{"type":"text","text":"be brief"},{"type":"text","text":"in French"}]},` + user + `]}`},
		{"EmptySystemMessage", `{"model":"claude","messages":[{"role":"system","content":""},` + user + `]}`},
		{"FinalAssistantWhitespaceWithToolCalls", `{"model":"claude","messages":[` + user + `,
			{"role":"assistant","content":"  \n","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}],` + tools + `}`},
		{"PrefillTrailingWhitespace", `{"model":"claude","messages":[` + user + `,{"role":"assistant","content":"The answer is "}]}`},
		{"WhitespaceTurnBetween", `{"model":"claude","messages":[` + user + `,{"role":"assistant","content":" "},{"role":"user","content":"again"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "k-lane-sends-" + tc.name
			r := e.post(key, tc.body)
			if r.status != http.StatusCreated {
				t.Fatalf("POST %s\n= %d %s; want 201 (the mapping can send it)", tc.body, r.status, r.body)
			}
			job := e.storedJob(r.detail(t).Job.ID)
			if tc.name == "PrefillTrailingWhitespace" && !strings.Contains(string(job.Payload), `"The answer is "`) {
				t.Errorf("stored payload %s: want the prefill as sent (trimmed only when mapped)", job.Payload)
			}
			if again := e.post(key, tc.body); again.status != http.StatusOK || again.detail(t).Job.ID != job.ID {
				t.Errorf("re-send: %d %s; want 200 with job %d", again.status, again.body, job.ID)
			}
		})
	}
}

// TestAccept_AnthropicEmptyFinalUserTurnIsRefused: the accept side of
// provider's TestAnthropic_EmptyLastTurnIsNeverSentAsPrefill. A request
// for an Anthropic-served model whose last turn is a user turn with no
// content, if accepted (201, a job and a reservation written), would be
// sent as a prefill of the assistant's earlier reply: the model continues
// "Red." rather than answering. It must be 400 EINVALID naming the empty
// last turn, nothing written.
func TestAccept_AnthropicEmptyFinalUserTurnIsRefused(t *testing.T) {
	t.Parallel()
	e := catalogEnv(t)
	before := e.contents()
	body := `{"model":"claude","messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"Red."},{"role":"user","content":"  "}]}`
	r := e.post("k-empty-last-turn", body)
	if r.status != http.StatusBadRequest {
		t.Errorf("POST %s\n= %d %s\nwant 400 and nothing written: the mapping drops the empty last user turn and the request "+
			"becomes a prefill of the assistant's earlier reply", body, r.status, r.body)
		return
	}
	e.assertUnchanged(before)
}
