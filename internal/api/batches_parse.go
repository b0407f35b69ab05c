package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// Limits on POST /v1/batches (docs/batches.md), OpenAI's batch input
// limits. Past either, the batch is refused with 413 as soon as the limit
// is seen: a Content-Length over MaxBatchBytes before the body is read,
// the line after the last allowed one before the rest is read.
const (
	MaxBatchLines = 50_000
	MaxBatchBytes = 100 << 20 // 100 MiB, 104,857,600 bytes
	// MaxBatchLineBytes is one line: a job body at its limit plus room
	// for custom_id, method and url.
	MaxBatchLineBytes = inkwell.MaxBodyBytes + MaxCustomIDBytes + 1<<10
	MaxCustomIDBytes  = 512
)

// The urls a batch line may name: OpenAI's own, each line a chat request,
// and Inkwell's, each line a job request in either form.
const (
	batchChatURL = "/v1/chat/completions"
	batchJobsURL = "/v1/jobs"
)

// batchInputLine is one line of the OpenAI batch input form.
type batchInputLine struct {
	CustomID *string         `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// parseBatch reads and checks every line of POST /v1/batches in the JSONL
// form before anything is written (parseBatchLines).
func parseBatch(w http.ResponseWriter, r *http.Request) (store.BatchParams, []batchWork, error) {
	if err := batchContentType(r); err != nil { // first: a body of another type is not this form at all
		return store.BatchParams{}, nil, err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return store.BatchParams{}, nil, err
	}
	if r.ContentLength > MaxBatchBytes {
		return store.BatchParams{}, nil, batchTooLarge()
	}
	p, works, err := parseBatchLines(r, http.MaxBytesReader(w, r.Body, MaxBatchBytes), "")
	p.IdempotencyKey = key
	return p, works, err
}

// parseBatchLines reads and checks every line of in, the batch input
// form: the first bad line refuses the whole batch, named by its line
// number (counted from 1, blank lines included) and field. url, when
// set, is the one url every line must name; else each line names either
// (batchChatURL, batchJobsURL), and Endpoint is set when all agree.
func parseBatchLines(r *http.Request, in io.Reader, url string) (store.BatchParams, []batchWork, error) {
	var p store.BatchParams
	var works []batchWork
	seen := map[string]int{} // custom_id -> line
	first := 0               // the line that set p.Account
	src := &firstReadError{r: in}
	sc := bufio.NewScanner(skipBOM(src))
	// The buffer grows up to a line at the limit and its ending ("\r\n"),
	// never past it: a scanner takes only a line that fits with its ending
	// (at the end of the input, one byte short of the buffer), so the
	// limit itself is checked on the line as scanned, without its ending.
	sc.Buffer(make([]byte, 0, 16<<10), MaxBatchLineBytes+2)
	n := 0
	for sc.Scan() {
		if src.err != nil {
			break // the input failed: what the scanner holds may be a line cut short (scanError answers)
		}
		n++
		if len(sc.Bytes()) > MaxBatchLineBytes {
			return store.BatchParams{}, nil, lineTooLong(n)
		}
		raw := bytes.TrimFunc(sc.Bytes(), blankRune)
		if len(raw) == 0 {
			continue
		}
		if len(p.Lines) == MaxBatchLines {
			return store.BatchParams{}, nil, inkwell.Errorf(inkwell.ETOOLARGE, "line %d: a batch holds at most %d lines: send the rest in another batch", n, MaxBatchLines)
		}
		l, work, target, err := parseBatchLine(r, raw, url)
		account := work.Account
		if err != nil {
			return store.BatchParams{}, nil, lineError(n, err)
		}
		if prev, ok := seen[l.CustomID]; ok {
			return store.BatchParams{}, nil, inkwell.Errorf(inkwell.EINVALID, "line %d: custom_id %q repeats line %d's: each line needs its own", n, l.CustomID, prev)
		}
		seen[l.CustomID] = n
		if first == 0 {
			p.Account, p.Endpoint, first = account, target, n
		} else if account != p.Account {
			return store.BatchParams{}, nil, inkwell.Errorf(inkwell.EINVALID, "line %d: body.account %q is not line %d's %q: a batch's jobs belong to one account", n, account, first, p.Account)
		}
		if target != p.Endpoint {
			p.Endpoint = "" // the lines name both urls
		}
		p.Lines = append(p.Lines, l)
		works = append(works, batchWork{line: n, work: work})
	}
	readErr := src.err // first: a Read may hand over bytes with its error, and the scanner pass on the bytes alone
	if readErr == nil {
		readErr = sc.Err()
	}
	if err := scanError(readErr, n+1); err != nil {
		return store.BatchParams{}, nil, err
	}
	if len(p.Lines) == 0 {
		return store.BatchParams{}, nil, inkwell.Errorf(inkwell.EINVALID, "the batch has no lines: send one JSON object per line, {\"custom_id\", \"method\": \"POST\", \"url\": \"/v1/chat/completions\", \"body\": {\"model\", \"messages\"}}")
	}
	p.RequestHash = store.BatchHash(p.Lines)
	return p, works, nil
}

// blankByte is the white space a line may hold and still be blank: the
// ASCII kind only, as the upload's line count (lineCounter) reads it, so
// that a file's lines are counted alike when it is stored and when its
// batch is made. A line of Unicode spaces (U+00A0…) is not blank: it is a
// line that is not JSON.
func blankByte(b byte) bool {
	switch b {
	case ' ', '\t', '\r', '\v', '\f':
		return true
	}
	return false
}

func blankRune(r rune) bool { return r < utf8.RuneSelf && blankByte(byte(r)) }

// utf8BOM is the UTF-8 byte order mark, which Windows tools (Notepad,
// PowerShell's Out-File) write at the start of a text file.
const utf8BOM = "\xEF\xBB\xBF"

// skipBOM is in without a byte order mark at its start: a file that
// starts with one is read as the same file without it, its line numbers
// unchanged. One anywhere else is part of its line.
func skipBOM(in io.Reader) io.Reader {
	br := bufio.NewReader(in)
	if b, _ := br.Peek(len(utf8BOM)); string(b) == utf8BOM {
		_, _ = br.Discard(len(utf8BOM))
	}
	return br
}

// batchWork is a batch line's work, with its line number for a refusal
// found after the parse (an unknown model, a budget).
type batchWork struct {
	line int
	work inkwell.Work
}

// parseBatchLine checks one line as POST /v1/jobs checks its body
// (readJob) and returns it normalized, with the account that pays for it
// and the url it names (which must be url when that is set).
func parseBatchLine(r *http.Request, raw []byte, url string) (store.BatchLine, inkwell.Work, string, error) {
	in, ok, err := readBatchLine(raw)
	if !ok {
		in, err = decodeBatchLine(raw)
	}
	if err != nil {
		return store.BatchLine{}, inkwell.Work{}, "", err
	}
	if err := checkBatchTarget(in, url); err != nil {
		return store.BatchLine{}, inkwell.Work{}, "", err
	}
	if err := checkLineBody(in); err != nil {
		return store.BatchLine{}, inkwell.Work{}, "", err
	}
	work, payload, err := readJob(r, in.Body)
	if err != nil {
		return store.BatchLine{}, inkwell.Work{}, "", inkwell.Errorf(inkwell.ErrorCode(err), "body: %s", inkwell.ErrorMessage(err))
	}
	return store.BatchLine{CustomID: *in.CustomID, RequestHash: inkwell.RequestHash(payload), Payload: payload}, work, in.URL, nil
}

// decodeBatchLine reads a line with encoding/json: a JSON object with
// custom_id, method, url and body, each named once, and nothing else.
func decodeBatchLine(raw []byte) (batchInputLine, error) {
	var in batchInputLine
	if !utf8.Valid(raw) {
		return in, inkwell.Errorf(inkwell.EINVALID, "not valid UTF-8")
	}
	if kind := notAnObject(raw); kind != "" {
		return in, inkwell.Errorf(inkwell.EINVALID, "must be a JSON object {\"custom_id\", \"method\", \"url\", \"body\"}, not %s", kind)
	}
	if err := refuseDuplicateKeys(raw); err != nil {
		return in, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, inkwell.Errorf(inkwell.EINVALID, "must be one JSON object {\"custom_id\", \"method\", \"url\", \"body\"}: %s", jsonProblem(err))
	}
	if dec.InputOffset() != int64(len(raw)) {
		return in, inkwell.Errorf(inkwell.EINVALID, "must hold exactly one JSON object")
	}
	return in, nil
}

// readBatchLine is decodeBatchLine in one pass (inkwell.ReadObject), for
// a line it reads as the decoder would: ok is false for any other (a name
// not exactly one of the four, or sent twice in any case, a string field
// that is not a plain string), which decodeBatchLine then reads. The
// body is copied out of raw, which the next line overwrites. A refusal
// here is one decodeBatchLine makes too.
func readBatchLine(raw []byte) (in batchInputLine, ok bool, err error) {
	if len(raw) == 0 || raw[len(raw)-1] != '}' { // the decoder reads nothing past the object
		return in, false, nil
	}
	members, ok := inkwell.ReadObject(raw)
	if !ok || len(members) > 4 {
		return in, false, nil
	}
	for i, m := range members {
		for _, prev := range members[:i] {
			if strings.EqualFold(prev.Name, m.Name) {
				return in, false, nil
			}
		}
		switch m.Name {
		case "custom_id":
			if string(m.Value) == "null" {
				continue
			}
			id, ok := plainJSONString(m.Value)
			if !ok {
				return in, false, nil
			}
			in.CustomID = &id
		case "method":
			if in.Method, ok = plainJSONString(m.Value); !ok {
				return in, false, nil
			}
		case "url":
			if in.URL, ok = plainJSONString(m.Value); !ok {
				return in, false, nil
			}
		case "body":
			in.Body = bytes.Clone(m.Value)
		default:
			return in, false, nil
		}
	}
	return in, true, nil
}

// plainJSONString is the JSON string v when it holds no escape (ReadObject
// checked it is UTF-8), as the decoder reads it.
func plainJSONString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return "", false
	}
	return string(v[1 : len(v)-1]), true
}

// checkBatchTarget checks a line's custom_id, method and url (url when
// set: the batch's endpoint).
func checkBatchTarget(in batchInputLine, url string) error {
	switch {
	case in.CustomID == nil || *in.CustomID == "":
		return inkwell.Errorf(inkwell.EINVALID, "custom_id is required: a string naming the line, unique in the batch")
	case len(*in.CustomID) > MaxCustomIDBytes:
		return inkwell.Errorf(inkwell.EINVALID, "custom_id is %d bytes; at most %d", len(*in.CustomID), MaxCustomIDBytes)
	case strings.ContainsFunc(*in.CustomID, unicode.IsControl):
		return inkwell.Errorf(inkwell.EINVALID, "custom_id must not contain control characters (it becomes part of the job's key)")
	case in.Method != http.MethodPost:
		return inkwell.Errorf(inkwell.EINVALID, "method must be \"POST\", not %q", in.Method)
	case url != "" && in.URL != url:
		return inkwell.Errorf(inkwell.EINVALID, "url must be %q, the batch's endpoint, not %q", url, in.URL)
	case in.URL != batchChatURL && in.URL != batchJobsURL:
		return inkwell.Errorf(inkwell.EINVALID, "url must be %q (each line a chat request) or %q (each line a job request), not %q", batchChatURL, batchJobsURL, in.URL)
	case len(in.Body) == 0:
		return inkwell.Errorf(inkwell.EINVALID, "body is required: the job request, as POST /v1/jobs takes it")
	}
	return nil
}

// checkLineBody refuses a line's body that is JSON but not an object, and
// on a line for /v1/chat/completions one that is not a chat request (no
// messages): that url takes what OpenAI's endpoint takes, and Inkwell's
// short form goes on a /v1/jobs line. A body that is not JSON at all is
// left to readJob, whose decoder says what is wrong with it.
func checkLineBody(in batchInputLine) error {
	if kind := notAnObject(in.Body); kind != "" {
		return inkwell.Errorf(inkwell.EINVALID, "body must be a JSON object, the request, not %s", kind)
	}
	if in.URL != batchChatURL || !json.Valid(in.Body) {
		return nil
	}
	if !hasName(topLevelNames(in.Body), "messages", false) {
		return inkwell.Errorf(inkwell.EINVALID, "body must be a chat request, {\"model\", \"messages\": [{\"role\": \"user\", \"content\": \"...\"}]}, as POST %s takes it: it has no messages (Inkwell's short form {\"prompt\", \"max_words\"} goes on a line whose url is %q)", batchChatURL, batchJobsURL)
	}
	return nil
}

// batchContentType accepts the two names JSON Lines goes by.
func batchContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/jsonl" || mt == "application/x-ndjson") {
		return nil
	}
	return inkwell.Errorf(inkwell.EINVALID, "Content-Type must be application/json (the OpenAI form, {\"input_file_id\", \"endpoint\", \"completion_window\"}) or application/jsonl or application/x-ndjson (the lines in the body, one JSON object per line), not %q", ct)
}

// lineError names the line in a line's refusal, keeping its code.
func lineError(n int, err error) error {
	return inkwell.Errorf(inkwell.ErrorCode(err), "line %d: %s", n, inkwell.ErrorMessage(err))
}

// firstReadError is a batch's input that remembers the first error other
// than io.EOF it met. On such an error bufio.Scanner hands back the bytes
// it holds as a last line: a line cut short, which must not be read as
// one (it was refused as a bad line, 400, where the input had failed: a
// body over its limit, an uploaded file deleted while it was read).
type firstReadError struct {
	r   io.Reader
	err error
}

func (f *firstReadError) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && f.err == nil {
		f.err = err
	}
	return n, err
}

// scanError turns the scanner's end into the batch's answer: nil at the
// end of the body, 413 for a body or a line over its limit, and an error
// that already says what it is (the store's: a file deleted while it was
// read is 404, a busy database 503) as it is.
func scanError(err error, line int) error {
	var tooLarge *http.MaxBytesError
	var known *inkwell.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooLarge):
		return batchTooLarge()
	case errors.Is(err, bufio.ErrTooLong):
		return lineTooLong(line)
	case errors.As(err, &known):
		return known
	}
	return inkwell.Errorf(inkwell.EINVALID, "reading body: %v", err)
}

func lineTooLong(line int) error {
	return inkwell.Errorf(inkwell.ETOOLARGE, "line %d is over %d bytes", line, MaxBatchLineBytes)
}

func batchTooLarge() error {
	return inkwell.Errorf(inkwell.ETOOLARGE, "the batch is over %d bytes: send it in smaller batches", MaxBatchBytes)
}
