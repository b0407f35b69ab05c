package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

var accountRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]*$`)

// parseAccept reads and validates POST /v1/jobs. It returns the request
// normalized (defaults filled in) so that the same logical body always
// hashes the same. Nothing is written before it succeeds.
func parseAccept(w http.ResponseWriter, r *http.Request) (store.AcceptParams, error) {
	key, err := idempotencyKey(r)
	if err != nil {
		return store.AcceptParams{}, err
	}
	if err := jsonContentType(r); err != nil {
		return store.AcceptParams{}, err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, inkwell.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return store.AcceptParams{}, inkwell.Errorf(inkwell.ETOOLARGE, "body is over %d bytes", inkwell.MaxBodyBytes)
	}
	if err != nil {
		return store.AcceptParams{}, inkwell.Errorf(inkwell.EINVALID, "reading body: %v", err)
	}
	req, err := decodeRequest(body)
	if err != nil {
		return store.AcceptParams{}, err
	}
	if req.Account, err = decideAccount(r, req); err != nil {
		return store.AcceptParams{}, err
	}
	if err := validateRequest(&req); err != nil {
		return store.AcceptParams{}, err
	}
	payload, _ := json.Marshal(req)
	return store.AcceptParams{Account: req.Account, IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload}, nil
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

// expectedBody is what POST /v1/jobs reads, in words.
const expectedBody = `one JSON object {"prompt": "...", "account": "...", "max_words": N} (only prompt is required)`

func decodeRequest(body []byte) (inkwell.Request, error) {
	var req inkwell.Request
	if !utf8.Valid(body) {
		return req, inkwell.Errorf(inkwell.EINVALID, "body is not valid UTF-8")
	}
	if kind := jsonKind(body); kind != "" {
		return req, inkwell.Errorf(inkwell.EINVALID, "body is %s; expected %s", kind, expectedBody)
	}
	if err := refuseDuplicateKeys(body); err != nil {
		return req, err
	}
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
func decideAccount(r *http.Request, req inkwell.Request) (string, error) {
	if tok := principalOf(r.Context()); tok != nil {
		if req.Account != "" && req.Account != tok.Account {
			return "", inkwell.Errorf(inkwell.EFORBIDDEN, "the body names account %q, but token %s acts for account %q: a token submits for its own account only (leave account out, or name %q)",
				req.Account, tok.ID, tok.Account, tok.Account)
		}
		return tok.Account, nil
	}
	if req.Account == "" {
		return inkwell.DefaultAccount, nil
	}
	return req.Account, nil
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
	case len(req.Account) > inkwell.MaxAccountBytes || !accountRE.MatchString(req.Account):
		return inkwell.Errorf(inkwell.EINVALID, "account must be 1-%d letters, digits, '.', '_', '@' or '-'", inkwell.MaxAccountBytes)
	case req.MaxWords < 0 || req.MaxWords > inkwell.MaxMaxWords:
		return inkwell.Errorf(inkwell.EINVALID, "max_words must be between 1 and %d (0 or absent means %d)", inkwell.MaxMaxWords, inkwell.DefaultMaxWords)
	}
	if req.MaxWords == 0 {
		req.MaxWords = inkwell.DefaultMaxWords
	}
	return nil
}
