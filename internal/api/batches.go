package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// Batches (docs/design.md §11, docs/batches.md): POST /v1/batches takes JSONL
// in the OpenAI batch input form and stores one job per line in one
// transaction; GET /v1/batches/{id} counts its jobs by status; GET
// /v1/batches/{id}/output is JSONL in the OpenAI batch output form, one
// line per ended job. With tokens in force a client token sees its own
// account's batches only (another's is 404, as for no such batch).

// batchStore is what the batch routes need of the store.
type batchStore interface {
	AcceptBatch(ctx context.Context, p store.BatchParams) (store.Batch, bool, error)
	BatchStatusOf(ctx context.Context, id int64) (store.BatchStatus, error)
	BatchEnded(ctx context.Context, id int64, fn func(store.BatchJob) error) error
}

// BatchResponse is a batch as POST /v1/batches and GET /v1/batches/{id}
// answer it.
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

// BatchOutputLine is one line of GET /v1/batches/{id}/output, the OpenAI
// batch output form: a done job has a response (status_code 200, the
// provider's request id, and the job as body) and a null error; a failed
// job has a null response and an error (its class as code).
type BatchOutputLine struct {
	ID       string               `json:"id"`
	CustomID string               `json:"custom_id"`
	Response *BatchOutputResponse `json:"response"`
	Error    *inkwell.Error       `json:"error"`
}

// BatchOutputResponse is the response of a done line.
type BatchOutputResponse struct {
	StatusCode int             `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       BatchOutputBody `json:"body"`
}

// BatchOutputBody is a done job with its text and charge.
type BatchOutputBody struct {
	Job    inkwell.Job     `json:"job"`
	Result *inkwell.Result `json:"result,omitempty"`
	Charge *inkwell.Charge `json:"charge,omitempty"`
}

// handleBatchAccept is POST /v1/batches: 201 for a new batch, 200 with
// the stored batch for a re-send, 422 for a batch key reused with other
// lines, 400 naming the first bad line, 413 past a limit, 429 when the
// queue has no room for the batch or the account has used its rpm (with
// Retry-After), 402 when the account's budget cannot cover every line's
// worst case. Every refusal writes nothing.
func (s *Server) handleBatchAccept(w http.ResponseWriter, r *http.Request) {
	p, works, err := parseBatch(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p.MaxQueued = s.cfg.MaxQueued
	for i := range p.Lines {
		if p.Lines[i].ReserveMicros, err = s.reserve(works[i].work); err != nil {
			s.writeError(w, r, lineError(works[i].line, err))
			return
		}
	}
	// A batch is one request in its account's rpm, however many lines it
	// has: the budget and --max-queued are what bound its size.
	var b store.Batch
	var created bool
	err = s.underRPM(w, r, p.Account, func(refuse error) (bool, error) {
		p.Refuse = refuse
		b, created, err = s.cfg.Store.AcceptBatch(r.Context(), p)
		return created, err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for range p.Lines {
		s.cfg.Metrics.acceptedJob(created)
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		s.log.InfoContext(r.Context(), "batch accepted", "batch_id", b.ID, "lines", b.Lines)
		if s.cfg.OnAccepted != nil {
			s.cfg.OnAccepted()
		}
	}
	st, err := s.cfg.Store.BatchStatusOf(r.Context(), b.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, status, batchResponse(st))
}

// handleBatchShow is GET /v1/batches/{id}.
func (s *Server) handleBatchShow(w http.ResponseWriter, r *http.Request) {
	st, err := s.ownBatch(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, batchResponse(st))
}

// handleBatchOutput is GET /v1/batches/{id}/output: one JSONL line per
// ended job, in line order; jobs still queued or running have none yet.
// The lines are streamed from one consistent read; a failure after the
// first line can only cut the output short (and is logged).
func (s *Server) handleBatchOutput(w http.ResponseWriter, r *http.Request) {
	st, err := s.ownBatch(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/jsonl")
	enc := json.NewEncoder(w)
	started := false
	err = s.cfg.Store.BatchEnded(r.Context(), st.ID, func(bj store.BatchJob) error {
		started = true
		return enc.Encode(batchOutputLine(bj))
	})
	switch {
	case err != nil && !started:
		w.Header().Del("Content-Type")
		s.writeError(w, r, err)
	case err != nil:
		s.log.WarnContext(r.Context(), "batch output cut short", "batch_id", st.ID, "err", err)
	case !started:
		w.WriteHeader(http.StatusOK)
	}
}

// ownBatch reads the batch the path names, as its caller may see it: a
// client token's another account's batch is ENOTFOUND, worded as a batch
// that does not exist.
func (s *Server) ownBatch(r *http.Request) (store.BatchStatus, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return store.BatchStatus{}, inkwell.Errorf(inkwell.EINVALID, "batch id %q must be a positive whole number", r.PathValue("id"))
	}
	st, err := s.cfg.Store.BatchStatusOf(r.Context(), id)
	if tok := principalOf(r.Context()); err == nil && tok != nil && tok.Role != store.RoleOperator && st.Account != tok.Account {
		err = inkwell.Errorf(inkwell.ENOTFOUND, "batch %d not found", id)
	}
	return st, err
}

func batchResponse(st store.BatchStatus) BatchResponse {
	ended := st.Counts[inkwell.StatusDone] + st.Counts[inkwell.StatusFailed]
	return BatchResponse{
		ID: st.ID, IdempotencyKey: st.IdempotencyKey, Account: st.Account, CreatedAt: st.CreatedAt,
		Lines: st.Lines, Counts: st.Counts, Ended: ended == int64(st.Lines),
		OutputURL: "/v1/batches/" + strconv.FormatInt(st.ID, 10) + "/output",
	}
}

func batchOutputLine(bj store.BatchJob) BatchOutputLine {
	line := BatchOutputLine{ID: "job_" + strconv.FormatInt(bj.Job.ID, 10), CustomID: bj.CustomID}
	if bj.Job.Status != inkwell.StatusDone {
		code := string(bj.Job.ErrorClass)
		if code == "" {
			code = inkwell.StatusFailed
		}
		line.Error = &inkwell.Error{Code: code, Message: bj.Job.Error}
		return line
	}
	line.Response = &BatchOutputResponse{StatusCode: http.StatusOK, Body: BatchOutputBody{Job: bj.Job, Result: bj.Result, Charge: bj.Charge}}
	if bj.Charge != nil {
		line.Response.RequestID = bj.Charge.ProviderRequestID
	}
	return line
}
