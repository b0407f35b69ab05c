package api

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/inkwell/inkwell"
)

// maxKeysChecked bounds the keys refuseDuplicateKeys compares (each with
// every one before it): an object with more distinct names than the
// largest request has fields (4: a batch line) holds an unknown one, which
// the decoder refuses. So past it nothing is left to find, and a body of
// thousands of keys costs no more than one of eight.
const maxKeysChecked = 8

// refuseDuplicateKeys refuses an object that names one field twice. Go's
// decoder keeps the last value and matches names without regard to case,
// so {"account": "a", "Account": "b"} would be read as account b while a
// proxy, a log line or a client library that reads the first saw a: a
// body that means two things to two readers is refused, not guessed at
// (who pays is decided from it). Only the top level is read: no field of
// a request holds an object. A body that is not an object, or not JSON,
// passes: the decoder says what is wrong with it.
func refuseDuplicateKeys(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var seen []string
	for dec.More() && len(seen) < maxKeysChecked {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		key, ok := t.(string)
		if !ok {
			return nil
		}
		for _, k := range seen {
			if strings.EqualFold(k, key) {
				return inkwell.Errorf(inkwell.EINVALID, "field %q appears twice in one object (as %q and %q; names are matched without regard to case): send each field once", key, k, key)
			}
		}
		seen = append(seen, key)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return nil
		}
	}
	return nil
}
