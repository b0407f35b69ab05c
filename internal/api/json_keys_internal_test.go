package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// BenchmarkDecodeRequest is the cost of reading POST /v1/jobs' body, with
// the duplicate-key check, for a short prompt and one at the 8 KiB limit
// (docs/benchmarks.md, "Reading a request body").
func BenchmarkDecodeRequest(b *testing.B) {
	for _, size := range []int{40, 8 << 10} {
		body := []byte(`{"prompt":"` + strings.Repeat("p", size) + `","account":"acme","max_words":50}`)
		b.Run(map[int]string{40: "prompt=40B", 8 << 10: "prompt=8KiB"}[size], func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := decodeRequest(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(map[int]string{40: "prompt=40B", 8 << 10: "prompt=8KiB"}[size]+"/duplicate-check-only", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if err := refuseDuplicateKeys(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// topLevelKeysCorpus holds bodies whose names the scan must read as the
// decoder does: strings holding quotes, braces and backslashes, nested
// values, numbers, white space, Unicode.
var topLevelKeysCorpus = []string{
	`{}`, ` { } `, `{"prompt":"x"}`, `{"prompt":"a \"quoted\" {brace} [x] \\ back","account":"acme","max_words":50}`,
	`{"a":{"b":{"c":[1,2,{"d":"}"}]}},"e":[],"f":{},"g":null,"h":true,"i":false,"j":-1.5e3}`,
	"{\n\t\"prompt\" :\r\n \"x\" ,\n \"Prompt\":\"y\"}", `{"prömpt":"é","PRÖMPT":"É"}`, `{"k":"\u00e9"}`,
	`{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9,"10":10}`, `[{"a":1}]`, `"a"`, `12`, `{"a":[{"b":"]"}],"a":1}`,
}

func TestTopLevelKeys_AgreeWithTheDecoder(t *testing.T) {
	for _, body := range topLevelKeysCorpus {
		checkTopLevelKeys(t, []byte(body))
	}
}

func FuzzTopLevelKeys(f *testing.F) {
	for _, body := range topLevelKeysCorpus {
		f.Add([]byte(body))
	}
	f.Add([]byte(`{"a":"unterminated`))
	f.Add([]byte(`{"a":[1,2`))
	f.Add([]byte(`{"\u0061":1,"a":2}`))
	f.Fuzz(checkTopLevelKeys)
}

// checkTopLevelKeys: on valid JSON whose names have no escapes, the scan
// finds the names the decoder finds; on anything, it returns without
// reading past the body (a panic fails the test).
func checkTopLevelKeys(t *testing.T, body []byte) {
	scanned, escaped := topLevelKeys(body, maxKeysChecked)
	if !json.Valid(body) || escaped {
		return
	}
	decoded := keysByDecoder(body, maxKeysChecked)
	if len(scanned) != len(decoded) {
		t.Fatalf("%q: scan found %q, decoder %q", body, scanned, decoded)
	}
	for i := range scanned {
		if !bytes.Equal(scanned[i], decoded[i]) {
			t.Fatalf("%q: scan found %q, decoder %q", body, scanned, decoded)
		}
	}
}
