package api

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// Batches (docs/design.md §11, §12, docs/batches.md): POST /v1/batches
// takes JSONL in the OpenAI batch input form (this file) or, as JSON, the
// id of an uploaded file (openai_batches.go), and stores one job per line
// in one transaction; GET /v1/batches/{id} counts its jobs by status;
// /output and /errors are JSONL in the OpenAI batch output form, the done
// lines and the failed lines. With tokens in force a client token sees
// its own account's batches only (another's is 404, as for no such batch).

// batchStore is what the batch and file routes need of the store.
type batchStore interface {
	AcceptBatch(ctx context.Context, p store.BatchParams) (store.Batch, bool, error)
	BatchStatusOf(ctx context.Context, id int64) (store.BatchStatus, error)
	BatchEnded(ctx context.Context, id int64, status string, fn func(store.BatchJob) error) error
	BatchList(ctx context.Context, account string, before int64, limit int) (store.BatchPage, error)
	CancelBatch(ctx context.Context, id int64, by string) (store.BatchCancelled, error)
	CreateFile(ctx context.Context, p store.FileParams) (store.File, error)
	File(ctx context.Context, id string) (store.File, error)
	FileContent(ctx context.Context, id string) (io.Reader, error)
	Files(ctx context.Context, l store.FileList) ([]store.File, bool, error)
	DeleteFile(ctx context.Context, id, by string) (store.File, error)
}

// BatchResponse is a batch as POST /v1/batches (JSONL) and GET
// /v1/batches/{id} (an integer id) answer it; OpenAIBatch is the other
// form.
type BatchResponse struct {
	ID             int64            `json:"id"`
	IdempotencyKey string           `json:"idempotency_key"`
	Account        string           `json:"account"`
	CreatedAt      time.Time        `json:"created_at"`
	Lines          int              `json:"lines"`
	Counts         map[string]int64 `json:"counts"` // every job status, 0 when none
	Ended          bool             `json:"ended"`  // every job is done or failed
	OutputURL      string           `json:"output_url"`
}

// BatchOutputLine is one line of a batch's output or errors, the OpenAI
// batch output form: a done job's response (its chat.completion as body),
// or a failed job's error (its class as code).
type BatchOutputLine struct {
	ID       string               `json:"id"` // "batch_req_<job id>"
	CustomID string               `json:"custom_id"`
	Response *BatchOutputResponse `json:"response"`
	Error    *inkwell.Error       `json:"error"`
}

// BatchOutputResponse is the response of a done line.
type BatchOutputResponse struct {
	StatusCode int             `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       json.RawMessage `json:"body"` // the chat.completion object (CompletionOf)
}

// handleBatchAccept is POST /v1/batches: JSON is the OpenAI form
// (handleOpenAIBatchCreate); JSONL answers 201 new, 200 re-sent, and each
// refusal (docs/batches.md's table) writes nothing.
func (s *Server) handleBatchAccept(w http.ResponseWriter, r *http.Request) {
	if isJSONRequest(r) {
		s.handleOpenAIBatchCreate(w, r)
		return
	}
	p, works, err := parseBatch(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st, created, err := s.acceptBatch(w, r, p, works)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, batchResponse(st))
}

// acceptBatch stores a parsed batch for both forms: each line's worst case
// (reserve), the account's rpm (one request, however many lines), the
// accept transaction. created is false for a re-send.
func (s *Server) acceptBatch(w http.ResponseWriter, r *http.Request, p store.BatchParams, works []batchWork) (store.BatchStatus, bool, error) {
	p.MaxQueued = s.cfg.MaxQueued
	var err, refusal error
	for i := range p.Lines {
		if p.Lines[i].ReserveMicros, err = s.reserve(works[i].work); err != nil {
			if inkwell.ErrorCode(err) != inkwell.EINVALID {
				return store.BatchStatus{}, false, lineError(works[i].line, err)
			}
			// The catalog refuses the line now (its model removed, a check
			// added since): a re-send of a stored batch is still answered
			// with it, as a single job's is (acceptJob); a new one gets
			// this refusal, nothing written.
			refusal = lineError(works[i].line, err)
			break
		}
	}
	var b store.Batch
	var created bool
	err = s.underRPM(w, r, p.Account, func(refuse error) (bool, error) {
		p.Refuse = cmp.Or(refusal, refuse)
		b, created, err = s.cfg.Store.AcceptBatch(r.Context(), p)
		return created, err
	})
	if err != nil {
		return store.BatchStatus{}, false, err
	}
	for range p.Lines {
		s.cfg.Metrics.AcceptedJob(created)
	}
	if created {
		s.log.InfoContext(r.Context(), "batch accepted", "batch_id", b.ID, "lines", b.Lines)
		if s.cfg.OnAccepted != nil {
			s.cfg.OnAccepted()
		}
	}
	st, err := s.cfg.Store.BatchStatusOf(r.Context(), b.ID)
	return st, created, err
}

// handleBatchShow is GET /v1/batches/{id}: "batch_<n>" answers the
// OpenAI batch object, a whole number Inkwell's BatchResponse.
func (s *Server) handleBatchShow(w http.ResponseWriter, r *http.Request) {
	st, openAI, err := s.ownBatch(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if openAI {
		writeJSON(w, http.StatusOK, openAIBatch(st))
		return
	}
	writeJSON(w, http.StatusOK, batchResponse(st))
}

// handleBatchOutput is GET /v1/batches/{id}/output: one JSONL line per
// done job, in line order (the batch's output file).
func (s *Server) handleBatchOutput(w http.ResponseWriter, r *http.Request) {
	s.serveBatchLines(w, r, inkwell.StatusDone)
}

// handleBatchErrors is GET /v1/batches/{id}/errors: one JSONL line per
// failed job, in line order (the batch's error file).
func (s *Server) handleBatchErrors(w http.ResponseWriter, r *http.Request) {
	s.serveBatchLines(w, r, inkwell.StatusFailed)
}

func (s *Server) serveBatchLines(w http.ResponseWriter, r *http.Request, status string) {
	st, _, err := s.ownBatch(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeBatchLines(w, r, st.ID, status)
}

// writeBatchLines streams the lines of batch id's jobs of status from one
// consistent read; a failure after the first line can only cut it short.
func (s *Server) writeBatchLines(w http.ResponseWriter, r *http.Request, id int64, status string) {
	allowTransfer(w) // an output of 50,000 lines is slower than serve's WriteTimeout
	w.Header().Set("Content-Type", "application/jsonl")
	enc := json.NewEncoder(w)
	started := false
	err := s.cfg.Store.BatchEnded(r.Context(), id, status, func(bj store.BatchJob) error {
		started = true
		return enc.Encode(batchOutputLine(bj))
	})
	switch {
	case err != nil && !started:
		w.Header().Del("Content-Type")
		s.writeError(w, r, err)
	case err != nil:
		s.log.WarnContext(r.Context(), "batch lines cut short", "batch_id", id, "status", status, "err", err)
	case !started:
		w.WriteHeader(http.StatusOK)
	}
}

// ownBatch reads the batch the path names, "batch_<n>" (openAI) or n, as
// its caller may see it: a client token's another account's batch is
// ENOTFOUND, worded as a batch that does not exist.
func (s *Server) ownBatch(r *http.Request) (st store.BatchStatus, openAI bool, err error) {
	raw := r.PathValue("id")
	digits, openAI := strings.CutPrefix(raw, openAIBatchPrefix)
	id, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || id < 1 || digits[0] == '+' {
		return store.BatchStatus{}, openAI, inkwell.Errorf(inkwell.EINVALID, "batch id %q must be %s<n> or n, n a positive whole number", raw, openAIBatchPrefix)
	}
	st, err = s.ownBatchID(r, id)
	return st, openAI, err
}

// ownBatchID is ownBatch of batch id.
func (s *Server) ownBatchID(r *http.Request, id int64) (store.BatchStatus, error) {
	st, err := s.cfg.Store.BatchStatusOf(r.Context(), id)
	if tok := principalOf(r.Context()); err == nil && tok != nil && tok.Role != store.RoleOperator && st.Account != tok.Account {
		err = inkwell.Errorf(inkwell.ENOTFOUND, "batch %d not found", id)
	}
	return st, err
}

func batchResponse(st store.BatchStatus) BatchResponse {
	return BatchResponse{
		ID: st.ID, IdempotencyKey: st.IdempotencyKey, Account: st.Account, CreatedAt: st.CreatedAt,
		Lines: st.Lines, Counts: st.Counts, Ended: st.Unended() == 0,
		OutputURL: "/v1/batches/" + strconv.FormatInt(st.ID, 10) + "/output",
	}
}

// batchOutputLine is a done or failed job's line. A done job stored
// before whole answers were kept (or pruned) gets a chat.completion
// object made from its text (CompletionOf).
func batchOutputLine(bj store.BatchJob) BatchOutputLine {
	line := BatchOutputLine{ID: "batch_req_" + strconv.FormatInt(bj.Job.ID, 10), CustomID: bj.CustomID}
	if bj.Job.Status != inkwell.StatusDone {
		code := string(bj.Job.ErrorClass)
		if code == "" {
			code = inkwell.StatusFailed
		}
		line.Error = &inkwell.Error{Code: code, Message: bj.Job.Error}
		return line
	}
	d := inkwell.JobDetail{Job: bj.Job, Result: bj.Result, Charge: bj.Charge}
	if d.Result == nil { // a legacy done job without a result row: the body says what is known
		d.Result = &inkwell.Result{JobID: bj.Job.ID, CreatedAt: bj.Job.CreatedAt}
	}
	line.Response = &BatchOutputResponse{StatusCode: http.StatusOK, Body: CompletionOf(d)}
	if bj.Charge != nil {
		line.Response.RequestID = bj.Charge.ProviderRequestID
	}
	return line
}
