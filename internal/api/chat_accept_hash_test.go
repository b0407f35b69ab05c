package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
)

// A re-send of a stored request must hash as it did when it was stored:
// the payload a body normalizes to, and so its request hash, must not
// drift when the way the body is read changes. The hashes below were
// computed by the code as it was before the chat accept path read a body
// in one pass (commit d9ade9e); each body is read as POST /v1/jobs reads
// it (no token: the body's account pays) and as a batch line carries it.

// pinnedChat2KiB is a 2 KiB chat request as the benchmarks send it.
var pinnedChat2KiB = `{"model":"sim-1","messages":[{"role":"system","content":"You are a careful assistant for a small bookshop. Answer in plain English, in at most three short paragraphs."},{"role":"user","content":"` +
	strings.Repeat("Please write a short description of the fountain pen inks we sell, their colours and how quickly they dry. ", 16) +
	`"}],"temperature":0.7,"max_completion_tokens":256}`

var pinnedHashes = []struct{ name, body, hash string }{
	{"chat 2 KiB", pinnedChat2KiB, "49a595adfa5816c22471c8735ca738c30f593eee370c0a336080636bf22cf29c"},
	{"chat with metadata", `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Answer in one line."},{"role":"user","content":"a haiku about ink"}],"temperature":0.7,"max_completion_tokens":200,"metadata":{"ticket":"T-1"}}`, "70964bbc86c18d5c5d5ca3cc40df0645713dbfa8ae64cdb8535aaddc602c20cd"},
	{"chat reordered and spaced", "{ \"metadata\": {\"ticket\": \"T-1\"}, \"max_completion_tokens\": 200, \"temperature\": 0.7,\n" +
		" \"messages\": [{\"role\": \"system\", \"content\": \"Answer in one line.\"}, {\"role\": \"user\", \"content\": \"a haiku about ink\"}], \"model\": \"gpt-4o-mini\" }", "70964bbc86c18d5c5d5ca3cc40df0645713dbfa8ae64cdb8535aaddc602c20cd"},
	{"chat pretty-printed", "{\n\t\"messages\" : [\n\t\t{ \"role\" : \"user\" , \"content\" : \"hi\" }\n\t] ,\r\n\t\"seed\" : 42\n}\n", "a3d6dd85273ce648506c9a64d531b0826cc8bd48539e616f596b1d950cac97d9"},
	{"chat HTML and line separators", "{\"messages\":[{\"role\":\"user\",\"content\":\"<b>a & b</b> \u2028 \u2029 \\u003c \\u2028 \\\"q\\\" \\/ \\n \\t \\\\\"}],\"user\":\"<u>\"}", "99ebad2e02dac1fd50da5a84b82bae267dfe430a95384479f9b22197b6cfae6c"},
	{"chat escaped HTML in nested value", `{"messages":[{"role":"user","content":[{"type":"text","text":"x < y && y > z"}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"number"}}}}}],"tool_choice":"auto"}`, "555ba433610ec1b125d730ac38300c007023914dc29b6b031e0d03dfa1fcf8e0"},
	{"chat unknown members and nulls", `{"messages":[{"role":"user","content":"hi"}],"temperature":null,"zz":[1, 2, {"a" : "b"}],"logprobs":true,"user":"u-1","top_p":0.50,"max_tokens":100,"frequency_penalty":-1.5E-1,"stop":["\n","END"]}`, "70995f19662e55b410476012ab738f8c0be6a84b17a4d84cbfb26e16a4aed0c6"},
	{"chat name with an escape", `{"\u006dodel":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, "0ca09f9d59039861002cb7a2aeaab31bc87a9643759020919e8fe4034f1b6800"},
	{"chat name with HTML", `{"messages":[{"role":"user","content":"hi"}],"a<b>&c":1,"é":"ü"}`, "227498a3f1d4f9c94dfd1656f72573434441736562187954c16a85ef0cb5ac55"},
	{"chat account in body", `{"account":"acme","messages":[{"role":"user","content":"hi"}],"metadata":null}`, "e9331dab77e63440d1e5a7004ee8515548e25965b54d3dc47b4be03edeafbad3"},
	{"chat account null", `{"account":null,"messages":[{"role":"user","content":"hi"}],"metadata":{"k": "v" , "j":"w"}}`, "6ebaad2b4bee00152b5d9ca763f16cb394068a404d9bedc2897410edd308af29"},
	{"chat tool calls", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{\"city\":\"Oslo\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"5 C"}],"response_format":{"type":"json_object"},"seed":7,"n":1,"stream":false}`, "a1da2d5bc14dc7c017e2b31030cf8e20220984e0c7ec5ddf8b303e13f3a27744"},
	{"chat non-ASCII", `{"messages":[{"role":"user","content":"héllo 日本 😀 \ud83d\ude00","name":"Zoë"}],"model":"gpt-4o-mini"}`, "d0781f18fb3f2347d71f69ee514261d0e1680134d809cb243145b3e69dd1e67c"},
	{"chat case-folded message fields", `{"messages":[{"Role":"user","CONTENT":"hi","extra":{"x":[true,false,null]}}]}`, "8c4ed32d597dec751c18e03ce5763884043f62dba4a7b2b2acf13909e6f50e32"},
	{"short", `{"prompt":"a haiku about ink","max_words":20}`, "020fb771cd1b9d29b0968acd6ee3760acac31abc0b043ff06b6de8d6dd44a603"},
	{"short with account and model", `{"max_words":7,"account":"acme","prompt":"a poem <b> & \u2028","model":"gpt-4o-mini"}`, "5b95b615b1798e505793e82b3388bd7a7be7c26535c8b1cf031680c948bd9a57"},
	{"short spaced", "{ \"prompt\" : \"x\\ny\" }\n", "e687fe21856aa5e5d3c7d67f4a855f3032753f6f58fa4b802ec8a329548ea299"},
}

func TestRequestHash_PinnedForKnownBodies(t *testing.T) {
	for _, tc := range pinnedHashes {
		r := httptest.NewRequest(http.MethodPost, "/v1/jobs", nil)
		_, payload, err := readJob(r, []byte(tc.body))
		if err != nil {
			t.Errorf("%s: readJob refused it: %v", tc.name, err)
			continue
		}
		if got := inkwell.RequestHash(payload); got != tc.hash {
			t.Errorf("%s: request hash %s, want %s (payload %s)", tc.name, got, tc.hash, payload)
		}
		line := `{"custom_id":"c","method":"POST","url":"/v1/jobs","body":` + tc.body + `}`
		l, _, _, err := parseBatchLine(r, []byte(strings.TrimSpace(line)), "")
		if err != nil {
			t.Errorf("%s: as a batch line: %v", tc.name, err)
			continue
		}
		if l.RequestHash != tc.hash {
			t.Errorf("%s: as a batch line, request hash %s, want %s (payload %s)", tc.name, l.RequestHash, tc.hash, l.Payload)
		}
	}
}
