package inkwell

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Work is a stored job payload read back: what to ask the provider, and
// who pays. A payload is in one of two forms: the chat form (an object
// with "messages") or the short form ({"prompt", "max_words"}), which is
// one user message to the default model.
type Work struct {
	Account string
	Chat    ChatRequest
	// Short is the short form's request; nil for the chat form. The
	// in-process sim and the price by the word read its prompt and words.
	Short *Request
}

// ReadPayload reads a job's payload in either form. The payload was
// checked when it was accepted; an error here is a row that was not
// written by accept (or an old one that reads otherwise).
func ReadPayload(payload []byte) (Work, error) {
	fields, ok := objectFields(payload)
	if !ok {
		if err := json.Unmarshal(payload, &fields); err != nil || fields == nil {
			return Work{}, fmt.Errorf("payload is not a JSON object")
		}
	}
	if _, chat := fields["messages"]; !chat {
		var r Request
		if err := json.Unmarshal(payload, &r); err != nil {
			return Work{}, fmt.Errorf("payload: %w", err)
		}
		return Work{Account: r.Account, Chat: r.Chat(), Short: &r}, nil
	}
	var w Work
	if raw, ok := fields["account"]; ok {
		if err := json.Unmarshal(raw, &w.Account); err != nil {
			return Work{}, fmt.Errorf("payload account: %w", err)
		}
	}
	delete(fields, "account")
	delete(fields, "metadata")
	c, err := ParseChat(fields)
	if err != nil {
		return Work{}, fmt.Errorf("payload: %w", err)
	}
	w.Chat = c
	return w, nil
}

// ChatPayload is what is stored for a chat-form request: its fields as
// sent, with the account that pays and the metadata, as one JSON object
// with its keys sorted, so the same body always hashes the same.
func ChatPayload(c ChatRequest, account string, metadata json.RawMessage) []byte {
	if b, ok := chatPayload(c, account, metadata); ok {
		return b
	}
	m := make(map[string]json.RawMessage, len(c.Fields)+2)
	for k, v := range c.Fields {
		m[k] = v
	}
	m["account"], _ = json.Marshal(account)
	if len(bytes.TrimSpace(metadata)) > 0 && string(metadata) != "null" {
		m["metadata"] = metadata
	}
	b, _ := json.Marshal(m) // keys sorted, values compacted
	return b
}

// chatPayload is ChatPayload's bytes written out directly, as json.Marshal
// of the map would write them: the names sorted, each value as given when
// json.Marshal would write it unchanged (compact, with nothing it
// escapes), else compacted and escaped as it does. ok is false for a
// name json.Marshal would escape, or a value that is not valid JSON:
// ChatPayload then marshals the map.
func chatPayload(c ChatRequest, account string, metadata json.RawMessage) ([]byte, bool) {
	acct, err := json.Marshal(account)
	if err != nil {
		return nil, false
	}
	withMeta := len(bytes.TrimSpace(metadata)) > 0 && string(metadata) != "null"
	names := make([]string, 0, len(c.Fields)+2)
	for k := range c.Fields {
		if k != "account" && (k != "metadata" || !withMeta) {
			names = append(names, k)
		}
	}
	names = append(names, "account")
	if withMeta {
		names = append(names, "metadata")
	}
	slices.Sort(names)
	values := make([]json.RawMessage, len(names))
	size := 1
	for i, k := range names {
		v := c.Fields[k]
		switch {
		case k == "account":
			v = acct
		case k == "metadata" && withMeta:
			v = metadata
		}
		end, compact := scanValue(v, 0, 0)
		switch {
		case !plainName(k) || end < 0 || end != len(v):
			return nil, false
		case !compact:
			var b bytes.Buffer
			if json.Compact(&b, v) != nil {
				return nil, false
			}
			var esc bytes.Buffer
			json.HTMLEscape(&esc, b.Bytes())
			v = esc.Bytes()
		}
		values[i] = v
		size += len(k) + len(v) + 4
	}
	b := make([]byte, 0, size)
	b = append(b, '{')
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, '"', ':')
		b = append(b, values[i]...)
	}
	return append(b, '}'), true
}

// plainName says whether json.Marshal writes the name k as it is, between
// quotes: UTF-8, with no byte it escapes (a quote, a backslash, a control
// character, <, > or &) and none that may start U+2028 or U+2029.
func plainName(k string) bool {
	for i := 0; i < len(k); i++ {
		if !strPlain[k[i]] {
			return false
		}
	}
	return utf8.ValidString(k)
}

// objectFields is ReadObject's members as json.Unmarshal into a map puts
// them (the last of a name sent twice wins); ok as ReadObject's.
func objectFields(body []byte) (map[string]json.RawMessage, bool) {
	members, ok := ReadObject(body)
	if !ok {
		return nil, false
	}
	fields := make(map[string]json.RawMessage, len(members))
	for _, m := range members {
		fields[m.Name] = m.Value
	}
	return fields, true
}

// ShortWords is the number of words the short form asks for: its
// max_words, DefaultMaxWords for 0 or less, at most MaxMaxWords.
func ShortWords(maxWords int) int {
	if maxWords <= 0 {
		return DefaultMaxWords
	}
	return min(maxWords, MaxMaxWords)
}

// Chat is the short form as a chat request: one user message, and
// max_tokens for its words (TokensPerWord each).
func (r Request) Chat() ChatRequest {
	msgs := []ChatMessage{{Role: "user", Content: mustJSON(r.Prompt)}}
	maxTokens := ShortWords(r.MaxWords) * TokensPerWord
	fields := map[string]json.RawMessage{"messages": mustJSON(msgs), "max_tokens": mustJSON(maxTokens)}
	if r.Model != "" {
		fields["model"] = mustJSON(r.Model)
	}
	return ChatRequest{Model: r.Model, Messages: msgs, MaxOutputTokens: maxTokens, Fields: fields}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
