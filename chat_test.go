package inkwell_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
)

// Tests of the chat form (docs/design.md §12): what ParseChat reads and
// refuses, the payload it is stored as and read back from, and the money
// a model's prices make of a request (Cost, WorstCase).

// mustFields is a JSON object's top-level members, as readJob hands them
// to ParseChat.
func mustFields(t *testing.T, body string) map[string]json.RawMessage {
	t.Helper()
	var f map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &f); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	return f
}

func mustParseChat(t *testing.T, body string) inkwell.ChatRequest {
	t.Helper()
	c, err := inkwell.ParseChat(mustFields(t, body))
	if err != nil {
		t.Fatalf("ParseChat(%s) = %v, want it accepted", body, err)
	}
	return c
}

func TestParseChat_FullParameterSet(t *testing.T) {
	t.Parallel()
	const body = `{
		"model": "gpt-4o-mini",
		"messages": [
			{"role": "system", "content": "Answer in one line."},
			{"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
			{"role": "user", "content": [{"type": "text", "text": "a haiku "}, {"type": "image_url", "image_url": {"url": "https://x/i.png"}}, {"type": "text", "text": "about ink"}]},
			{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{}"}}]},
			{"role": "tool", "tool_call_id": "call_1", "content": "ink is black"},
			{"role": "user", "content": "and now in French", "name": "ana"}
		],
		"max_tokens": 200,
		"max_completion_tokens": 200,
		"temperature": 0.7,
		"top_p": 0.9,
		"stop": ["\n\n", "END", "STOP", "###"],
		"seed": -42,
		"response_format": {"type": "json_schema", "json_schema": {"name": "h", "schema": {"type": "object"}}},
		"tools": [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}],
		"tool_choice": {"type": "function", "function": {"name": "look"}},
		"n": 1,
		"stream": false,
		"logprobs": true
	}`
	c := mustParseChat(t, body)
	temp, topP, seed := 0.7, 0.9, int64(-42)
	got := struct {
		Model                        string
		Roles                        []string
		MaxOutputTokens              int
		Temperature, TopP            *float64
		Stop                         []string
		Seed                         *int64
		ResponseFormat               string
		Tools, ToolChoice            string
		LastUserText, PartsText      string
		ToolCallID, Name             string
		ToolCalls                    bool
		Unknown                      []string
		FieldsKept                   int
		LogprobsKeptAsSent, StreamAs string
	}{
		Model: c.Model, MaxOutputTokens: c.MaxOutputTokens, Temperature: c.Temperature, TopP: c.TopP, Stop: c.Stop, Seed: c.Seed,
		ResponseFormat: c.ResponseFormat, Tools: compact(t, c.Tools), ToolChoice: compact(t, c.ToolChoice),
		LastUserText: c.LastUserText(), PartsText: c.Messages[2].Text(), ToolCallID: c.Messages[4].ToolCallID, Name: c.Messages[5].Name,
		ToolCalls: len(c.Messages[3].ToolCalls) > 0, Unknown: c.Unknown(), FieldsKept: len(c.Fields),
		LogprobsKeptAsSent: string(c.Fields["logprobs"]), StreamAs: string(c.Fields["stream"]),
	}
	for _, m := range c.Messages {
		got.Roles = append(got.Roles, m.Role)
	}
	want := got
	want.Model = "gpt-4o-mini"
	want.Roles = []string{"system", "developer", "user", "assistant", "tool", "user"}
	want.MaxOutputTokens = 200 // both named, the same
	want.Temperature, want.TopP, want.Seed = &temp, &topP, &seed
	want.Stop = []string{"\n\n", "END", "STOP", "###"}
	want.ResponseFormat = "json_schema"
	want.Tools = `[{"type":"function","function":{"name":"look","parameters":{"type":"object"}}}]`
	want.ToolChoice = `{"type":"function","function":{"name":"look"}}`
	want.LastUserText = "and now in French"
	want.PartsText = "a haiku about ink" // the text parts joined, the image left out
	want.ToolCallID, want.Name, want.ToolCalls = "call_1", "ana", true
	want.Unknown = []string{"logprobs"}
	want.FieldsKept = 14 // every member of the body, as sent
	want.LogprobsKeptAsSent, want.StreamAs = "true", "false"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseChat read (-want +got):\n%s", diff)
	}
}

// compact is raw without its white space, members in the order sent.
func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if raw == nil {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return b.String()
}

func TestParseChat_ContentAsStringAndAsParts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, content, want string }{
		{"String", `"hello there"`, "hello there"},
		{"EmptyString", `""`, ""},
		{"TextParts", `[{"type":"text","text":"hello "},{"type":"text","text":"there"}]`, "hello there"},
		{"ImageOnly", `[{"type":"image_url","image_url":{"url":"https://x/i.png"}}]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := mustParseChat(t, `{"messages":[{"role":"user","content":`+tc.content+`}]}`)
			if got := c.LastUserText(); got != tc.want {
				t.Errorf("LastUserText() = %q, want %q", got, tc.want)
			}
			if c.Model != "" || c.MaxOutputTokens != 0 || c.Temperature != nil || c.ResponseFormat != "" {
				t.Errorf("a request naming nothing else read as %+v, want every optional member unset", c)
			}
		})
	}
}

// TestParseChat_Refusals: each refusal is EINVALID and its message starts
// with the member it is about.
func TestParseChat_Refusals(t *testing.T) {
	t.Parallel()
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct{ name, body, field string }{
		{"NoMessages", `{"model":"m"}`, "messages"},
		{"NullMessages", `{"messages":null}`, "messages"},
		{"EmptyMessages", `{"messages":[]}`, "messages"},
		{"MessagesNotArray", `{"messages":{"role":"user","content":"hi"}}`, "messages"},
		{"BadRole", `{"messages":[{"role":"robot","content":"hi"}]}`, "messages[0].role"},
		{"BadRoleSecond", `{"messages":[{"role":"user","content":"hi"},{"role":"function","content":"x"}]}`, "messages[1].role"},
		{"ContentNumber", `{"messages":[{"role":"user","content":42}]}`, "messages[0].content"},
		{"ContentObject", `{"messages":[{"role":"user","content":{"text":"hi"}}]}`, "messages[0].content"},
		{"ContentMissing", `{"messages":[{"role":"user"}]}`, "messages[0].content"},
		{"ContentNullWithoutToolCalls", `{"messages":[{"role":"assistant","content":null}]}`, "messages[0].content"},
		{"PartWithoutType", `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, "messages[0].content"},
		{"PartsNotObjects", `{"messages":[{"role":"user","content":["hi"]}]}`, "messages[0].content"},
		{"ModelEmpty", `{"model":" ",` + msgs + `}`, "model"},
		{"ModelNumber", `{"model":4,` + msgs + `}`, "model"},
		{"N2", `{"n":2,` + msgs + `}`, "n"},
		{"N0", `{"n":0,` + msgs + `}`, "n"},
		{"StreamTrue", `{"stream":true,` + msgs + `}`, "stream"},
		{"Temperature3", `{"temperature":3,` + msgs + `}`, "temperature"},
		{"TemperatureNegative", `{"temperature":-0.1,` + msgs + `}`, "temperature"},
		{"TemperatureString", `{"temperature":"1",` + msgs + `}`, "temperature"},
		{"TopP2", `{"top_p":2,` + msgs + `}`, "top_p"},
		{"Stop5", `{"stop":["a","b","c","d","e"],` + msgs + `}`, "stop"},
		{"StopNumber", `{"stop":7,` + msgs + `}`, "stop"},
		{"SeedFraction", `{"seed":1.5,` + msgs + `}`, "seed"},
		{"ResponseFormatXML", `{"response_format":{"type":"xml"},` + msgs + `}`, "response_format"},
		{"ResponseFormatString", `{"response_format":"json_object",` + msgs + `}`, "response_format"},
		{"ToolsNotArray", `{"tools":{"type":"function"},` + msgs + `}`, "tools"},
		{"ToolChoiceNumber", `{"tool_choice":1,` + msgs + `}`, "tool_choice"},
		{"ToolChoiceArray", `{"tool_choice":["auto"],` + msgs + `}`, "tool_choice"},
		{"MaxTokens0", `{"max_tokens":0,` + msgs + `}`, "max_tokens"},
		{"MaxTokensNegative", `{"max_tokens":-5,` + msgs + `}`, "max_tokens"},
		{"MaxTokensFraction", `{"max_tokens":1.5,` + msgs + `}`, "max_tokens"},
		{"MaxTokensString", `{"max_tokens":"10",` + msgs + `}`, "max_tokens"},
		{"MaxCompletionTokens0", `{"max_completion_tokens":0,` + msgs + `}`, "max_completion_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := inkwell.ParseChat(mustFields(t, tc.body))
			if err == nil {
				t.Fatalf("ParseChat(%s) accepted, want a refusal naming %s", tc.body, tc.field)
			}
			if code := inkwell.ErrorCode(err); code != inkwell.EINVALID {
				t.Errorf("code %q, want %q", code, inkwell.EINVALID)
			}
			msg := inkwell.ErrorMessage(err)
			if !strings.HasPrefix(msg, tc.field+" ") {
				t.Errorf("message %q does not start with the field %q", msg, tc.field)
			}
		})
	}
}

// TestParseChat_AcceptsTheDefaults: members at the value that means
// "as if absent" are accepted.
func TestParseChat_AcceptsTheDefaults(t *testing.T) {
	t.Parallel()
	for _, extra := range []string{`"n":1`, `"n":null`, `"stream":false`, `"stream":null`, `"temperature":0`, `"temperature":2`,
		`"top_p":0`, `"top_p":1`, `"stop":"END"`, `"stop":[]`, `"seed":null`, `"tool_choice":"auto"`, `"tools":[]`,
		`"response_format":{"type":"text"}`, `"response_format":{"type":"json_object"}`, `"max_tokens":null`} {
		body := `{` + extra + `,"messages":[{"role":"user","content":"hi"}]}`
		if _, err := inkwell.ParseChat(mustFields(t, body)); err != nil {
			t.Errorf("ParseChat(%s) = %v, want it accepted", body, err)
		}
	}
}

func TestChatRequest_UnknownSorted(t *testing.T) {
	t.Parallel()
	c := mustParseChat(t, `{"zeta":1,"messages":[{"role":"user","content":"hi"}],"logit_bias":{},"model":"m","alpha":null,"user":"u","temperature":1}`)
	if diff := cmp.Diff([]string{"alpha", "logit_bias", "user", "zeta"}, c.Unknown()); diff != "" {
		t.Errorf("Unknown() (-want +got):\n%s", diff)
	}
	if got := mustParseChat(t, `{"messages":[{"role":"user","content":"hi"}],"n":1,"stream":false}`).Unknown(); len(got) != 0 {
		t.Errorf("Unknown() of known members only = %q, want none", got)
	}
}

// TestParseChat_OutputLimits: max_tokens and max_completion_tokens name
// one limit; a pair that disagrees is refused (a server may obey either,
// so neither can be the one checked and reserved), a null names none.
func TestParseChat_OutputLimits(t *testing.T) {
	t.Parallel()
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"max_tokens":100,"max_completion_tokens":100,` + msgs + `}`, 100},
		{`{"max_tokens":100,` + msgs + `}`, 100},
		{`{"max_completion_tokens":7,` + msgs + `}`, 7},
		{`{"max_tokens":100,"max_completion_tokens":null,` + msgs + `}`, 100},
		{`{"max_tokens":null,"max_completion_tokens":9,` + msgs + `}`, 9},
		{`{` + msgs + `}`, 0},
	} {
		if got := mustParseChat(t, tc.body).MaxOutputTokens; got != tc.want {
			t.Errorf("MaxOutputTokens of %s = %d, want %d", tc.body, got, tc.want)
		}
	}
	for _, body := range []string{
		`{"max_tokens":5000,"max_completion_tokens":10,` + msgs + `}`,
		`{"max_completion_tokens":10,"max_tokens":5000,` + msgs + `}`,
		`{"max_tokens":10,"max_completion_tokens":5000,` + msgs + `}`,
	} {
		_, err := inkwell.ParseChat(mustFields(t, body))
		if inkwell.ErrorCode(err) != inkwell.EINVALID || !strings.Contains(inkwell.ErrorMessage(err), "disagree") {
			t.Errorf("ParseChat(%s) = %v, want EINVALID naming the two limits that disagree", body, err)
		}
	}
}

// TestChatPayload_Deterministic: the same body, whatever its key order
// and white space, is stored as the same bytes (so it hashes the same),
// keys sorted, with the account that pays and the metadata.
func TestChatPayload_Deterministic(t *testing.T) {
	t.Parallel()
	a := mustParseChat(t, `{"model":"gpt-4o-mini","temperature":0.7,"messages":[{"role":"user","content":"hi"}],"zz":true}`)
	b := mustParseChat(t, "{\n  \"zz\" : true,\n  \"messages\" : [ {\"role\" : \"user\", \"content\" : \"hi\"} ],\n  \"temperature\" : 0.7,\n  \"model\" : \"gpt-4o-mini\"\n}")
	meta := json.RawMessage(`{"ticket": "T-1"}`)
	pa, pb := inkwell.ChatPayload(a, "acme", meta), inkwell.ChatPayload(b, "acme", meta)
	const want = `{"account":"acme","messages":[{"role":"user","content":"hi"}],"metadata":{"ticket":"T-1"},"model":"gpt-4o-mini","temperature":0.7,"zz":true}`
	if string(pa) != want {
		t.Errorf("ChatPayload = %s\nwant          %s", pa, want)
	}
	if string(pb) != string(pa) {
		t.Errorf("the same body in another order stored as %s, want %s", pb, pa)
	}
	if inkwell.RequestHash(pa) != inkwell.RequestHash(pb) {
		t.Errorf("hashes differ for the same body")
	}
	for i := range 20 { // map order is random in Go: any dependence on it shows within a few tries
		if p := inkwell.ChatPayload(a, "acme", meta); string(p) != want {
			t.Fatalf("try %d: ChatPayload = %s, want %s", i, p, want)
		}
	}
	for _, none := range []json.RawMessage{nil, json.RawMessage(`null`), json.RawMessage(``)} {
		const want = `{"account":"default","messages":[{"role":"user","content":"hi"}],"model":"gpt-4o-mini","temperature":0.7,"zz":true}`
		if p := inkwell.ChatPayload(a, "default", none); string(p) != want {
			t.Errorf("ChatPayload without metadata (%q) = %s, want %s", none, p, want)
		}
	}
	if p := inkwell.ChatPayload(a, "other", meta); string(p) == want {
		t.Errorf("another account stored the same payload %s", p)
	}
}

func TestReadPayload_ChatForm(t *testing.T) {
	t.Parallel()
	c := mustParseChat(t, `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"max_tokens":40,"top_p":0.5,"x_unknown":[1]}`)
	meta := json.RawMessage(`{"k":"v"}`)
	payload := inkwell.ChatPayload(c, "acme", meta)
	w, err := inkwell.ReadPayload(payload)
	if err != nil {
		t.Fatalf("ReadPayload(%s): %v", payload, err)
	}
	if w.Account != "acme" || w.Short != nil {
		t.Errorf("Work account %q short %+v, want acme and the chat form", w.Account, w.Short)
	}
	if _, ok := w.Chat.Fields["account"]; ok {
		t.Errorf("Fields keep account: %s", w.Chat.Fields["account"])
	}
	if _, ok := w.Chat.Fields["metadata"]; ok {
		t.Errorf("Fields keep metadata: %s", w.Chat.Fields["metadata"])
	}
	half := 0.5
	got := struct {
		Model     string
		Max       int
		TopP      *float64
		Last      string
		Unknown   []string
		NFields   int
		NMessages int
	}{w.Chat.Model, w.Chat.MaxOutputTokens, w.Chat.TopP, w.Chat.LastUserText(), w.Chat.Unknown(), len(w.Chat.Fields), len(w.Chat.Messages)}
	want := got
	want.Model, want.Max, want.TopP, want.Last, want.Unknown, want.NFields, want.NMessages = "gpt-4o-mini", 40, &half, "hi", []string{"x_unknown"}, 5, 2
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadPayload (-want +got):\n%s", diff)
	}
	// Stored again, it is the same payload: the round trip loses nothing.
	if again := inkwell.ChatPayload(w.Chat, w.Account, meta); string(again) != string(payload) {
		t.Errorf("payload read and stored again = %s, want %s", again, payload)
	}
}

func TestReadPayload_ShortForm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		payload   string
		prompt    string
		account   string
		maxTokens int
		model     string
	}{
		{`{"prompt":"x","account":"default","max_words":50}`, "x", "default", 100, ""},
		{`{"prompt":"a poem","account":"acme","max_words":7}`, "a poem", "acme", 14, ""},
		{`{"prompt":"a poem","account":"acme"}`, "a poem", "acme", inkwell.DefaultMaxWords * 2, ""},
		{`{"prompt":"a poem","account":"acme","max_words":99999}`, "a poem", "acme", inkwell.MaxMaxWords * 2, ""},
		{`{"prompt":"p","account":"acme","max_words":3,"model":"small"}`, "p", "acme", 6, "small"},
	} {
		w, err := inkwell.ReadPayload([]byte(tc.payload))
		if err != nil {
			t.Errorf("ReadPayload(%s): %v", tc.payload, err)
			continue
		}
		if w.Short == nil || w.Short.Prompt != tc.prompt {
			t.Errorf("ReadPayload(%s).Short = %+v, want the short form with prompt %q", tc.payload, w.Short, tc.prompt)
		}
		msgs, _ := json.Marshal(w.Chat.Messages)
		wantMsgs, _ := json.Marshal([]inkwell.ChatMessage{{Role: "user", Content: mustJSON(t, tc.prompt)}})
		if w.Account != tc.account || w.Chat.MaxOutputTokens != tc.maxTokens || w.Chat.Model != tc.model || string(msgs) != string(wantMsgs) {
			t.Errorf("ReadPayload(%s) = account %q, max tokens %d, model %q, messages %s; want %q, %d, %q, %s",
				tc.payload, w.Account, w.Chat.MaxOutputTokens, w.Chat.Model, msgs, tc.account, tc.maxTokens, tc.model, wantMsgs)
		}
		if got, want := string(w.Chat.Fields["max_tokens"]), mustJSON(t, tc.maxTokens); got != string(want) {
			t.Errorf("ReadPayload(%s) Fields max_tokens = %s, want %s", tc.payload, got, want)
		}
		if _, ok := w.Chat.Fields["account"]; ok {
			t.Errorf("ReadPayload(%s) Fields keep the account", tc.payload)
		}
	}
	for _, bad := range []string{`[1]`, `"x"`, `null`, `{"prompt":7}`, `not json`} {
		if _, err := inkwell.ReadPayload([]byte(bad)); err == nil {
			t.Errorf("ReadPayload(%s) accepted, want an error", bad)
		}
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestModel_Cost(t *testing.T) {
	t.Parallel()
	mini := inkwell.Model{InputMicrosPerMTok: 150_000, OutputMicrosPerMTok: 600_000}
	maxPrice := inkwell.Model{InputMicrosPerMTok: inkwell.MaxPriceMicrosPerMTok, OutputMicrosPerMTok: inkwell.MaxPriceMicrosPerMTok}
	for _, tc := range []struct {
		name    string
		m       inkwell.Model
		in, out int64
		want    int64
	}{
		{"OneTokenAtOneMicroRoundsUp", inkwell.Model{InputMicrosPerMTok: 1}, 1, 0, 1},
		{"OneOutputTokenAtOneMicro", inkwell.Model{OutputMicrosPerMTok: 1}, 0, 1, 1},
		{"Nothing", mini, 0, 0, 0},
		{"Unpriced", inkwell.Model{}, 1000, 1000, 0},
		{"AMillionEach", mini, 1_000_000, 1_000_000, 750_000},
		{"DocsExample", mini, 21, 17, 14}, // 13.35 micros, rounded up (docs/api.md)
		{"ExactMicro", mini, 20, 0, 3},    // 3.0: no rounding
		{"JustOver", inkwell.Model{InputMicrosPerMTok: 1_000_000, OutputMicrosPerMTok: 1}, 5, 1, 6},
		{"MaxTokensAtMaxPrice", inkwell.Model{InputMicrosPerMTok: inkwell.MaxPriceMicrosPerMTok}, 1 << 32, 0, 8_589_934_592_000},
		{"BothAtMaxPriceSumPastInt64", maxPrice, 1 << 32, 1 << 32, 17_179_869_184_000}, // each product near 2^63, their sum past it: divided first, exact
		{"TooManyIn", mini, 1<<32 + 1, 0, math.MaxInt64},
		{"TooManyOut", mini, 0, 1<<32 + 1, math.MaxInt64},
		{"NegativeIn", mini, -1, 5, math.MaxInt64},
		{"NegativeOut", mini, 5, -1, math.MaxInt64},
		{"MaxInt64Tokens", mini, math.MaxInt64, math.MaxInt64, math.MaxInt64},
	} {
		if got := tc.m.Cost(tc.in, tc.out); got != tc.want {
			t.Errorf("%s: Cost(%d, %d) at %d/%d = %d, want %d", tc.name, tc.in, tc.out, tc.m.InputMicrosPerMTok, tc.m.OutputMicrosPerMTok, got, tc.want)
		}
	}
}

// TestModel_CostNeverOverflowsWhenRoundingUp: counts and prices within
// their bounds (at most 2^32 tokens, at most MaxPriceMicrosPerMTok) whose
// products sum to just under math.MaxInt64. The sum fits; adding the
// rounding's 999,999 must not wrap it negative. 1,532,540,863 (7 × 337 ×
// 649,657) divides 2^63-1, and 4,294,967,296 + 1,723,385,793 tokens at
// that price make exactly 2^63-1 millionths of a micro.
func TestModel_CostNeverOverflowsWhenRoundingUp(t *testing.T) {
	t.Parallel()
	const price = 1_532_540_863
	if price > inkwell.MaxPriceMicrosPerMTok {
		t.Fatalf("price %d is over MaxPriceMicrosPerMTok", int64(price))
	}
	m := inkwell.Model{InputMicrosPerMTok: price, OutputMicrosPerMTok: price}
	in, out := int64(1<<32), int64(1_723_385_793)
	got := m.Cost(in, out)
	// 2^63-1 millionths, rounded up: 9,223,372,036,855 micros. MaxInt64
	// (the "impossible" cost) would also never undercharge.
	if got != 9_223_372_036_855 && got != math.MaxInt64 {
		t.Errorf("Cost(%d, %d) at %d/%d = %d, want 9223372036855 (or math.MaxInt64): the rounding overflowed", in, out, int64(price), int64(price), got)
	}
}

func TestChatRequest_InputBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		want int
	}{
		// 2 + ("model" 5 + `"gpt"` 5 + 4) + ("messages" 8 + 32 + 4)
		{`{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`, 60},
		{`{"model":"gpt","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`, 77},
	} {
		c := mustParseChat(t, tc.body)
		if got := c.InputBytes(); got != tc.want {
			t.Errorf("InputBytes of %s = %d, want %d", tc.body, got, tc.want)
		}
		// It is never less than the body as JSON (a token covers at least a byte).
		if body, _ := json.Marshal(c.Fields); c.InputBytes() < len(body) {
			t.Errorf("InputBytes of %s = %d, less than the body's %d bytes", tc.body, c.InputBytes(), len(body))
		}
	}
}

func TestModel_WorstCase(t *testing.T) {
	t.Parallel()
	m := inkwell.Model{Name: "gpt-4o-mini", InputMicrosPerMTok: 150_000, OutputMicrosPerMTok: 600_000, MaxOutputTokens: 16384}
	for _, tc := range []struct {
		body  string
		bound int
		want  int64
	}{
		// ceil((77 × 150,000 + 100 × 600,000) / 10^6) = ceil(71.55)
		{`{"model":"gpt","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`, 100, 72},
		// no limit of its own: the model's 16,384. ceil((60 × 150,000 + 16,384 × 600,000) / 10^6) = ceil(9,839.4)
		{`{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`, 16384, 9840},
	} {
		c := mustParseChat(t, tc.body)
		if got := m.OutputBound(c); got != tc.bound {
			t.Errorf("OutputBound of %s = %d, want %d", tc.body, got, tc.bound)
		}
		wc := m.WorstCase(c)
		if wc != tc.want {
			t.Errorf("WorstCase of %s = %d, want %d", tc.body, wc, tc.want)
		}
		if want := m.Cost(int64(c.InputBytes()), int64(tc.bound)); wc != want {
			t.Errorf("WorstCase = %d, want Cost(InputBytes %d, bound %d) = %d", wc, c.InputBytes(), tc.bound, want)
		}
	}
	// Every usage a provider can report for it (prompt tokens at most its
	// bytes, completion tokens at most its bound) costs at most the worst case.
	small := inkwell.Model{InputMicrosPerMTok: 333_333, OutputMicrosPerMTok: 777_777, MaxOutputTokens: 50}
	c := mustParseChat(t, `{"messages":[{"role":"user","content":"a few words"}],"max_tokens":40}`)
	wc := small.WorstCase(c)
	for in := int64(0); in <= int64(c.InputBytes()); in++ {
		for out := int64(0); out <= 40; out++ {
			if cost := small.Cost(in, out); cost > wc {
				t.Fatalf("usage %d+%d costs %d, more than the worst case %d", in, out, cost, wc)
			}
		}
	}
}

// TestModel_WorstCaseCountsImages: each image part (image_url) adds the
// model's ImageTokens to the worst case, however its type is spelled
// (an escape in JSON), in any message; text parts and string contents
// add nothing. An image a URL names is a few bytes of request and
// thousands of tokens of input: counted by its bytes alone, its answer
// would be capped below what the provider bills.
func TestModel_WorstCaseCountsImages(t *testing.T) {
	t.Parallel()
	m := inkwell.Model{InputMicrosPerMTok: 1_000_000, OutputMicrosPerMTok: 1_000_000, MaxOutputTokens: 10, ImageTokens: 1445}
	const img = `{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}`
	for _, tc := range []struct {
		name   string
		body   string
		images int
	}{
		{"string content", `{"messages":[{"role":"user","content":"image_url"}],"max_tokens":10}`, 0},
		{"text parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"image_url"}]}],"max_tokens":10}`, 0},
		{"one image", `{"messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},` + img + `]}],"max_tokens":10}`, 1},
		{"two messages, three images", `{"messages":[{"role":"user","content":[` + img + `,` + img + `]},{"role":"assistant","content":"a cat"},{"role":"user","content":[` + img + `]}],"max_tokens":10}`, 3},
		{"type spelled with an escape", `{"messages":[{"role":"user","content":[{"type":"image\u005furl","image_url":{"url":"https://example.com/a.png"}}]}],"max_tokens":10}`, 1},
	} {
		c := mustParseChat(t, tc.body)
		if got := c.ImageParts(); got != tc.images {
			t.Errorf("%s: ImageParts = %d, want %d", tc.name, got, tc.images)
		}
		// At a million micros a million tokens, a token costs one micro.
		want := int64(c.InputBytes()) + int64(tc.images)*1445 + 10
		if got := m.WorstCase(c); got != want {
			t.Errorf("%s: WorstCase = %d, want bytes %d + %d images × 1,445 + 10 = %d", tc.name, got, c.InputBytes(), tc.images, want)
		}
	}
}

// TestModel_InputBoundStopsAtTheContextWindow: a model's InputTokens
// (max_input_tokens, its context window: the provider refuses a longer
// prompt, so never bills one) caps the input bound, and is the bound of a
// request with a part nothing else sizes (a file the provider stores, an
// unknown type, however its type is spelled). Without it such a part
// counts its bytes only, as before; text, refusal and image parts are
// never unsized.
func TestModel_InputBoundStopsAtTheContextWindow(t *testing.T) {
	t.Parallel()
	const (
		img  = `{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}`
		file = `{"type":"file","file":{"file_id":"file-abc"}}`
	)
	for _, tc := range []struct {
		name    string
		body    string
		unsized int
		images  int
	}{
		{"string content", `{"messages":[{"role":"user","content":"a file"}]}`, 0, 0},
		{"text and refusal parts, one spelled with an escape", `{"messages":[{"role":"user","content":[{"type":"t\u0065xt","text":"file"}]},{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]}]}`, 0, 0},
		{"a file the provider stores", `{"messages":[{"role":"user","content":[{"type":"text","text":"sum it up"},` + file + `]}]}`, 1, 0},
		{"a file spelled with an escape", `{"messages":[{"role":"user","content":[{"type":"f\u0069le","file":{"file_id":"file-abc"}}]}]}`, 1, 0},
		{"audio and a type Inkwell does not know", `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},{"type":"video_url","video_url":{"url":"https://example.com/v.mp4"}}]}]}`, 2, 0},
		{"forty images", `{"messages":[{"role":"user","content":[` + strings.Repeat(img+",", 39) + img + `]}]}`, 0, 40},
		{"an image and a file in one message", `{"messages":[{"role":"user","content":[` + img + `,` + file + `]}]}`, 1, 1},
		{"an assistant's audio the provider stores", `{"messages":[{"role":"assistant","content":"ok","audio":{"id":"audio_abc"}},{"role":"user","content":"go on"}]}`, 1, 0},
		{"an answer sent back as an SDK writes it", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello","refusal":null,"audio":null,"function_call":null,"tool_calls":null,"annotations":[]},{"role":"user","content":"go on"}]}`, 0, 0},
		{"message fields sized by their bytes", `{"messages":[{"role":"assistant","content":null,"refusal":"no","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","name":"f","content":"1"}]}`, 0, 0},
	} {
		c := mustParseChat(t, tc.body)
		if got := c.UnsizedInputs(); got != tc.unsized {
			t.Errorf("%s: UnsizedInputs = %d, want %d", tc.name, got, tc.unsized)
		}
		sized := int64(c.InputBytes()) + int64(tc.images)*1445
		open := inkwell.Model{ImageTokens: 1445}
		if got := open.InputBound(c); got != sized {
			t.Errorf("%s, no context window: InputBound = %d, want bytes and images %d", tc.name, got, sized)
		}
		for _, window := range []int64{sized - 1, sized, 50_000} {
			want := min(sized, window)
			if tc.unsized > 0 {
				want = window
			}
			m := inkwell.Model{ImageTokens: 1445, InputTokens: window}
			if got := m.InputBound(c); got != want {
				t.Errorf("%s, window %d: InputBound = %d, want %d (bytes and images %d)", tc.name, window, got, want, sized)
			}
		}
	}
}

// TestParseChat_RefusesAFieldNamedTwice: a message or a content part that
// names one field twice, in any case or spelling the decoder reads as one
// (an escape, a Unicode case fold such as the Kelvin sign's K), is
// refused: the provider is sent it as written and may read the other one,
// so what Inkwell counts (a text part) and what the provider bills (a
// file) would differ. One of each name passes.
func TestParseChat_RefusesAFieldNamedTwice(t *testing.T) {
	t.Parallel()
	many := ""
	for i := range 20 {
		many += fmt.Sprintf(`"x%d":1,`, i)
	}
	for _, tc := range []struct{ name, body, says string }{
		{"part type in another case", `{"messages":[{"role":"user","content":[{"type":"file","Type":"text","file":{"file_id":"f"}}]}]}`, `messages[0].content part 0 names field "Type" twice (as "type" and "Type"`},
		{"part type twice", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","type":"file"}]}]}`, `part 1 names field "type" twice`},
		{"part type spelled with an escape", `{"messages":[{"role":"user","content":[{"t\u0079pe":"text","type":"file"}]}]}`, `part 0 names field "type" twice`},
		{"part field with the Kelvin sign, past sixteen names", `{"messages":[{"role":"user","content":[{` + many + `"type":"text","text":"a","\u212Aey":1,"key":2}]}]}`, `part 0 names field "key" twice`},
		{"message content in another case", `{"messages":[{"role":"user","content":"hi","CONTENT":[{"type":"file","file":{"file_id":"f"}}]}]}`, `messages[0] names field "CONTENT" twice`},
		{"message role twice", `{"messages":[{"role":"system","content":"hi","role":"user"}]}`, `messages[0] names field "role" twice`},
		{"message field unknown to Inkwell, twice", `{"messages":[{"role":"assistant","content":"ok","audio":{"id":"a"},"Audio":null}]}`, `messages[0] names field "Audio" twice`},
	} {
		_, err := inkwell.ParseChat(mustFields(t, tc.body))
		if inkwell.ErrorCode(err) != inkwell.EINVALID || !strings.Contains(inkwell.ErrorMessage(err), tc.says) {
			t.Errorf("%s: ParseChat = %v; want EINVALID saying %q", tc.name, err, tc.says)
		}
	}
	c := mustParseChat(t, `{"messages":[{"role":"user","content":[{"type":"text","text":"a","Text2":"b"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}],"name":"ana"}]}`)
	if len(c.Messages) != 1 || c.ImageParts() != 1 {
		t.Errorf("a request naming each field once: %+v", c)
	}
}

// TestReadMessages_ManyNamesGoToTheDecoder: the one-pass reader checks a
// message's names pairwise for a repeat, so it reads only messages of a
// few names and leaves the rest to the decoder's path, whose check goes
// by map. Pairwise over every name, a message of 90,000 names (under
// 1 MiB) took 14 s of CPU to accept and again at each attempt.
func TestReadMessages_ManyNamesGoToTheDecoder(t *testing.T) {
	t.Parallel()
	message := func(names int) string {
		m := `{"role":"user","content":"hi"`
		for i := range names - 2 {
			m += fmt.Sprintf(`,"x%d":0`, i)
		}
		return m + "}"
	}
	if _, ok := inkwell.ReadMessages([]byte("[" + message(8) + "]")); !ok {
		t.Errorf("a message of 8 names is left to the decoder; want it read in one pass")
	}
	if _, ok := inkwell.ReadMessages([]byte("[" + message(9) + "]")); ok {
		t.Errorf("a message of 9 names is read in one pass (pairwise); want it left to the decoder")
	}
	// The decoder's path reads it, and still refuses a repeat past 16 names.
	many := `{"messages":[` + message(5000) + `]}`
	if c := mustParseChat(t, many); len(c.Messages) != 1 || c.Messages[0].Role != "user" {
		t.Fatalf("a message of 5,000 names: %+v", c.Messages)
	}
	twice := `{"messages":[` + strings.TrimSuffix(message(5000), "}") + `,"X17":1}]}`
	if _, err := inkwell.ParseChat(mustFields(t, twice)); inkwell.ErrorCode(err) != inkwell.EINVALID || !strings.Contains(inkwell.ErrorMessage(err), `"X17" twice`) {
		t.Errorf("a repeat among 5,000 names: %v; want EINVALID naming X17", err)
	}
}

// TestParseChat_KnownNameInAnotherCaseIsItsOwnField: ParseChat reads the
// top-level fields by their exact names (what the accept refuses in
// another case is internal/api's: refuseKnownNameInAnotherCase).
func TestParseChat_KnownNameInAnotherCaseIsItsOwnField(t *testing.T) {
	t.Parallel()
	c := mustParseChat(t, `{"messages":[{"role":"user","content":"hi"}],"Max_Tokens":5}`)
	if c.MaxOutputTokens != 0 || len(c.Unknown()) != 1 || c.Unknown()[0] != "Max_Tokens" {
		t.Errorf("Max_Tokens read as %d, unknown %v; want it an unknown field of its own", c.MaxOutputTokens, c.Unknown())
	}
}
