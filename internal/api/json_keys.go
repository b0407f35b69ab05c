package api

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/inkwell/inkwell"
)

// maxKeysChecked bounds the names refuseDuplicateKeys reads, so its cost
// stays bounded whatever a body holds: a chat request (which passes fields
// Inkwell does not know to its provider) with more is refused (readChat),
// and the short form refuses any field it does not know.
const maxKeysChecked = 256

// refuseDuplicateKeys refuses an object that names one field twice. Go's
// decoder keeps the last value and matches names without regard to case,
// so {"account": "a", "Account": "b"} would be read as account b while a
// proxy, a log line or a client library that reads the first saw a: a
// body that means two things to two readers is refused, not guessed at
// (who pays is decided from it). Only the top level is read. A body that
// is not an object, or not JSON, passes: the decoder says what is wrong
// with it.
//
// The names are found by a scan of the bytes (topLevelKeys), a fraction of
// a decode's cost; a name written with escapes (\u0070rompt is prompt)
// is read by the decoder instead (keysByDecoder), as Go would read it.
func refuseDuplicateKeys(body []byte) error { return refuseDuplicates(topLevelNames(body)) }

// topLevelNames is the names of the first maxKeysChecked members of the
// object body, read by the scan, or by the decoder when a name has escapes.
func topLevelNames(body []byte) [][]byte {
	keys, escaped := topLevelKeys(body, maxKeysChecked)
	if escaped {
		keys = keysByDecoder(body, maxKeysChecked)
	}
	return keys
}

// refuseDuplicates refuses names of which two are one field
// (inkwell.SameFieldTwice).
func refuseDuplicates(keys [][]byte) error {
	if k, key, found := inkwell.SameFieldTwice(keys); found {
		return inkwell.Errorf(inkwell.EINVALID, "field %q appears twice in one object (as %q and %q; names are matched without regard to case): send each field once", key, k, key)
	}
	return nil
}

// hasName says whether names holds name: exactly, or (fold) as the
// decoder matches names, without regard to case.
func hasName(names [][]byte, name string, fold bool) bool {
	for _, n := range names {
		if string(n) == name || fold && bytes.EqualFold(n, []byte(name)) {
			return true
		}
	}
	return false
}

// topLevelKeys returns the names of the first max members of the JSON
// object b, as written, or what it found before b stopped being an object
// it can read (the decoder then says why). escaped reports a name with a
// backslash or invalid UTF-8 in it, which only a decoder reads right. It never reads past
// b, whatever b holds.
func topLevelKeys(b []byte, max int) (keys [][]byte, escaped bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i++
	for len(keys) < max {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return keys, false
		}
		end, esc := stringEnd(b, i)
		if end < 0 {
			return keys, false
		}
		key := b[i+1 : end-1]
		if esc || !utf8.Valid(key) {
			return keys, true // the decoder resolves escapes, and reads bad UTF-8 as U+FFFD
		}
		keys = append(keys, key)
		if i = skipSpace(b, end); i >= len(b) || b[i] != ':' {
			return keys, false
		}
		if i = valueEnd(b, i+1); i < 0 {
			return keys, false
		}
		if i = skipSpace(b, i); i >= len(b) || b[i] != ',' {
			return keys, false
		}
		i++
	}
	return keys, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the string that opens at b[i] (a
// quote), -1 when it does not end; esc reports a backslash inside.
func stringEnd(b []byte, i int) (end int, esc bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			esc = true
			j++ // the escaped byte (of \uXXXX, the u: the rest holds no quote)
		case '"':
			return j + 1, esc
		}
	}
	return -1, esc
}

// valueEnd is the index just past the value that starts at or after b[i]
// (after white space), -1 when it does not end.
func valueEnd(b []byte, i int) int {
	i = skipSpace(b, i)
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := stringEnd(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := stringEnd(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for ; j < len(b); j++ { // a number, true, false or null
		if c := b[j]; c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			break
		}
	}
	if j == i {
		return -1
	}
	return j
}

// keysByDecoder returns the names of the first max members of the JSON
// object body as Go's decoder reads them (escapes resolved).
func keysByDecoder(body []byte, max int) [][]byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys [][]byte
	for dec.More() && len(keys) < max {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		key, ok := t.(string)
		if !ok {
			return keys
		}
		keys = append(keys, []byte(key))
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
	}
	return keys
}
