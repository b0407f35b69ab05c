package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/inkwell/inkwell"
)

// The one-pass read of a job body (inkwell.ReadObject, the messages read
// in ParseChat, ChatPayload written directly, a batch line read by
// readBatchLine) must end exactly where encoding/json's reading ends: the
// same members, the same messages, the same stored payload byte for byte,
// the same refusal. Each check below holds the one-pass result against
// encoding/json's (or the code as it was before, kept here as reference)
// on a corpus of bodies, and under `go test -fuzz` on any bytes.

// equivCorpus: bodies of every shape the readers meet, valid or not.
var equivCorpus = []string{
	`{}`, ` { } `, "\t{\"messages\":[]}\r\n", `{"messages":null}`, `{"messages":[null]}`, `{"messages":{}}`,
	`{"messages":[{"role":"user","content":"hi"}]}`,
	`{"messages":[{"role":"user","content":"hi"}],"prompt":"p"}`,
	`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Answer in one line."},{"role":"user","content":"a haiku about ink"}],"temperature":0.7,"max_completion_tokens":200,"metadata":{"ticket":"T-1"}}`,
	"{ \"metadata\": {\"ticket\": \"T-1\"}, \"max_completion_tokens\": 200,\n \"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"model\": \"m\" }",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"<b>a & b</b> \u2028 \u2029 \u2027 \u2030 \\u003c \\\"q\\\" \\/ \\n \\\\\"}],\"user\":\"<u>\"}",
	`{"messages":[{"role":"user","content":[{"type":"text","text":"x < y"},{"type":"image_url","image_url":{"url":"data:,"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{"b":1,"a":[]}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
	`{"messages":[{"role":"user","content":"hi"}],"temperature":null,"zz":[1, 2, {"a" : "b"}],"top_p":0.50,"max_tokens":100,"x":-0.5e-3,"y":1E+2,"stop":["\n","END"]}`,
	`{"\u006dodel":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"messages":[{"role":"user","content":"hi"}],"a<b>&c":1,"é":"ü","\u2028":2}`,
	`{"account":"acme","messages":[{"role":"user","content":"hi"}],"metadata":null}`,
	`{"account":null,"messages":[{"role":"user","content":"hi"}],"metadata":{"k": "v" , "j":"w"}}`,
	`{"account":5,"messages":[{"role":"user","content":"hi"}]}`,
	`{"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1"}]},{"role":"tool","tool_call_id":"c1","content":"5 C"}],"response_format":{"type":"json_object"},"seed":7,"n":1,"stream":false}`,
	`{"messages":[{"role":"user","content":"héllo 日本 😀 \ud83d\ude00","name":"Zoë"}]}`,
	`{"messages":[{"Role":"user","CONTENT":"hi","extra":{"x":[true,false,null]}}]}`,
	`{"messages":[{"role":"user","role":"system","content":"a","content":"b","tool_calls":null}]}`,
	`{"messages":[{"role":"us\u0065r","content":"hi"}]}`, `{"messages":[{"role":null,"content":"hi"}]}`,
	`{"messages":[{"role":5,"content":"hi"}]}`, `{"messages":[{"role":"user","content":5}]}`,
	`{"messages":[{"role":"user","content":"hi","tool_call_\u0069d":"x"}]}`, `{"messages":[{"role":"user","content":"hi","ſtop":1}]}`,
	`{"messages":[{"role":"user","content":"hi"}],"messages":[]}`, `{"model":"","messages":{}}`, `{"messages":[],"Messages":[]}`,
	`{"prompt":"a haiku about ink","max_words":20}`, `{"prompt":"x","Prompt":"y"}`, `{"prompt":"x","zz":1}`,
	`{"max_words":7,"account":"acme","prompt":"a poem <b> & \u2028","model":"gpt-4o-mini"}`,
	`{"messages":[{"role":"user","content":"hi"}]} x`, `{"messages":[{"role":"user","content":"hi"}]}}`,
	`{"messages":[{"role":"user","content":"hi"},]}`, `{"messages":[{"role":"user","content":"hi"}],}`,
	`{"messages":[{"role":"user","content":"h` + "\x01" + `i"}]}`, `{"messages":[{"role":"user","content":"\x"}]}`,
	`{"messages":[{"role":"user","content":"\u12"}]}`, `{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":1e}`, `{"a":.5}`, `{"a":+1}`,
	`{"a":tru}`, `{"a":nul}`, `{"a":[1 2]}`, `{"a" "b"}`, `{"a":1 "b":2}`, `{a:1}`, `[{"a":1}]`, `"a"`, `12`, `null`, ``, `{`,
	"{\"a\":\"\xff\"}", "{\"\xff\":1}", `{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	strings.Repeat(`{"a":`, 1200) + `1` + strings.Repeat(`}`, 1200),
	`{"messages":[{"role":"user","content":"hi"}],"metadata":{"a":"` + strings.Repeat("x", 600) + `"}}`,
	// Others: fields a message carries beside ChatMessage's, in one pass and by the decoder (a name in another case)
	`{"messages":[{"role":"assistant","content":"x","refusal":null,"audio":{"id":"a1"},"annotations":[ ],"function_call":""},{"role":"user","content":"y"}]}`,
	`{"messages":[{"role":"assistant","Content":"x","refusal":"no","audio":{},"zz":null,"yy":[1]}]}`,
	`{"messages":[{"role":"user","content":"x","a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8}]}`,
}

func TestOnePassRead_AgreesWithEncodingJSON(t *testing.T) {
	for _, body := range equivCorpus {
		checkOnePass(t, []byte(body))
	}
	for _, tc := range pinnedHashes {
		checkOnePass(t, []byte(tc.body))
	}
}

func FuzzOnePassRead(f *testing.F) {
	for _, body := range equivCorpus {
		f.Add([]byte(body))
	}
	f.Fuzz(checkOnePass)
}

func checkOnePass(t *testing.T, body []byte) {
	checkReadObject(t, body)
	checkParseChat(t, body)
	checkReadJob(t, body)
	checkBatchLine(t, body)
	checkReadPayload(t, body)
}

// checkReadPayload: ReadPayload reads a stored payload as it did when it
// decoded it with encoding/json (refReadPayload).
func checkReadPayload(t *testing.T, payload []byte) {
	got, err1 := inkwell.ReadPayload(payload)
	want, err2 := refReadPayload(payload)
	if fmt.Sprint(err1) != fmt.Sprint(err2) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: ReadPayload read %+v (%v), want %+v (%v)", payload, got, err1, want, err2)
	}
}

// refReadPayload is ReadPayload as it was before it read a payload in one
// pass.
func refReadPayload(payload []byte) (inkwell.Work, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(payload, &fields); err != nil || fields == nil {
		return inkwell.Work{}, fmt.Errorf("payload is not a JSON object")
	}
	if _, chat := fields["messages"]; !chat {
		var r inkwell.Request
		if err := json.Unmarshal(payload, &r); err != nil {
			return inkwell.Work{}, fmt.Errorf("payload: %w", err)
		}
		return inkwell.Work{Account: r.Account, Chat: r.Chat(), Short: &r}, nil
	}
	var w inkwell.Work
	if raw, ok := fields["account"]; ok {
		if err := json.Unmarshal(raw, &w.Account); err != nil {
			return inkwell.Work{}, fmt.Errorf("payload account: %w", err)
		}
	}
	delete(fields, "account")
	delete(fields, "metadata")
	c, err := inkwell.ParseChat(fields)
	if err != nil {
		return inkwell.Work{}, fmt.Errorf("payload: %w", err)
	}
	w.Chat = c
	return w, nil
}

// checkReadObject: what ReadObject reads, encoding/json reads the same.
func checkReadObject(t *testing.T, body []byte) {
	members, ok := inkwell.ReadObject(body)
	var decoded map[string]json.RawMessage
	err := json.Unmarshal(body, &decoded)
	if !ok {
		return
	}
	if err != nil || decoded == nil {
		t.Fatalf("%q: ReadObject read %d members, json.Unmarshal: %v", body, len(members), err)
	}
	names := keysByDecoder(body, len(body))
	if len(names) != len(members) {
		t.Fatalf("%q: ReadObject read %d members, the decoder %d", body, len(members), len(names))
	}
	fields := map[string]json.RawMessage{}
	for i, m := range members {
		if string(names[i]) != m.Name {
			t.Fatalf("%q: member %d is %q, the decoder's %q", body, i, m.Name, names[i])
		}
		if cap(m.Value) != len(m.Value) {
			t.Fatalf("%q: member %q's value has room past its end: an append would write into the body", body, m.Name)
		}
		fields[m.Name] = m.Value
	}
	if !reflect.DeepEqual(fields, decoded) {
		t.Fatalf("%q: ReadObject read %q, json.Unmarshal %q", body, fields, decoded)
	}
}

// checkParseChat: ParseChat's messages are json.Unmarshal's, and
// ChatPayload writes what the map marshalled wrote (refChatPayload).
func checkParseChat(t *testing.T, body []byte) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil || fields == nil {
		return
	}
	c, err := inkwell.ParseChat(fields)
	if raw, ok := fields["messages"]; ok && string(raw) != "null" && !strings.HasPrefix(inkwell.ErrorMessage(err), "model ") { // model is read first
		var want []inkwell.ChatMessage
		switch uerr := json.Unmarshal(raw, &want); {
		case uerr != nil && !strings.HasPrefix(inkwell.ErrorMessage(err), "messages must be an array"):
			t.Fatalf("%q: json.Unmarshal refuses the messages (%v), ParseChat: %v", body, uerr, err)
		case uerr == nil && !reflect.DeepEqual(withoutOthers(c.Messages), want):
			t.Fatalf("%q: ParseChat read messages %+v, json.Unmarshal %+v", body, c.Messages, want)
		case uerr == nil && err == nil:
			checkOthers(t, body, raw, c.Messages)
		}
	}
	if err != nil {
		return
	}
	for _, account := range []string{"", "acme", "a<b>&\u2028"} {
		for _, meta := range []json.RawMessage{nil, json.RawMessage("null"), fields["metadata"], json.RawMessage(" {\"a\" : \"<b>\"} "), json.RawMessage("{\"a\":1}")} {
			got, want := inkwell.ChatPayload(c, account, meta), refChatPayload(c, account, meta)
			if !bytes.Equal(got, want) {
				t.Fatalf("%q: ChatPayload(%q, %q) =\n%s\nwant\n%s", body, account, meta, got, want)
			}
		}
	}
}

// withoutOthers is msgs as encoding/json decodes them: Others is the
// parser's own record (json:"-").
func withoutOthers(msgs []inkwell.ChatMessage) []inkwell.ChatMessage {
	out := slices.Clone(msgs)
	for i := range out {
		out[i].Others = nil
	}
	return out
}

// checkOthers: each message's Others, as ParseChat read them (in one
// pass or by the decoder), are its fields that are not ChatMessage's in
// any case and not null, each with whether it is empty: as a map decode of
// the message says, whichever path read it.
func checkOthers(t *testing.T, body []byte, raw json.RawMessage, msgs []inkwell.ChatMessage) {
	var each []map[string]json.RawMessage
	if json.Unmarshal(raw, &each) != nil || len(each) != len(msgs) {
		return
	}
	known := []string{"role", "content", "name", "tool_calls", "tool_call_id"}
	for i, fields := range each {
		var want []string
		for name, v := range fields {
			v = bytes.TrimSpace(v)
			if string(v) == "null" || slices.ContainsFunc(known, func(k string) bool { return strings.EqualFold(k, name) }) {
				continue
			}
			compact := string(bytes.Join(bytes.Fields(v), nil))
			want = append(want, fmt.Sprintf("%s empty=%t", name, compact == `""` || compact == "[]" || compact == "{}"))
		}
		var got []string
		for _, f := range msgs[i].Others {
			got = append(got, fmt.Sprintf("%s empty=%t", f.Name, f.Empty))
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%q: messages[%d].Others = %v, want %v", body, i, got, want)
		}
	}
}

// refChatPayload is ChatPayload as it was written before it wrote its
// bytes itself: the map, marshalled.
func refChatPayload(c inkwell.ChatRequest, account string, metadata json.RawMessage) []byte {
	m := make(map[string]json.RawMessage, len(c.Fields)+2)
	for k, v := range c.Fields {
		m[k] = v
	}
	m["account"], _ = json.Marshal(account)
	if len(bytes.TrimSpace(metadata)) > 0 && string(metadata) != "null" {
		m["metadata"] = metadata
	}
	b, _ := json.Marshal(m)
	return b
}

// checkReadJob: readJob ends as readJobDecoded (encoding/json's read) does.
func checkReadJob(t *testing.T, body []byte) {
	r := httptest.NewRequest(http.MethodPost, "/v1/jobs", nil)
	w1, p1, err1 := readJob(r, body)
	w2, p2, err2 := readJobDecoded(r, body)
	if inkwell.ErrorCode(err1) != inkwell.ErrorCode(err2) || inkwell.ErrorMessage(err1) != inkwell.ErrorMessage(err2) {
		t.Fatalf("%q: readJob: %v; readJobDecoded: %v", body, err1, err2)
	}
	if !bytes.Equal(p1, p2) || !reflect.DeepEqual(w1, w2) {
		t.Fatalf("%q: readJob read %+v, payload %s; readJobDecoded %+v, payload %s", body, w1, p1, w2, p2)
	}
}

// checkBatchLine: a line readBatchLine reads, decodeBatchLine reads the
// same; body is put in a line as the body member, and is tried as a line.
func checkBatchLine(t *testing.T, body []byte) {
	for _, line := range [][]byte{body, []byte(`{"custom_id":"c-1","method":"POST","url":"/v1/jobs","body":` + string(body) + `}`)} {
		in1, ok, err1 := readBatchLine(line)
		if !ok {
			continue
		}
		in2, err2 := decodeBatchLine(line)
		if inkwell.ErrorMessage(err1) != inkwell.ErrorMessage(err2) || !reflect.DeepEqual(in1, in2) {
			t.Fatalf("%q: readBatchLine read %+v (%v), decodeBatchLine %+v (%v)", line, in1, err1, in2, err2)
		}
	}
}

// TestOnePassRead_ReadsTheCommonBodies: the bodies clients send are read
// in one pass (not left to encoding/json), messages included: a message's
// content is a slice of the body, not a copy.
func TestOnePassRead_ReadsTheCommonBodies(t *testing.T) {
	for _, tc := range pinnedHashes {
		if strings.Contains(tc.name, "escape") {
			continue
		}
		body := []byte(tc.body)
		members, ok := inkwell.ReadObject(body)
		if !ok {
			t.Errorf("%s: ReadObject did not read it", tc.name)
			continue
		}
		fields := map[string]json.RawMessage{}
		for _, m := range members {
			fields[m.Name] = m.Value
		}
		if _, chat := fields["messages"]; !chat || strings.Contains(tc.name, "case-folded") {
			continue
		}
		c, err := inkwell.ParseChat(fields)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		start, end := uintptr(unsafe.Pointer(unsafe.SliceData(body))), uintptr(unsafe.Pointer(unsafe.SliceData(body)))+uintptr(len(body))
		for i, m := range c.Messages {
			if p := uintptr(unsafe.Pointer(unsafe.SliceData(m.Content))); len(m.Content) > 0 && (p < start || p >= end) {
				t.Errorf("%s: message %d's content is a copy, not read in one pass", tc.name, i)
			}
		}
		line := []byte(`{"custom_id":"c","method":"POST","url":"/v1/jobs","body":` + tc.body + `}`)
		if _, ok, _ := readBatchLine(line); !ok {
			t.Errorf("%s: readBatchLine did not read it as a line's body", tc.name)
		}
	}
}
