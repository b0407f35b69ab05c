package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// parseAccept reads and validates POST /v1/jobs, in either form
// (readJob). It returns the store's params (the payload normalized, so
// the same logical body always hashes the same) and the work the job
// carries. Nothing is written before it succeeds.
func parseAccept(w http.ResponseWriter, r *http.Request) (store.AcceptParams, inkwell.Work, error) {
	key, err := idempotencyKey(r)
	if err != nil {
		return store.AcceptParams{}, inkwell.Work{}, err
	}
	if err := jsonContentType(r); err != nil {
		return store.AcceptParams{}, inkwell.Work{}, err
	}
	body, err := readBody(w, r)
	if err != nil {
		return store.AcceptParams{}, inkwell.Work{}, err
	}
	work, payload, err := readJob(r, body)
	if err != nil {
		return store.AcceptParams{}, inkwell.Work{}, err
	}
	return store.AcceptParams{Account: work.Account, IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload}, work, nil
}

// readBody reads a request body of at most inkwell.MaxBodyBytes (413 past it).
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := readAll(http.MaxBytesReader(w, r.Body, inkwell.MaxBodyBytes), r.ContentLength)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, inkwell.Errorf(inkwell.ETOOLARGE, "body is over %d bytes", inkwell.MaxBodyBytes)
	}
	if err != nil {
		return nil, inkwell.Errorf(inkwell.EINVALID, "reading body: %v", err)
	}
	return body, nil
}

// maxBodyPresize bounds the room readAll makes for a body before reading
// it: what a Content-Length claims is not yet sent, and memory is spent
// on bytes as they arrive.
const maxBodyPresize = 64 << 10

// readAll is io.ReadAll, with room made first for the length the request
// declares (up to maxBodyPresize), so a body of a few KiB is read into one
// buffer rather than grown into one by copies.
func readAll(rd io.Reader, length int64) ([]byte, error) {
	if length <= 0 {
		return io.ReadAll(rd)
	}
	b := make([]byte, 0, min(length, maxBodyPresize)+1) // +1: the read that sees the end
	for {
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow, as io.ReadAll does
		}
	}
}

// readJob reads a job request in either form (docs/api.md): the chat form,
// an OpenAI chat-completions request, when the body has "messages"; else
// the short form {"prompt", "account", "max_words"}. It decides who pays
// (decideAccount) and returns the work and the payload to store, whose
// hash is the request's: every field of the body counts, so a re-send
// with another temperature is another request.
//
// A body is read once (inkwell.ReadObject: checked, and its members
// found, in one pass); one that pass does not read (not a JSON object, a
// name with an escape, past maxKeysChecked members) is read by
// encoding/json instead (readJobDecoded), with the same outcome.
func readJob(r *http.Request, body []byte) (inkwell.Work, []byte, error) {
	members, ok := inkwell.ReadObject(body)
	if !ok || len(members) > maxKeysChecked {
		return readJobDecoded(r, body)
	}
	names := make([][]byte, len(members))
	for i, m := range members {
		names[i] = []byte(m.Name)
	}
	if err := refuseDuplicates(names); err != nil {
		return inkwell.Work{}, nil, err
	}
	if !hasName(names, "messages", false) {
		return readShort(r, body, names)
	}
	fields := make(map[string]json.RawMessage, len(members))
	for _, m := range members {
		fields[m.Name] = m.Value
	}
	return readChatFields(r, fields)
}

// readJobDecoded is readJob for a body inkwell.ReadObject does not read:
// its checks (checkBody) and its decode are encoding/json's.
func readJobDecoded(r *http.Request, body []byte) (inkwell.Work, []byte, error) {
	names, err := checkBody(body)
	if err != nil {
		return inkwell.Work{}, nil, err
	}
	if !hasName(names, "messages", false) {
		return readShort(r, body, names)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return inkwell.Work{}, nil, inkwell.Errorf(inkwell.EINVALID, "body must be %s: %s", expectedBody, jsonProblem(err))
	}
	return readChatFields(r, fields)
}

// readChatFields reads a body with messages, its top-level members in
// fields: the chat form, unless it also has prompt.
func readChatFields(r *http.Request, fields map[string]json.RawMessage) (inkwell.Work, []byte, error) {
	if _, both := fields["prompt"]; both {
		return inkwell.Work{}, nil, inkwell.Errorf(inkwell.EINVALID, "send messages (the chat form) or prompt (the short form), not both")
	}
	return readChat(r, fields)
}

// readShort reads the short form, exactly as before the chat form existed,
// so that a re-send of a job stored then hashes as it did. body passed
// checkBody, whose top-level names are names.
func readShort(r *http.Request, body []byte, names [][]byte) (inkwell.Work, []byte, error) {
	req, err := decodeShort(body)
	if err != nil && !hasName(names, "prompt", true) && json.Valid(body) {
		return inkwell.Work{}, nil, inkwell.Errorf(inkwell.EINVALID, "body must have messages (the chat form: {\"model\", \"messages\": [{\"role\": \"user\", \"content\": \"...\"}]}) or prompt (the short form: {\"prompt\": \"...\"}): %s", inkwell.ErrorMessage(err))
	}
	if err != nil {
		return inkwell.Work{}, nil, err
	}
	if req.Account, err = decideAccount(r, req.Account); err != nil {
		return inkwell.Work{}, nil, err
	}
	if err := validateRequest(&req); err != nil {
		return inkwell.Work{}, nil, err
	}
	payload, _ := json.Marshal(req)
	return inkwell.Work{Account: req.Account, Chat: req.Chat(), Short: &req}, payload, nil
}

// readChat reads the chat form: Inkwell's own account and metadata taken
// out, the rest checked by inkwell.ParseChat and kept as sent.
func readChat(r *http.Request, fields map[string]json.RawMessage) (inkwell.Work, []byte, error) {
	if len(fields) > maxKeysChecked { // past it, a name repeated in another case would go unseen
		return inkwell.Work{}, nil, inkwell.Errorf(inkwell.EINVALID, "the body has %d fields; a chat request has at most %d", len(fields), maxKeysChecked)
	}
	if err := refuseKnownNameInAnotherCase(fields); err != nil {
		return inkwell.Work{}, nil, err
	}
	var account string
	if raw, ok := fields["account"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &account); err != nil {
			return inkwell.Work{}, nil, inkwell.Errorf(inkwell.EINVALID, "account must be a string")
		}
	}
	metadata := fields["metadata"]
	if err := checkMetadata(metadata); err != nil {
		return inkwell.Work{}, nil, err
	}
	delete(fields, "account")
	delete(fields, "metadata")
	c, err := inkwell.ParseChat(fields)
	if err != nil {
		return inkwell.Work{}, nil, err
	}
	if account, err = decideAccount(r, account); err != nil {
		return inkwell.Work{}, nil, err
	}
	if err := inkwell.ValidateAccount(account); err != nil {
		return inkwell.Work{}, nil, err
	}
	return inkwell.Work{Account: account, Chat: c}, inkwell.ChatPayload(c, account, metadata), nil
}

// guardedNames are the top-level names of the chat form that Inkwell reads
// or refuses: its own (account, metadata), the chat fields it checks, and
// the ones a priced model refuses (catalog.pricedAsConfigured).
var guardedNames = append([]string{"account", "metadata", "service_tier", "web_search_options"}, inkwell.ChatFields...)

// refuseKnownNameInAnotherCase refuses a member whose name is one of
// guardedNames in another case ("Max_Tokens"). The chat form's fields are
// read by their exact names and every other member goes to the provider
// as sent, so such a member would be unknown to Inkwell (not checked, not
// reserved for) and max_tokens to a provider that matches names without
// regard to case, as Go's decoder does.
func refuseKnownNameInAnotherCase(fields map[string]json.RawMessage) error {
	for name := range fields {
		for _, known := range guardedNames {
			if name != known && strings.EqualFold(name, known) {
				return inkwell.Errorf(inkwell.EINVALID, "field %q is %q in another case: send it as %s (a provider may read it either way)", name, known, known)
			}
		}
	}
	return nil
}

// checkMetadata accepts what OpenAI's metadata is: an object of at most 16
// string values, keys of at most 64 bytes, values of at most 512.
func checkMetadata(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	// Each value read raw first: a null would decode into a string as "",
	// and be kept as if sent.
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return inkwell.Errorf(inkwell.EINVALID, "metadata must be an object of string values, such as {\"ticket\": \"T-1\"}")
	}
	if len(m) > 16 {
		return inkwell.Errorf(inkwell.EINVALID, "metadata holds %d keys; at most 16", len(m))
	}
	for k, rv := range m {
		var v string
		if len(rv) == 0 || rv[0] != '"' || json.Unmarshal(rv, &v) != nil {
			return inkwell.Errorf(inkwell.EINVALID, "metadata key %q: metadata values must be strings, not %s (leave the key out for no value)", k, jsonValueInWords(rv))
		}
		if len(k) > 64 || len(v) > 512 {
			return inkwell.Errorf(inkwell.EINVALID, "metadata key %q: keys are at most 64 bytes, values at most 512", k)
		}
	}
	return nil
}

// notAnObject names, in words, a value that is valid JSON but not an
// object ("a JSON array"…); "" for an object, null, or not JSON at all
// (the decoder then says what is wrong).
func notAnObject(v []byte) string {
	b := bytes.TrimSpace(v)
	if len(b) == 0 || b[0] == '{' || b[0] == 'n' || !json.Valid(b) {
		return ""
	}
	return "a JSON " + strings.TrimPrefix(strings.TrimPrefix(jsonValueInWords(b), "an "), "a ")
}

// jsonValueInWords names the kind of a JSON value, for a refusal.
func jsonValueInWords(v []byte) string {
	switch b := bytes.TrimSpace(v); {
	case len(b) == 0:
		return "nothing"
	case b[0] == 'n':
		return "null"
	case b[0] == 't', b[0] == 'f':
		return "a boolean"
	case b[0] == '{':
		return "an object"
	case b[0] == '[':
		return "an array"
	case b[0] == '"':
		return "a string"
	}
	return "a number"
}

func idempotencyKey(r *http.Request) (string, error) {
	keys := r.Header.Values("Idempotency-Key")
	if len(keys) > 1 {
		return "", inkwell.Errorf(inkwell.EINVALID, "send one Idempotency-Key header, not %d", len(keys))
	}
	key := r.Header.Get("Idempotency-Key")
	switch {
	case key == "":
		return "", inkwell.Errorf(inkwell.EINVALID, "header Idempotency-Key is required: one unique key per request, re-sent unchanged on retries")
	case len(key) > inkwell.MaxKeyBytes:
		return "", inkwell.Errorf(inkwell.EINVALID, "Idempotency-Key is %d bytes; at most %d", len(key), inkwell.MaxKeyBytes)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return "", inkwell.Errorf(inkwell.EINVALID, "Idempotency-Key must be printable ASCII without spaces")
		}
	}
	return key, nil
}

// jsonContentType refuses a body labelled as anything but JSON (415): a
// form post or a text upload is a mistake to name, not to guess at. A
// request without Content-Type is read as JSON.
func jsonContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return inkwell.Errorf(inkwell.EMEDIATYPE, "Content-Type %q is not read here: send the body as JSON with Content-Type: application/json", ct)
}

// identityEncoding refuses a body sent compressed (415, RFC 7694): no
// route decodes a Content-Encoding, and reading gzip bytes as JSON would
// answer with a parse error about bytes the client never wrote. A request
// without a body (a GET, a HEAD) has nothing encoded, whatever its
// headers say; every Content-Encoding line and every coding in each is
// read, so "identity" on a first line hides no "gzip" on a second.
func identityEncoding(r *http.Request) error {
	if r.ContentLength == 0 {
		return nil // no body (chunked bodies have ContentLength -1)
	}
	for _, line := range r.Header.Values("Content-Encoding") {
		for coding := range strings.SplitSeq(line, ",") {
			if coding = strings.TrimSpace(coding); coding != "" && !strings.EqualFold(coding, "identity") {
				return inkwell.Errorf(inkwell.EMEDIATYPE, "Content-Encoding %q is not read here: send the body uncompressed (no Content-Encoding header)", coding)
			}
		}
	}
	return nil
}

// expectedBody is what POST /v1/jobs reads, in words.
const expectedBody = `one JSON object: the chat form {"model": "...", "messages": [{"role": "user", "content": "..."}]} or the short form {"prompt": "...", "account": "...", "max_words": N}`

func decodeRequest(body []byte) (inkwell.Request, error) {
	if _, err := checkBody(body); err != nil {
		return inkwell.Request{}, err
	}
	return decodeShort(body)
}

// checkBody refuses a body that is not UTF-8, not an object, or names a
// field twice, and returns its top-level names: the checks both forms
// share, made once.
func checkBody(body []byte) ([][]byte, error) {
	if !utf8.Valid(body) {
		return nil, inkwell.Errorf(inkwell.EINVALID, "body is not valid UTF-8")
	}
	if kind := jsonKind(body); kind != "" {
		return nil, inkwell.Errorf(inkwell.EINVALID, "body is %s; expected %s", kind, expectedBody)
	}
	names := topLevelNames(body)
	return names, refuseDuplicates(names)
}

// decodeShort decodes a body checkBody passed as the short form: no field
// it does not know, exactly one object.
func decodeShort(body []byte) (inkwell.Request, error) {
	var req inkwell.Request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, inkwell.Errorf(inkwell.EINVALID, "body must be %s: %s", expectedBody, jsonProblem(err))
	}
	// Only white space may follow the object. (dec.More would let a
	// trailing '}' or ']' through: it reports the end of an enclosing value.)
	if len(bytes.TrimSpace(body[dec.InputOffset():])) > 0 {
		return req, inkwell.Errorf(inkwell.EINVALID, "body must hold exactly one JSON object")
	}
	return req, nil
}

// jsonKind names, in words, a body whose JSON value is not an object
// (an array, a string, a number, true or false); "" for anything else
// (an object, null, or not JSON at all: the decoder says what is wrong).
func jsonKind(body []byte) string {
	b := bytes.TrimSpace(body)
	if len(b) == 0 || !json.Valid(b) {
		return ""
	}
	switch b[0] {
	case '[':
		return "a JSON array (one request per POST: send each object on its own, with its own Idempotency-Key)"
	case '"':
		return "a JSON string"
	case 't', 'f':
		return "a JSON boolean"
	case 'n', '{':
		return ""
	}
	return "a JSON number"
}

func jsonProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field == "" { // the value itself, not a field of it
		kind, _, _ := strings.Cut(typeErr.Value, " ")
		return "it must be a JSON object, not a JSON " + kind
	}
	if errors.As(err, &typeErr) {
		return "field " + typeErr.Field + " must be " + goKindInWords(typeErr.Type.Kind())
	}
	if errors.Is(err, io.EOF) {
		return "body is empty"
	}
	return err.Error()
}

// decideAccount is the one place that decides who pays. With tokens in
// force it is the token's account: a body account naming another one is
// refused (403), whatever the token's role. Without (no token exists yet,
// or --auth off, both on loopback only) it is the body's account
// (validated below), default when absent.
func decideAccount(r *http.Request, account string) (string, error) {
	tok := principalOf(r.Context())
	if tok == nil {
		payer, _ := inkwell.Payer("", account)
		return payer, nil
	}
	payer, ok := inkwell.Payer(tok.Account, account)
	if !ok {
		return "", inkwell.Errorf(inkwell.EFORBIDDEN, "the body names account %q, but token %s acts for account %q: a token submits for its own account only (leave account out, or name %q)",
			account, tok.ID, tok.Account, tok.Account)
	}
	return payer, nil
}

// goKindInWords is a Go type as a JSON reader knows it.
func goKindInWords(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	}
	return k.String()
}

func validateRequest(req *inkwell.Request) error {
	switch {
	case strings.TrimSpace(req.Prompt) == "":
		return inkwell.Errorf(inkwell.EINVALID, "prompt is required and must not be blank")
	case len(req.Prompt) > inkwell.MaxPromptBytes:
		return inkwell.Errorf(inkwell.EINVALID, "prompt is %d bytes; at most %d", len(req.Prompt), inkwell.MaxPromptBytes)
	case strings.ContainsRune(req.Prompt, 0):
		return inkwell.Errorf(inkwell.EINVALID, "prompt must not contain NUL")
	case inkwell.ValidateAccount(req.Account) != nil:
		return inkwell.ValidateAccount(req.Account)
	case req.MaxWords < 0 || req.MaxWords > inkwell.MaxMaxWords:
		return inkwell.Errorf(inkwell.EINVALID, "max_words must be between 1 and %d (0 or absent means %d)", inkwell.MaxMaxWords, inkwell.DefaultMaxWords)
	}
	if req.MaxWords == 0 {
		req.MaxWords = inkwell.DefaultMaxWords
	}
	return nil
}
