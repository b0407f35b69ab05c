package inkwell

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
)

// A message or a content part goes to an OpenAI-compatible provider as it
// was sent, while Inkwell reads it with encoding/json, which matches names
// without regard to case and keeps the last of two. So a part
// {"type": "file", "Type": "text"} would be a text part to Inkwell (sized
// by its bytes, reserved as such) and a file to the provider (billed for
// its pages): a request that means two things to two readers is refused,
// as a body's top level is (internal/api, refuseDuplicateKeys).

// objectNames is the member names of the JSON object v, escapes resolved as
// the decoder resolves them; ok is false when v is not an object.
func objectNames(v []byte) (names [][]byte, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(v))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return names, false
		}
		name, _ := tok.(string)
		names = append(names, []byte(name))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return names, false
		}
	}
	return names, true
}

// SameFieldTwice finds two names the decoder reads as one field (names are
// matched without regard to case, as bytes.EqualFold has it). Names are
// few: compared pairwise, with no allocation; past 16, through a map.
// The one check of names twice, at a body's top level (internal/api) and
// in each message and part.
func SameFieldTwice(names [][]byte) (first, second []byte, found bool) {
	if len(names) <= 16 {
		for i, name := range names {
			for _, earlier := range names[:i] {
				if bytes.EqualFold(earlier, name) {
					return earlier, name, true
				}
			}
		}
		return nil, nil, false
	}
	seen := make(map[string][]byte, len(names))
	for _, name := range names {
		f := foldName(name)
		if earlier, ok := seen[f]; ok {
			return earlier, name, true
		}
		seen[f] = name
	}
	return nil, nil, false
}

// foldName is a name in a form two names share when bytes.EqualFold says
// they are equal: each rune mapped to the least of its case-folding orbit
// (so ſ and s, the Kelvin sign and k, fold alike).
func foldName(b []byte) string {
	var out strings.Builder
	for _, r := range string(b) {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		out.WriteRune(least)
	}
	return out.String()
}

// refuseFieldTwice refuses the object v when it names one field twice.
// what names the object in the error ("messages[2]", "part 0").
func refuseFieldTwice(v []byte, what string) error {
	names, ok := objectNames(v)
	if !ok {
		return nil // not an object: the caller's decode says what is wrong
	}
	if a, b, found := SameFieldTwice(names); found {
		return Errorf(EINVALID, "%s names field %q twice (as %q and %q; names are matched without regard to case, and a provider may read the other one): send each field once", what, b, a, b)
	}
	return nil
}

// sizedMessageFields are the message fields whose tokens their bytes
// bound (text, or JSON carried as text). Any other field of a message
// (OpenAI's assistant "audio": {"id"} names an answer's audio stored at
// the provider, billed as input) is sized by nothing: UnsizedInputs.
var sizedMessageFields = []string{"role", "content", "name", "tool_calls", "tool_call_id", "refusal", "function_call", "annotations"}
