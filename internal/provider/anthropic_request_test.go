package provider_test

// Chat-form requests whose mapping to the Messages API could lose meaning
// or produce a body the real Messages API refuses, checked on the body
// Inkwell sends (captureServer).

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

// sentMessages decodes the messages and system of the one request srv got.
func sentMessages(t *testing.T, srv *captureServer) (system json.RawMessage, msgs []struct {
	Role    string            `json:"role"`
	Content []json.RawMessage `json:"content"`
}, raw string) {
	t.Helper()
	body := srv.mustOneRequest(t).Body
	var sent struct {
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatalf("sent body %s: %v", body, err)
	}
	return sent.System, sent.Messages, string(body)
}

// TestAnthropic_EmptyTurnIsNotSentWithNullContent: an OpenAI conversation
// may hold an empty turn ("content": "", or "content": []): OpenAI takes
// it. The mapping drops the empty text (textBlock); were it to keep the
// message, its nil block slice would be marshalled as "content": null,
// and the Messages API refuses that body (content must be a string or a
// list, and "all messages must have non-empty content except for the
// optional final assistant message"): the job, accepted 201, would fail
// as rejected.
//
// What must happen: a turn with no block is left out (its neighbours, of
// one role, merged as appendMerged does), or the request is refused at
// accept saying which message is empty. Never a "content": null on the
// wire.
func TestAnthropic_EmptyTurnIsNotSentWithNullContent(t *testing.T) {
	t.Parallel()
	for name, chat := range map[string]string{
		"EmptyAssistantString": `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":""},{"role":"user","content":"again"}]}`,
		"EmptyUserParts":       `{"messages":[{"role":"user","content":[]},{"role":"assistant","content":"ok"},{"role":"user","content":"go on"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := startCapture(t, http.StatusOK, okMessage, nil)
			if _, err := mustAnthropic(t, srv.URL, 10*time.Second).Generate(context.Background(),
				inkwell.ProviderRequest{IdempotencyKey: "job-empty-turn", Chat: mustChat(t, chat)}); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			_, msgs, raw := sentMessages(t, srv)
			for i, m := range msgs {
				if len(m.Content) == 0 {
					t.Errorf("messages[%d] (%s) sent with no content block: %s\nthe Messages API refuses a message whose content is null or empty", i, m.Role, raw)
				}
			}
		})
	}
}

// TestAnthropic_WhitespaceOnlyTextBlockIsNotSent: a part of white space
// ("\n", " "), which OpenAI takes, must not become a text block of white
// space, which the Messages API refuses ("text content blocks must
// contain non-whitespace text"), as it would if textBlock skipped only the
// empty string.
//
// What must happen: a text part that is only white space is left out like
// an empty one (or refused at accept).
func TestAnthropic_WhitespaceOnlyTextBlockIsNotSent(t *testing.T) {
	t.Parallel()
	srv := startCapture(t, http.StatusOK, okMessage, nil)
	chat := mustChat(t, `{"messages":[{"role":"user","content":[{"type":"text","text":"Describe the cat."},{"type":"text","text":"\n"}]}]}`)
	if _, err := mustAnthropic(t, srv.URL, 10*time.Second).Generate(context.Background(), inkwell.ProviderRequest{Chat: chat}); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	_, msgs, raw := sentMessages(t, srv)
	for i, m := range msgs {
		for j, b := range m.Content {
			var block struct{ Type, Text string }
			_ = json.Unmarshal(b, &block)
			if block.Type == "text" && strings.TrimSpace(block.Text) == "" {
				t.Errorf("messages[%d].content[%d] is a text block of white space only (%q): %s\nthe Messages API refuses it", i, j, block.Text, raw)
			}
		}
	}
}

// TestAnthropic_FinalAssistantTrailingWhitespaceIsNotSent: a chat ending
// with an assistant message is sent as a Messages API prefill, and the
// Messages API refuses a final assistant turn ending in white space
// ("final assistant content cannot end with trailing whitespace"), so the
// mapping must not send it as written.
//
// What must happen: trim the trailing white space of the final assistant
// turn's last text block (what it continues from is the same), or refuse
// at accept.
func TestAnthropic_FinalAssistantTrailingWhitespaceIsNotSent(t *testing.T) {
	t.Parallel()
	srv := startCapture(t, http.StatusOK, okMessage, nil)
	chat := mustChat(t, `{"messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"The colour is "}]}`)
	if _, err := mustAnthropic(t, srv.URL, 10*time.Second).Generate(context.Background(), inkwell.ProviderRequest{Chat: chat}); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	_, msgs, raw := sentMessages(t, srv)
	last := msgs[len(msgs)-1]
	if last.Role != "assistant" || len(last.Content) == 0 {
		t.Fatalf("last message sent %s", raw)
	}
	var block struct{ Type, Text string }
	_ = json.Unmarshal(last.Content[len(last.Content)-1], &block)
	if block.Type == "text" && strings.TrimRight(block.Text, " \t\n\r") != block.Text {
		t.Errorf("final assistant turn sent ending in white space (%q): %s\nthe Messages API refuses it", block.Text, raw)
	}
}

// TestAnthropic_SystemImageIsNotSilentlyDropped: a system (or developer)
// message becomes the top-level system through ChatMessage.Text, which
// keeps its text parts only, and the top-level system of the Messages API
// takes text only. Sent that way, an image_url part of a system message
// would vanish without a word, and the model answer a question about an
// image it never saw (accept even reserves the image's max_image_tokens
// for it).
//
// What must happen: a system/developer message with a part that is not
// text is refused (unmappable, and at accept), never sent without it.
func TestAnthropic_SystemImageIsNotSilentlyDropped(t *testing.T) {
	t.Parallel()
	srv := startCapture(t, http.StatusOK, okMessage, nil)
	chat := mustChat(t, `{"messages":[{"role":"system","content":[{"type":"text","text":"Judge every answer against this chart:"},
		{"type":"image_url","image_url":{"url":"https://example.com/chart.png"}}]},{"role":"user","content":"Is 40 above the line?"}]}`)
	_, err := mustAnthropic(t, srv.URL, 10*time.Second).Generate(context.Background(), inkwell.ProviderRequest{Chat: chat})
	if err != nil {
		if ce, ok := provider.AsCallError(err); ok && ce.ErrorClass() == inkwell.ClassRejected && len(srv.requests()) == 0 {
			return // refused before sending: right
		}
		t.Fatalf("Generate: %v", err)
	}
	_, _, raw := sentMessages(t, srv)
	if !strings.Contains(raw, "chart.png") {
		t.Errorf("the system message's image was dropped without an error; sent: %s", raw)
	}
}

// TestAnthropic_UnmappableIsNeverSent: what the mapping refuses is a
// rejection (not billed) before any byte reaches Anthropic. The requests
// of TestAccept_UnmappableAnthropicRequestsAreRefused (internal/api)
// end here, in the worker, should one be stored.
func TestAnthropic_UnmappableIsNeverSent(t *testing.T) {
	t.Parallel()
	for name, chat := range map[string]string{
		"OnlySystem":     `{"messages":[{"role":"system","content":"be brief"}]}`,
		"CustomTool":     `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"custom","custom":{"name":"g"}}]}`,
		"ToolChoiceForm": `{"messages":[{"role":"user","content":"hi"}],"tool_choice":"whenever"}`,
		"ImageFTP":       `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x/a.png"}}]}]}`,
		"ImageNotBase64": `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,raw"}}]}]}`,
		"ArgsNotObject": `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]},
			{"role":"tool","tool_call_id":"c","content":"ok"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := startCapture(t, http.StatusOK, okMessage, nil)
			_, err := mustAnthropic(t, srv.URL, 10*time.Second).Generate(context.Background(), inkwell.ProviderRequest{Chat: mustChat(t, chat)})
			ce, ok := provider.AsCallError(err)
			if !ok || ce.ErrorClass() != inkwell.ClassRejected || ce.Reached || !ce.ErrorClass().NotBilled() {
				t.Errorf("Generate error %v; want a rejection, not reached, not billed", err)
			}
			if n := len(srv.requests()); n != 0 {
				t.Errorf("Anthropic got %d requests, want none", n)
			}
		})
	}
}
