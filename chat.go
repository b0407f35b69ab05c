package inkwell

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// ChatRequest is a job's work in the chat form (docs/design.md §12): an
// OpenAI chat-completions request. The typed fields are the ones Inkwell
// reads; Fields keeps every top-level field of the body as it was sent
// (Inkwell's own account and metadata removed), which is what an
// OpenAI-compatible provider is sent, unchanged but for the model's name.
type ChatRequest struct {
	Model    string        // the model the client named; "" is the default model
	Messages []ChatMessage // at least one
	// MaxOutputTokens is max_completion_tokens or max_tokens (a request
	// naming both must name the same number); 0 when it names neither (the
	// model's max_output_tokens applies).
	MaxOutputTokens int
	Temperature     *float64
	TopP            *float64
	Stop            []string
	Seed            *int64
	ResponseFormat  string          // "", "text", "json_object" or "json_schema"
	Tools           json.RawMessage // an array of tools, as sent
	ToolChoice      json.RawMessage // a string or an object, as sent
	Fields          map[string]json.RawMessage
}

// ChatMessage is one message of a chat request. Content is a string, an
// array of parts, or null (an assistant message that only calls tools).
type ChatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	// Others are the message's other fields that are not null (an
	// assistant's "refusal" or "audio", a legacy "function_call"), as
	// ParseChat read them: what a provider that cannot carry them must
	// refuse, and what sizes nothing (UnsizedInputs). Never written.
	Others []MessageField `json:"-"`
}

// MessageField is a message field ChatMessage has no place for.
type MessageField struct {
	Name  string
	Empty bool // "", [] or {}: it says nothing (an SDK sends an answer back as it came)
}

// TokensPerWord is how the short form's max_words becomes max_tokens: two
// tokens a word leaves a real model room to finish (English runs about
// 1.3 a word), and the simulator writes max_tokens/TokensPerWord words.
const TokensPerWord = 2

// Limits on the chat form, enforced before anything is written.
const (
	MaxChatBodyBytes = 1 << 20 // one request, as POST /v1/jobs or a batch line carries it
	MaxMessages      = 4096
	MaxOutputLimit   = 1 << 24 // the most max_tokens may ask for: far above any model's, and a bound every price can be multiplied by
)

// ChatRoles are the message roles a chat request may use.
var ChatRoles = []string{"system", "developer", "user", "assistant", "tool"}

// ChatFields are the top-level fields of the chat form Inkwell knows (its
// own account and metadata aside). Any other field is passed to an
// OpenAI-compatible provider unchanged and refused for the others.
var ChatFields = []string{"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
	"stop", "seed", "response_format", "tools", "tool_choice", "n", "stream"}

// ParseChat reads the chat form from a body's top-level fields, without
// account and metadata (the caller takes those). Every refusal is an
// EINVALID naming the field and what to send instead.
func ParseChat(fields map[string]json.RawMessage) (ChatRequest, error) {
	c := ChatRequest{Fields: fields}
	if raw, ok := fields["model"]; ok {
		if err := json.Unmarshal(raw, &c.Model); err != nil || strings.TrimSpace(c.Model) == "" {
			return c, Errorf(EINVALID, "model must be a model's name, a non-empty string (leave it out for the default model)")
		}
	}
	if err := c.parseMessages(fields["messages"]); err != nil {
		return c, err
	}
	if err := c.parseLimits(fields); err != nil {
		return c, err
	}
	if err := c.parseSampling(fields); err != nil {
		return c, err
	}
	return c, c.parseTools(fields)
}

func (c *ChatRequest) parseMessages(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return Errorf(EINVALID, "messages is required: an array of {\"role\", \"content\"}, at least one")
	}
	var ok bool
	if c.Messages, ok = readMessages(raw); !ok { // readMessages reads no message that names a field twice
		if err := json.Unmarshal(raw, &c.Messages); err != nil {
			return Errorf(EINVALID, "messages must be an array of {\"role\": \"user\", \"content\": \"...\"} objects")
		}
		var each []json.RawMessage
		_ = json.Unmarshal(raw, &each) // it decodes: the line above did
		for i, m := range each {
			if err := refuseFieldTwice(m, fmt.Sprintf("messages[%d]", i)); err != nil {
				return err
			}
			c.Messages[i].Others = otherFields(m)
		}
	}
	switch {
	case len(c.Messages) == 0:
		return Errorf(EINVALID, "messages must hold at least one message")
	case len(c.Messages) > MaxMessages:
		return Errorf(EINVALID, "messages holds %d messages; at most %d", len(c.Messages), MaxMessages)
	}
	for i, m := range c.Messages {
		if !slices.Contains(ChatRoles, m.Role) {
			return Errorf(EINVALID, "messages[%d].role %q is not one of %s", i, m.Role, strings.Join(ChatRoles, ", "))
		}
		if err := checkContent(m); err != nil {
			return Errorf(EINVALID, "messages[%d].content %s", i, err.(*Error).Message)
		}
	}
	return nil
}

// checkContent accepts a string, an array of parts each with a "type", or
// null for an assistant message that calls tools.
func checkContent(m ChatMessage) error {
	c := bytes.TrimSpace(m.Content)
	switch {
	case len(c) == 0 || string(c) == "null":
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			return nil
		}
		return Errorf(EINVALID, "is required: a string, or an array of parts")
	case c[0] == '"':
		return nil
	case c[0] == '[':
		var parts []json.RawMessage
		if json.Unmarshal(c, &parts) != nil {
			return Errorf(EINVALID, "must be a string, or an array of parts such as {\"type\": \"text\", \"text\": \"...\"}")
		}
		for j, raw := range parts {
			var p struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(raw, &p) != nil {
				return Errorf(EINVALID, "must be a string, or an array of parts such as {\"type\": \"text\", \"text\": \"...\"}")
			}
			if p.Type == "" {
				return Errorf(EINVALID, "part %d has no \"type\"", j)
			}
			if err := refuseFieldTwice(raw, fmt.Sprintf("part %d", j)); err != nil {
				return err
			}
		}
		return nil
	}
	return Errorf(EINVALID, "must be a string, or an array of parts")
}

func (c *ChatRequest) parseLimits(fields map[string]json.RawMessage) error {
	var limits [2]int // max_tokens, max_completion_tokens; 0 when absent or null
	for i, name := range []string{"max_tokens", "max_completion_tokens"} {
		raw, ok := fields[name]
		if !ok || string(raw) == "null" {
			continue
		}
		if err := json.Unmarshal(raw, &limits[i]); err != nil || limits[i] < 1 || limits[i] > MaxOutputLimit {
			return Errorf(EINVALID, "%s must be a whole number from 1 to %d", name, MaxOutputLimit)
		}
	}
	// Both named and different is refused, not resolved: the body goes to an
	// OpenAI-compatible server unchanged, and which of the two a server
	// honours is its own choice. Whichever Inkwell picked, the other could
	// be the one obeyed, past the bound checked and the money reserved.
	if limits[0] > 0 && limits[1] > 0 && limits[0] != limits[1] {
		return Errorf(EINVALID, "max_tokens (%d) and max_completion_tokens (%d) disagree: send one of them (max_completion_tokens is OpenAI's current name)", limits[0], limits[1])
	}
	c.MaxOutputTokens = max(limits[0], limits[1])
	if raw, ok := fields["n"]; ok && string(raw) != "null" && string(raw) != "1" {
		return Errorf(EINVALID, "n must be 1 (or left out): a job is one answer; send one job per answer wanted")
	}
	if raw, ok := fields["stream"]; ok && string(raw) != "null" && string(raw) != "false" {
		return Errorf(EINVALID, "stream must be false (or left out): a job's answer is stored whole and read when it ends (GET /v1/jobs/{id}?wait=)")
	}
	return nil
}

func (c *ChatRequest) parseSampling(fields map[string]json.RawMessage) error {
	var err error
	if c.Temperature, err = optFloat(fields, "temperature", 0, 2); err != nil {
		return err
	}
	if c.TopP, err = optFloat(fields, "top_p", 0, 1); err != nil {
		return err
	}
	if raw, ok := fields["seed"]; ok && string(raw) != "null" {
		var s int64
		if err := json.Unmarshal(raw, &s); err != nil {
			return Errorf(EINVALID, "seed must be a whole number")
		}
		c.Seed = &s
	}
	if raw, ok := fields["stop"]; ok && string(raw) != "null" {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			c.Stop = []string{one}
		} else if err := json.Unmarshal(raw, &c.Stop); err != nil || len(c.Stop) > 4 {
			return Errorf(EINVALID, "stop must be a string or an array of at most 4 strings")
		}
	}
	return nil
}

func optFloat(fields map[string]json.RawMessage, name string, lo, hi float64) (*float64, error) {
	raw, ok := fields[name]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || math.IsNaN(f) || f < lo || f > hi {
		return nil, Errorf(EINVALID, "%s must be a number from %g to %g", name, lo, hi)
	}
	return &f, nil
}

func (c *ChatRequest) parseTools(fields map[string]json.RawMessage) error {
	if raw, ok := fields["response_format"]; ok && string(raw) != "null" {
		var rf struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &rf) != nil || !slices.Contains([]string{"text", "json_object", "json_schema"}, rf.Type) {
			return Errorf(EINVALID, "response_format must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or {\"type\": \"json_schema\", \"json_schema\": {...}}")
		}
		c.ResponseFormat = rf.Type
	}
	if raw, ok := fields["tools"]; ok && string(raw) != "null" {
		var tools []json.RawMessage
		if json.Unmarshal(raw, &tools) != nil {
			return Errorf(EINVALID, "tools must be an array of tools, such as {\"type\": \"function\", \"function\": {\"name\", \"parameters\"}}")
		}
		c.Tools = raw
	}
	if raw, ok := fields["tool_choice"]; ok && string(raw) != "null" {
		b := bytes.TrimSpace(raw)
		if len(b) == 0 || (b[0] != '"' && b[0] != '{') {
			return Errorf(EINVALID, "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\"}}")
		}
		c.ToolChoice = raw
	}
	return nil
}

// Unknown lists, sorted, the top-level fields Inkwell does not know.
func (c ChatRequest) Unknown() []string {
	var out []string
	for k := range c.Fields {
		if !slices.Contains(ChatFields, k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// InputBytes is the size of everything a provider turns into input
// tokens: the body's fields as JSON. A byte-level BPE token covers at
// least one byte, so it bounds the prompt's tokens, chat markup included
// (each message's JSON braces and role name outweigh its few marker
// tokens).
func (c ChatRequest) InputBytes() int {
	n := 2
	for k, v := range c.Fields {
		n += len(k) + len(v) + 4
	}
	return n
}

// ImageParts counts the request's image parts ({"type": "image_url"}), in
// every message's content. A string content has none, and an array that
// neither names image_url nor holds an escape (which could spell it
// otherwise) is not decoded.
func (c ChatRequest) ImageParts() int {
	n := 0
	c.eachPartType(func(content []byte) bool {
		return bytes.Contains(content, []byte("image_url")) || bytes.IndexByte(content, '\\') >= 0
	}, func(t string) {
		if t == "image_url" {
			n++
		}
	})
	return n
}

// UnsizedInputs counts the parts of the request whose cost neither their
// bytes nor a bound of the model's show: every content part that is not
// text (or an assistant's refusal) or an image, and every message field
// that is not one of sizedMessageFields. A "file" part naming a document
// stored at the provider is a few bytes of request and as many pages of
// input as the document has; an assistant's "audio": {"id"} names audio
// the provider stores (a field that is null counts as nothing); so may
// any type or field a provider adds that Inkwell does not know. Only a
// model's max_input_tokens bounds them.
func (c ChatRequest) UnsizedInputs() int {
	_, unsized := c.inputParts()
	return unsized
}

// inputParts is ImageParts and UnsizedInputs counted in one pass over the
// messages (InputBound needs both on a model with a context window).
func (c ChatRequest) inputParts() (images, unsized int) {
	c.eachPartType(func([]byte) bool { return true }, func(t string) {
		switch t {
		case "image_url":
			images++
		case "text", "refusal":
		default:
			unsized++
		}
	})
	for _, m := range c.Messages {
		// Others holds no null: a message an SDK sends back as it was
		// answered says "audio": null, which is nothing.
		for _, f := range m.Others {
			if !slices.Contains(sizedMessageFields, f.Name) {
				unsized++
			}
		}
	}
	return images, unsized
}

// PartTypes is the types of the request's content parts, each once, in
// the order they first appear.
func (c ChatRequest) PartTypes() []string {
	var types []string
	seen := map[string]bool{} // a message may have thousands of parts, each of its own type
	c.eachPartType(func([]byte) bool { return true }, func(t string) {
		if !seen[t] {
			seen[t] = true
			types = append(types, t)
		}
	})
	return types
}

// eachPartType calls f with the type of each part of every message whose
// content is an array that decode says is worth decoding.
func (c ChatRequest) eachPartType(decode func(content []byte) bool, f func(string)) {
	for _, m := range c.Messages {
		content := bytes.TrimSpace(m.Content)
		if len(content) == 0 || content[0] != '[' || !decode(content) {
			continue
		}
		var parts []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(content, &parts) != nil {
			continue // checkContent refused it at accept
		}
		for _, p := range parts {
			f(p.Type)
		}
	}
}

// Text is a message's text: its string content, or its text parts joined.
func (m ChatMessage) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// LastUserText is the text of the last user message: what the simulators
// write from.
func (c ChatRequest) LastUserText() string {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == "user" {
			return c.Messages[i].Text()
		}
	}
	return ""
}

// Reading a body in one pass. encoding/json reads a chat request several
// times over (json.Unmarshal checks the whole input, then decodes it; a
// json.RawMessage is scanned again to be copied), each time through a
// state machine called once a byte. The reader below checks a body once,
// with a plain loop over each string, and hands out slices of it instead
// of copies. It reads only what encoding/json reads the same way; for
// anything else (invalid JSON, a name written with an escape, a message
// field in another case…) its caller goes to encoding/json, which also
// says what is wrong.

// A Member is one top-level member of a JSON object, as sent.
type Member struct {
	Name string
	// Value is the member's value as sent: a slice of the body read (its
	// capacity cut at its end, so an append copies), not a copy.
	Value json.RawMessage
}

// ReadObject reads body, one JSON object with only white space around it,
// into its top-level members in the order sent: what json.Unmarshal into
// a map[string]json.RawMessage reads, in one pass that also checks the
// whole body is JSON as encoding/json reads it. ok is false for a body it
// does not read: not one valid JSON object, not UTF-8, a name written with
// an escape (only a decoder resolves those), or nested deeper than
// maxScanDepth. Read such a body with encoding/json instead.
func ReadObject(body []byte) (members []Member, ok bool) {
	if !utf8.Valid(body) {
		return nil, false
	}
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false
	}
	members = make([]Member, 0, 8)
	if i = skipWS(body, i+1); i < len(body) && body[i] == '}' {
		return members, skipWS(body, i+1) == len(body)
	}
	for {
		if i >= len(body) || body[i] != '"' {
			return nil, false
		}
		end, flags := scanString(body, i)
		if end < 0 || flags&strEscaped != 0 {
			return nil, false
		}
		name := knownName(body[i+1 : end-1])
		if i = skipWS(body, end); i >= len(body) || body[i] != ':' {
			return nil, false
		}
		i = skipWS(body, i+1)
		vend, _ := scanValue(body, i, 1)
		if vend < 0 {
			return nil, false
		}
		members = append(members, Member{Name: name, Value: body[i:vend:vend]})
		if i = skipWS(body, vend); i >= len(body) {
			return nil, false
		}
		switch body[i] {
		case ',':
			i = skipWS(body, i+1)
			continue
		case '}':
			if skipWS(body, i+1) != len(body) {
				return nil, false
			}
			return members, true
		}
		return nil, false
	}
}

// knownName is the name b as a string: for a name bodies carry (the chat
// form's, the short form's, a batch line's), the constant, so that a call
// in flight holds no copy of it.
func knownName(b []byte) string {
	switch string(b) {
	case "model":
		return "model"
	case "messages":
		return "messages"
	case "max_tokens":
		return "max_tokens"
	case "max_completion_tokens":
		return "max_completion_tokens"
	case "temperature":
		return "temperature"
	case "top_p":
		return "top_p"
	case "stop":
		return "stop"
	case "seed":
		return "seed"
	case "response_format":
		return "response_format"
	case "tools":
		return "tools"
	case "tool_choice":
		return "tool_choice"
	case "n":
		return "n"
	case "stream":
		return "stream"
	case "account":
		return "account"
	case "metadata":
		return "metadata"
	case "prompt":
		return "prompt"
	case "max_words":
		return "max_words"
	case "custom_id":
		return "custom_id"
	case "method":
		return "method"
	case "url":
		return "url"
	case "body":
		return "body"
	}
	return string(b)
}

// readMessages reads a messages array as json.Unmarshal into []ChatMessage
// would, each message's content and tool_calls a slice of raw rather than
// a copy. It reports false for an array it does not read so (a message
// that is not an object, a field of ChatMessage named in another case or
// written with an escape, a string field that is not a plain string,
// invalid JSON): json.Unmarshal reads it then, and says what is wrong.
func readMessages(raw []byte) ([]ChatMessage, bool) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, false
	}
	if i = skipWS(raw, i+1); i < len(raw) && raw[i] == ']' {
		return []ChatMessage{}, skipWS(raw, i+1) == len(raw)
	}
	// Read into room on the stack, then copied to a slice of the length
	// read: a call in flight holds no spare messages.
	var room [8]ChatMessage
	msgs := room[:0]
	for {
		m, end := readMessage(raw, i)
		if end < 0 {
			return nil, false
		}
		msgs = append(msgs, m)
		if i = skipWS(raw, end); i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipWS(raw, i+1)
			continue
		case ']':
			if skipWS(raw, i+1) != len(raw) {
				return nil, false
			}
			return slices.Clone(msgs), true
		}
		return nil, false
	}
}

// readMessage reads the message object at b[i]; end is -1 when it is not
// one readMessages reads.
func readMessage(b []byte, i int) (m ChatMessage, end int) {
	if i >= len(b) || b[i] != '{' {
		return m, -1
	}
	if i = skipWS(b, i+1); i < len(b) && b[i] == '}' {
		return m, i + 1
	}
	var seenRoom [8][]byte
	seen := seenRoom[:0] // the names read, to leave a field named twice to the decoder's path, which refuses it
	for {
		if i >= len(b) || b[i] != '"' {
			return m, -1
		}
		nend, flags := scanString(b, i)
		if nend < 0 || flags&strEscaped != 0 {
			return m, -1
		}
		name := b[i+1 : nend-1]
		// Past a few names the decoder's path reads the message: the
		// comparison here is pairwise, and its own check goes by map.
		if len(seen) == len(seenRoom) || slices.ContainsFunc(seen, func(s []byte) bool { return bytes.EqualFold(s, name) }) {
			return m, -1
		}
		seen = append(seen, name)
		if i = skipWS(b, nend); i >= len(b) || b[i] != ':' {
			return m, -1
		}
		i = skipWS(b, i+1)
		vend, _ := scanValue(b, i, 2)
		if vend < 0 {
			return m, -1
		}
		v := b[i:vend:vend]
		var ok bool
		switch string(name) {
		case "role":
			if m.Role, ok = plainString(v); ok {
				if r := slices.Index(ChatRoles, m.Role); r >= 0 {
					m.Role = ChatRoles[r] // the constant: a call in flight holds no copy
				}
			}
		case "content":
			m.Content, ok = v, true
		case "name":
			m.Name, ok = plainString(v)
		case "tool_calls":
			m.ToolCalls, ok = v, true
		case "tool_call_id":
			m.ToolCallID, ok = plainString(v)
		default: // ignored, as the decoder ignores it, unless it is one of these in another case
			ok = !slices.ContainsFunc(messageFields, func(f string) bool { return bytes.EqualFold(name, []byte(f)) })
			if ok && string(v) != "null" {
				m.Others = append(m.Others, MessageField{Name: string(name), Empty: emptyJSON(v)})
			}
		}
		if !ok {
			return m, -1
		}
		if i = skipWS(b, vend); i >= len(b) {
			return m, -1
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
			continue
		case '}':
			return m, i + 1
		}
		return m, -1
	}
}

// otherFields is what readMessage records in Others, read by the
// decoder: the fields of message m that are not ChatMessage's in any case
// and not null, by name (the decoder's map has no order).
func otherFields(m json.RawMessage) []MessageField {
	var fields map[string]json.RawMessage
	if json.Unmarshal(m, &fields) != nil {
		return nil
	}
	var out []MessageField
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		v := bytes.TrimSpace(fields[name])
		if string(v) == "null" || slices.ContainsFunc(messageFields, func(f string) bool { return strings.EqualFold(name, f) }) {
			continue
		}
		out = append(out, MessageField{Name: name, Empty: emptyJSON(v)})
	}
	return out
}

// emptyJSON says a JSON value carries nothing: "", [] or {}, white space
// aside.
func emptyJSON(v []byte) bool {
	switch string(bytes.Join(bytes.Fields(v), nil)) {
	case `""`, "[]", "{}":
		return true
	}
	return false
}

// messageFields are ChatMessage's JSON names.
var messageFields = []string{"role", "content", "name", "tool_calls", "tool_call_id"}

// plainString is the JSON string v when it has no escape and is UTF-8
// (the decoder would resolve the one and replace what is not the other).
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
		return "", false
	}
	return string(v[1 : len(v)-1]), true
}

// maxScanDepth is how deep scanValue reads; deeper values are left to
// encoding/json (whose own limit is 10,000).
const maxScanDepth = 1000

// scanValue returns the index just past the JSON value that starts at
// b[i], or -1 when b[i:] does not start with one encoding/json would read
// (or it nests past maxScanDepth). compact reports that json.Marshal would
// write the value as it is: no white space outside its strings, and no
// character it escapes (<, >, &, U+2028, U+2029) inside them.
func scanValue(b []byte, i, depth int) (end int, compact bool) {
	if i >= len(b) {
		return -1, false
	}
	switch c := b[i]; {
	case c == '"':
		end, flags := scanString(b, i)
		return end, flags&strUnsafe == 0
	case c == '{' || c == '[':
		if depth >= maxScanDepth {
			return -1, false
		}
		return scanComposite(b, i, depth)
	case c == 't':
		return scanLiteral(b, i, "true"), true
	case c == 'f':
		return scanLiteral(b, i, "false"), true
	case c == 'n':
		return scanLiteral(b, i, "null"), true
	case c == '-' || '0' <= c && c <= '9':
		return scanNumber(b, i), true
	}
	return -1, false
}

// scanComposite is scanValue of the object or array at b[i].
func scanComposite(b []byte, i, depth int) (end int, compact bool) {
	obj := b[i] == '{'
	closer := byte(']')
	if obj {
		closer = '}'
	}
	compact = true
	ws := func(j int) int { // skips white space, which a compact value has none of
		k := skipWS(b, j)
		compact = compact && k == j
		return k
	}
	i = ws(i + 1)
	if i < len(b) && b[i] == closer {
		return i + 1, compact
	}
	for {
		if obj {
			if i >= len(b) || b[i] != '"' {
				return -1, false
			}
			end, flags := scanString(b, i)
			if end < 0 {
				return -1, false
			}
			compact = compact && flags&strUnsafe == 0
			if i = ws(end); i >= len(b) || b[i] != ':' {
				return -1, false
			}
			i = ws(i + 1)
		}
		end, c := scanValue(b, i, depth+1)
		if end < 0 {
			return -1, false
		}
		compact = compact && c
		if i = ws(end); i >= len(b) {
			return -1, false
		}
		switch b[i] {
		case ',':
			i = ws(i + 1)
			continue
		case closer:
			return i + 1, compact
		}
		return -1, false
	}
}

// String flags scanString reports.
const (
	strEscaped = 1 << iota // a backslash escape
	strUnsafe              // a character json.Marshal escapes: <, >, &, U+2028 or U+2029
)

// strPlain marks the bytes a JSON string holds that need no look: not a
// quote, a backslash, a control character, one of <, > and &, nor 0xE2
// (which starts U+2028 and U+2029).
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = true
	}
	for _, c := range []byte{'"', '\\', '<', '>', '&', 0xE2} {
		t[c] = false
	}
	return t
}()

// scanString returns the index just past the JSON string that opens at
// b[i] (a quote), -1 when it is not one encoding/json reads (it does not
// end, holds a control character or an escape JSON has not).
func scanString(b []byte, i int) (end int, flags int) {
	j := i + 1
	for j < len(b) {
		c := b[j]
		if strPlain[c] {
			j++
			continue
		}
		switch {
		case c == '"':
			return j + 1, flags
		case c == '\\':
			flags |= strEscaped
			if j+1 >= len(b) {
				return -1, flags
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(b) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) || !isHex(b[j+5]) {
					return -1, flags
				}
				j += 6
			default:
				return -1, flags
			}
		case c < 0x20:
			return -1, flags
		case c == 0xE2:
			if j+2 < len(b) && b[j+1] == 0x80 && b[j+2]&^1 == 0xA8 {
				flags |= strUnsafe
			}
			j++
		default: // <, > or &
			flags |= strUnsafe
			j++
		}
	}
	return -1, flags
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanNumber returns the index just past the JSON number at b[i], -1 when
// it is not one: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if i++; i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for ; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for ; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	return i
}

func scanLiteral(b []byte, i int, lit string) int {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return -1
	}
	return i + len(lit)
}

// skipWS is the index of the first byte at or after b[i] that is not JSON
// white space.
func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
