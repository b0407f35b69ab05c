package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// The OpenAI Batch API (docs/design.md §12, docs/batches.md), so that the
// official SDKs run batches here with only their base URL and key
// changed: POST /v1/batches with {input_file_id, endpoint,
// completion_window, metadata}, GET /v1/batches[/{id}], POST
// /v1/batches/{id}/cancel, each answered as OpenAI batch objects.

// openAIBatchPrefix starts the OpenAI form of a batch id, "batch_<n>".
const openAIBatchPrefix = "batch_"

// completionWindow is the one window OpenAI offers, and the one accepted.
const completionWindow = "24h"

// Batch list pages (GET /v1/batches?limit=), as OpenAI's.
const (
	defaultBatchPage = 20
	maxBatchPage     = 100
)

// OpenAIBatch is a batch as the OpenAI Batch API describes one; times are
// unix seconds, null until they happen (docs/batches.md "The batch object").
type OpenAIBatch struct {
	ID               string             `json:"id"` // "batch_<n>"
	Object           string             `json:"object"`
	Endpoint         string             `json:"endpoint"`
	Errors           *struct{}          `json:"errors"` // always null: a bad line refuses the create
	InputFileID      string             `json:"input_file_id"`
	CompletionWindow string             `json:"completion_window"`
	Status           string             `json:"status"` // in_progress, completed, cancelling, cancelled
	OutputFileID     *string            `json:"output_file_id"`
	ErrorFileID      *string            `json:"error_file_id"`
	CreatedAt        int64              `json:"created_at"`
	InProgressAt     *int64             `json:"in_progress_at"`
	ExpiresAt        *int64             `json:"expires_at"`
	FinalizingAt     *int64             `json:"finalizing_at"`
	CompletedAt      *int64             `json:"completed_at"`
	FailedAt         *int64             `json:"failed_at"`
	ExpiredAt        *int64             `json:"expired_at"`
	CancellingAt     *int64             `json:"cancelling_at"`
	CancelledAt      *int64             `json:"cancelled_at"`
	RequestCounts    BatchRequestCounts `json:"request_counts"`
	Metadata         json.RawMessage    `json:"metadata"` // null when none
}

// BatchRequestCounts counts a batch's lines: completed is done, failed is
// failed (cancelled included).
type BatchRequestCounts struct {
	Total     int64 `json:"total"`
	Completed int64 `json:"completed"`
	Failed    int64 `json:"failed"`
}

// List is OpenAI's list object (GET /v1/batches, GET /v1/files): one page
// of data, the ids of its first and last items, and whether more follow.
type List[T any] struct {
	Object  string  `json:"object"` // "list"
	Data    []T     `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// newList is the list object of data (never null), whose items' ids id
// reads.
func newList[T any](data []T, more bool, id func(T) string) List[T] {
	l := List[T]{Object: "list", Data: data, HasMore: more}
	if l.Data == nil {
		l.Data = []T{}
	}
	if n := len(l.Data); n > 0 {
		first, last := id(l.Data[0]), id(l.Data[n-1])
		l.FirstID, l.LastID = &first, &last
	}
	return l
}

// BatchList is GET /v1/batches.
type BatchList = List[OpenAIBatch]

// batchCreate is the body of POST /v1/batches in the OpenAI form.
type batchCreate struct {
	InputFileID        string          `json:"input_file_id"`
	Endpoint           string          `json:"endpoint"`
	CompletionWindow   string          `json:"completion_window"`
	Metadata           json.RawMessage `json:"metadata"`
	OutputExpiresAfter json.RawMessage `json:"output_expires_after"` // accepted; output is kept as its jobs are (docs/retention.md)
}

// handleOpenAIBatchCreate is POST /v1/batches with a JSON body: the file's
// lines checked and stored as acceptBatch stores JSONL, keyed by the
// Idempotency-Key or else the file's id (a retried create is the same batch).
func (s *Server) handleOpenAIBatchCreate(w http.ResponseWriter, r *http.Request) {
	req, key, err := readBatchCreate(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p, works, err := s.batchOfFile(r, req)
	var other *otherEndpoint
	if errors.As(err, &other) {
		s.otherEndpointRefused(w, r, other, key)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p.IdempotencyKey = key
	st, _, err := s.acceptBatch(w, r, p, works)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, openAIBatch(st))
}

// otherEndpoint is batchOfFile's refusal of a file whose lines are good
// but name another url than the create's endpoint: p is the batch the
// create would be (its lines read as they are), so that a create re-sent
// under a key already used, with another endpoint, is told the key was
// used (422), as for any other change to a re-sent create.
type otherEndpoint struct {
	p   store.BatchParams
	err error // the refusal of the line, 400
}

func (e *otherEndpoint) Error() string { return e.err.Error() }

// otherEndpointRefused answers otherEndpoint: EKEYREUSED when the key
// names a batch already (its request differs: it has another endpoint),
// else the line's refusal. The store decides which in the accept
// transaction, through Refuse, and writes nothing either way.
func (s *Server) otherEndpointRefused(w http.ResponseWriter, r *http.Request, other *otherEndpoint, key string) {
	p := other.p
	p.IdempotencyKey, p.Refuse = key, other.err
	b, created, err := s.cfg.Store.AcceptBatch(r.Context(), p)
	if err == nil && created { // cannot be: Refuse refuses every new batch
		err = inkwell.Errorf(inkwell.EINTERNAL, "batch %d stored in spite of its refusal", b.ID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st, err := s.cfg.Store.BatchStatusOf(r.Context(), b.ID) // the same request re-sent
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, openAIBatch(st))
}

// readBatchCreate reads and checks the JSON body, and decides the key.
func readBatchCreate(w http.ResponseWriter, r *http.Request) (batchCreate, string, error) {
	var req batchCreate
	body, err := readBody(w, r)
	if err != nil {
		return req, "", err
	}
	if kind := notAnObject(body); kind != "" {
		return req, "", inkwell.Errorf(inkwell.EINVALID, `the body must be a JSON object {"input_file_id", "endpoint", "completion_window", "metadata"}, not %s (JSONL lines go as Content-Type: application/jsonl)`, kind)
	}
	if err := refuseDuplicateKeys(body); err != nil {
		return req, "", err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || len(bytes.TrimSpace(body[dec.InputOffset():])) > 0 {
		why := "more follows the object"
		if err != nil {
			why = jsonProblem(err)
		}
		return req, "", inkwell.Errorf(inkwell.EINVALID, `body must be {"input_file_id", "endpoint", "completion_window", "metadata"} (JSONL lines go as Content-Type: application/jsonl): %s`, why)
	}
	switch {
	case req.InputFileID == "":
		return req, "", inkwell.Errorf(inkwell.EINVALID, "input_file_id is required: the id of a file uploaded with POST /v1/files, purpose batch")
	case req.Endpoint != batchChatURL && req.Endpoint != batchJobsURL:
		return req, "", inkwell.Errorf(inkwell.EINVALID, "endpoint must be %q (or %q), not %q", batchChatURL, batchJobsURL, req.Endpoint)
	case req.CompletionWindow != completionWindow:
		return req, "", inkwell.Errorf(inkwell.EINVALID, "completion_window must be %q, not %q", completionWindow, req.CompletionWindow)
	}
	if err := checkMetadata(req.Metadata); err != nil {
		return req, "", err
	}
	key, err := batchKey(r, req.InputFileID)
	return req, key, err
}

// batchKey is the Idempotency-Key header, or without one a key derived
// from the input file's id. The space in it keeps it apart from every
// header key (printable ASCII without spaces).
func batchKey(r *http.Request, fileID string) (string, error) {
	if len(r.Header.Values("Idempotency-Key")) > 0 {
		return idempotencyKey(r)
	}
	return "file " + fileID, nil
}

// batchOfFile reads the caller's input file and checks every line against
// req.Endpoint; the hash covers every member too, so the same key with
// other metadata is refused.
func (s *Server) batchOfFile(r *http.Request, req batchCreate) (store.BatchParams, []batchWork, error) {
	f, err := s.ownFile(r, req.InputFileID)
	if err != nil {
		return store.BatchParams{}, nil, err
	}
	content, err := s.cfg.Store.FileContent(r.Context(), f.ID)
	if err != nil {
		return store.BatchParams{}, nil, err
	}
	p, works, err := parseBatchLines(r, content, req.Endpoint)
	if err != nil {
		code := inkwell.ErrorCode(err)
		if code == inkwell.ETOOLARGE { // a line of the file, not this request, is too long
			code = inkwell.EINVALID
		}
		err = inkwell.Errorf(code, "input file %s: %s", f.ID, inkwell.ErrorMessage(err))
		if code == inkwell.EINVALID {
			err = s.lineURLsDiffer(r, f, req, err)
		}
		return store.BatchParams{}, nil, err
	}
	p, err = openAIBatchParams(p, f, req)
	return p, works, err
}

// openAIBatchParams is p, the lines of file f, with the create's own
// members; the hash covers every member too, so the same key with other
// metadata (or another endpoint) is refused.
func openAIBatchParams(p store.BatchParams, f store.File, req batchCreate) (store.BatchParams, error) {
	var err error
	p.InputFileID, p.Endpoint, p.CompletionWindow = f.ID, req.Endpoint, req.CompletionWindow
	if p.Metadata, err = normalMetadata(req.Metadata); err != nil {
		return store.BatchParams{}, err
	}
	p.RequestHash = inkwell.RequestHash([]byte(strings.Join([]string{"openai", p.InputFileID, p.Endpoint, p.CompletionWindow, string(p.Metadata), p.RequestHash}, "\n")))
	return p, nil
}

// lineURLsDiffer is refusal, the file's lines refused under
// req.Endpoint, as an otherEndpoint when they are good lines read under
// any url: only the url they name is not the endpoint. Otherwise (a bad
// line, or the file unreadable now) it is refusal.
func (s *Server) lineURLsDiffer(r *http.Request, f store.File, req batchCreate, refusal error) error {
	content, err := s.cfg.Store.FileContent(r.Context(), f.ID)
	if err != nil {
		return refusal
	}
	p, _, err := parseBatchLines(r, content, "")
	if err != nil {
		return refusal
	}
	if p, err = openAIBatchParams(p, f, req); err != nil {
		return err
	}
	return &otherEndpoint{p: p, err: refusal}
}

// normalMetadata is checked metadata re-encoded with its keys in order
// (nil for none), so the same metadata always hashes the same.
func normalMetadata(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, inkwell.Errorf(inkwell.EINVALID, "metadata must be an object of string values")
	}
	return json.Marshal(m)
}

// handleBatchList is GET /v1/batches: newest first, limit (default 20, at
// most 100) a page, after the cursor of the page before (its last id); a
// client token lists its own account's batches only.
func (s *Server) handleBatchList(w http.ResponseWriter, r *http.Request) {
	limit, after, err := batchPageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	account := ""
	if tok := principalOf(r.Context()); tok != nil && tok.Role != store.RoleOperator {
		account = tok.Account
	}
	page, err := s.cfg.Store.BatchList(r.Context(), account, after, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	data := make([]OpenAIBatch, 0, len(page.Batches))
	for _, st := range page.Batches {
		data = append(data, openAIBatch(st))
	}
	writeJSON(w, http.StatusOK, newList(data, page.HasMore, func(b OpenAIBatch) string { return b.ID }))
}

// pageLimit reads a list's limit from q: def when absent, else a whole
// number from 1 to most (GET /v1/batches, GET /v1/files).
func pageLimit(q url.Values, def, most int) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, inkwell.Errorf(inkwell.EINVALID, "limit must be a whole number from 1 to %d, not %q", most, v)
	}
	return n, nil
}

// batchPageParams reads limit and after.
func batchPageParams(r *http.Request) (limit int, after int64, err error) {
	q := r.URL.Query()
	if limit, err = pageLimit(q, defaultBatchPage, maxBatchPage); err != nil {
		return 0, 0, err
	}
	if v := q.Get("after"); v != "" {
		digits, ok := strings.CutPrefix(v, openAIBatchPrefix)
		if after, err = strconv.ParseInt(digits, 10, 64); !ok || err != nil || after < 1 {
			return 0, 0, inkwell.Errorf(inkwell.EINVALID, "after must be a batch id, %s<n> (the last id of the page before), not %q", openAIBatchPrefix, v)
		}
	}
	return limit, after, nil
}

// handleBatchCancel is POST /v1/batches/{id}/cancel (store.CancelBatch),
// then aborts each running call it closed (OnCancelled): 200 with the
// batch, 409 for one that ended before any cancel.
func (s *Server) handleBatchCancel(w http.ResponseWriter, r *http.Request) {
	st, _, err := s.ownBatch(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.cfg.Store.CancelBatch(r.Context(), st.ID, actor(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.cfg.Waits.Wake(c.Ended...) // committed: their long-polls answer now
	for _, attempt := range c.Attempts {
		if s.cfg.OnCancelled != nil {
			s.cfg.OnCancelled(attempt)
		}
	}
	s.log.InfoContext(r.Context(), "batch cancelled", "batch_id", st.ID, "jobs_ended", len(c.Ended), "calls_aborted", len(c.Attempts))
	if st, err = s.cfg.Store.BatchStatusOf(r.Context(), st.ID); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, openAIBatch(st))
}

// openAIBatch is a batch as an OpenAI batch object; its status follows
// from its jobs and its cancel (see OpenAIBatch).
func openAIBatch(st store.BatchStatus) OpenAIBatch {
	id := openAIBatchPrefix + strconv.FormatInt(st.ID, 10)
	created := st.CreatedAt.Unix()
	o := OpenAIBatch{
		ID: id, Object: "batch", Endpoint: st.Endpoint, InputFileID: st.InputFileID, CompletionWindow: st.CompletionWindow,
		CreatedAt: created, InProgressAt: &created, Metadata: json.RawMessage(st.Metadata),
		RequestCounts: BatchRequestCounts{Total: int64(st.Lines), Completed: st.Counts[inkwell.StatusDone], Failed: st.Counts[inkwell.StatusFailed]},
	}
	if o.RequestCounts.Completed > 0 {
		o.OutputFileID = ptrTo(batchFileID(st.ID, inkwell.StatusDone))
	}
	if o.RequestCounts.Failed > 0 {
		o.ErrorFileID = ptrTo(batchFileID(st.ID, inkwell.StatusFailed))
	}
	ended := unixOf(st.LastEndedAt)
	switch {
	case st.CancellingAt != nil && st.Unended() > 0:
		o.Status, o.CancellingAt = "cancelling", unixOf(st.CancellingAt)
	case st.CancellingAt != nil:
		o.Status, o.CancellingAt, o.CancelledAt = "cancelled", unixOf(st.CancellingAt), unixOf(st.CancelledAt)
		if o.CancelledAt == nil { // a crash after the cancel: recovery ended the rest
			o.CancelledAt = ended
		}
	case st.Unended() > 0:
		o.Status = "in_progress"
	default:
		o.Status, o.FinalizingAt, o.CompletedAt = "completed", ended, ended
	}
	return o
}

// isJSONRequest reports whether the body is JSON (the OpenAI form of
// POST /v1/batches): labelled JSON as jsonContentType accepts it, or not
// labelled at all, which docs/api.md reads as JSON for every route.
func isJSONRequest(r *http.Request) bool {
	return jsonContentType(r) == nil
}

// jsonLine writes v as one line of JSON, as writeBatchLines does.
func jsonLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

func ptrTo[T any](v T) *T { return &v }

// unixOf is a time in unix seconds, nil for none.
func unixOf(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	return ptrTo(t.Unix())
}
