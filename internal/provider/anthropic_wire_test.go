package provider_test

// The Anthropic Messages mapping against the real wire format
// (platform.claude.com/docs: Messages API reference, "Handling stop
// reasons", "How to implement tool use").

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inkwell/inkwell"
)

// toolTurnThenTextChat is the OpenAI tool loop as every OpenAI client writes
// it: the assistant calls a tool, the tool answers, and the user adds a
// line of text after the tool's answer.
const toolTurnThenTextChat = `{"model":"claude-x","max_tokens":200,"messages":[
	{"role":"user","content":"Calculate the sum of 1234 and 5678"},
	{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_123","type":"function","function":{"name":"calculator","arguments":"{\"a\":1234,\"b\":5678}"}}]},
	{"role":"tool","tool_call_id":"toolu_123","content":"6912"},
	{"role":"user","content":"Here's the result"}],
	"tools":[{"type":"function","function":{"name":"calculator","parameters":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}}}]}`

// TestAnthropic_EmptyEndTurnAnswerIsAnAnswer: Anthropic documents ("Handling
// stop reasons", "Empty responses with end_turn") that Claude sometimes
// answers with no content at all, stop_reason end_turn and 2-3 output
// tokens, "particularly after tool results", and names as the common cause
// text placed right after a tool_result in the user turn: exactly what
// Inkwell's merge of a tool message and the next user message sends. That
// answer is a successful, billed Messages API answer (it has an id and a
// usage): no text, finish_reason stop, the usage kept for the charge. It
// used to be refused as malformed, so the job failed, nothing was charged
// and its reservation stayed open until an operator released it.
func TestAnthropic_EmptyEndTurnAnswerIsAnAnswer(t *testing.T) {
	t.Parallel()
	const empty = `{"id":"msg_01EmptyTurn","type":"message","role":"assistant","model":"claude-x","content":[],
		"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":812,"output_tokens":3}}`
	srv := startCapture(t, http.StatusOK, empty, nil)
	p := mustAnthropic(t, srv.URL, 10*time.Second)

	got, err := p.Generate(context.Background(), inkwell.ProviderRequest{IdempotencyKey: "job-empty", Chat: mustChat(t, toolTurnThenTextChat)})

	// What was sent is the shape Anthropic's page names as the cause: the
	// last user turn is a tool_result followed by text.
	var sent struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
			} `json:"content"`
		} `json:"messages"`
	}
	if jerr := json.Unmarshal(srv.mustOneRequest(t).Body, &sent); jerr != nil {
		t.Fatal(jerr)
	}
	last := sent.Messages[len(sent.Messages)-1]
	var types []string
	for _, b := range last.Content {
		types = append(types, b.Type)
	}
	t.Logf("last turn sent: %s %v (text right after tool_result)", last.Role, types)

	if err != nil {
		t.Fatalf("a documented, billed Messages API answer (id msg_01EmptyTurn, 812 input + 3 output tokens, content [], end_turn) "+
			"was refused: %v; the job fails as malformed, is charged nothing, and its reservation stays open although the provider billed the call", err)
	}
	if !got.Usage || got.PromptTokens != 812 || got.CompletionTokens != 3 || got.Text != "" || got.FinishReason != "stop" || got.RequestID != "msg_01EmptyTurn" {
		t.Errorf("answer %+v; want no text, finish stop, usage 812+3 kept for the charge", got)
	}
}

// TestAnthropic_SystemMessagesAnywhereAndMerges (a system message after the
// first turn): system and developer messages
// anywhere in the conversation go to the top-level system, in order; the
// turns around a removed system message, being of one role, are merged
// into one (the Messages API wants the roles to alternate); consecutive
// assistant messages merge too.
func TestAnthropic_SystemMessagesAnywhereAndMerges(t *testing.T) {
	t.Parallel()
	srv := startCapture(t, http.StatusOK, okMessage, nil)
	p := mustAnthropic(t, srv.URL, 10*time.Second)
	chat := mustChat(t, `{"model":"m","messages":[
		{"role":"system","content":"A"},
		{"role":"user","content":"u1"},
		{"role":"system","content":[{"type":"text","text":"B"}]},
		{"role":"user","content":"u2"},
		{"role":"assistant","content":"a1"},
		{"role":"developer","content":"C"},
		{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]},
		{"role":"user","content":[{"type":"text","text":""},{"type":"text","text":"u3"}]}]}`)
	if _, err := p.Generate(context.Background(), inkwell.ProviderRequest{Chat: chat}); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	body := mustJSONValue(t, srv.mustOneRequest(t).Body).(map[string]any)
	want := mustJSONValue(t, []byte(`{"system":"A\n\nB\n\nC","messages":[
		{"role":"user","content":[{"type":"text","text":"u1"},{"type":"text","text":"u2"}]},
		{"role":"assistant","content":[{"type":"text","text":"a1"},{"type":"text","text":"no"}]},
		{"role":"user","content":[{"type":"text","text":"u3"}]}]}`)).(map[string]any)
	for _, f := range []string{"system", "messages"} {
		if diff := cmp.Diff(want[f], body[f]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", f, diff)
		}
	}
}

// TestAnthropic_ToolCallsRoundTrip: a tool_use answer
// becomes chat tool_calls, and those tool_calls sent back (with a null
// content, as SDKs send them) become the same tool_use blocks, id and
// input object unchanged, with the tool's answer (an image among it) a
// tool_result for that id.
func TestAnthropic_ToolCallsRoundTrip(t *testing.T) {
	t.Parallel()
	const answer = `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[
		{"type":"tool_use","id":"toolu_01A","name":"lookup","input":{"q":"ß \"quoted\"","n":[1,2]}}],
		"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5}}`
	srv := startCapture(t, http.StatusOK, answer, nil)
	p := mustAnthropic(t, srv.URL, 10*time.Second)
	got, err := p.Generate(context.Background(), inkwell.ProviderRequest{Chat: mustChat(t, `{"messages":[{"role":"user","content":"look it up"}]}`)})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	var completion struct {
		Choices []struct {
			Message json.RawMessage `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(got.Response, &completion); err != nil || len(completion.Choices) != 1 || got.FinishReason != "tool_calls" {
		t.Fatalf("completion %s, finish %q: %v", got.Response, got.FinishReason, err)
	}
	msgs := `[{"role":"user","content":"look it up"},` + string(completion.Choices[0].Message) +
		`,{"role":"tool","tool_call_id":"toolu_01A","content":[{"type":"text","text":"found"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]`
	srv2 := startCapture(t, http.StatusOK, okMessage, nil)
	if _, err := mustAnthropic(t, srv2.URL, 10*time.Second).Generate(context.Background(),
		inkwell.ProviderRequest{Chat: mustChat(t, `{"messages":`+msgs+`}`)}); err != nil {
		t.Fatalf("Generate with the tool calls sent back (%s): %v", msgs, err)
	}
	body := mustJSONValue(t, srv2.mustOneRequest(t).Body).(map[string]any)
	want := mustJSONValue(t, []byte(`[
		{"role":"user","content":[{"type":"text","text":"look it up"}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01A","name":"lookup","input":{"q":"ß \"quoted\"","n":[1,2]}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A","content":[{"type":"text","text":"found"},
			{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}]`))
	if diff := cmp.Diff(want, body["messages"]); diff != "" {
		t.Errorf("messages sent back (-want +got):\n%s", diff)
	}
}

// TestAnthropic_StopReasonsOfTheReference (pause_turn and
// model_context_window_exceeded among them): every
// stop_reason the Messages API reference lists maps to a finish_reason.
func TestAnthropic_StopReasonsOfTheReference(t *testing.T) {
	t.Parallel()
	for stop, want := range map[string]string{"end_turn": "stop", "max_tokens": "length", "stop_sequence": "stop", "tool_use": "tool_calls",
		"pause_turn": "stop", "refusal": "content_filter", "model_context_window_exceeded": "length"} {
		srv := startCapture(t, http.StatusOK, `{"id":"msg_1","type":"message","content":[{"type":"text","text":"w"}],"stop_reason":"`+stop+`","usage":{"input_tokens":1,"output_tokens":1}}`, nil)
		got, err := mustAnthropic(t, srv.URL, 10*time.Second).Generate(context.Background(), inkwell.ProviderRequest{Prompt: "p"})
		if err != nil || got.FinishReason != want {
			t.Errorf("stop_reason %s: finish %q, %v; want %q", stop, got.FinishReason, err, want)
		}
	}
}

// TestAnthropic_CacheTokensChargedAtTheInputPrice documents how
// Anthropic's cache counts are charged: as prompt tokens at the model's
// one input price. Anthropic bills a cache write at 1.25x (5 m) or 2x
// (1 h) the input price and a read at 0.1x, so the charge is below the
// bill for writes; but Inkwell sends no cache_control (neither on a block
// nor at the top level: an unknown member is refused at accept), so no
// request of Inkwell's can make a cache write.
func TestAnthropic_CacheTokensChargedAtTheInputPrice(t *testing.T) {
	t.Parallel()
	srv := startCapture(t, http.StatusOK, okMessage, nil)
	chat := mustChat(t, `{"messages":[{"role":"system","content":[{"type":"text","text":"big","cache_control":{"type":"ephemeral"}}]},
		{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}`)
	if _, err := mustAnthropic(t, srv.URL, 10*time.Second).Generate(context.Background(), inkwell.ProviderRequest{Chat: chat}); err != nil {
		t.Fatal(err)
	}
	if b := srv.mustOneRequest(t).Body; bytes.Contains(b, []byte("cache_control")) {
		t.Errorf("request sent %s: a cache_control reached Anthropic, which bills cache writes above the input price Inkwell charges", b)
	}
}
