package inkwell

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(payload, &fields); err != nil || fields == nil {
		return Work{}, fmt.Errorf("payload is not a JSON object")
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
