package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// handleAccept is POST /v1/jobs: 201 for a new job, 200 with the existing
// job (whatever its status) for a re-send, 422 for a key reused with
// another body, 400/413 for bad input, 429 past --max-queued or the
// account's rpm, 402 past its budget. Every refusal writes nothing.
func (s *Server) handleAccept(w http.ResponseWriter, r *http.Request) {
	p, work, err := parseAccept(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	job, created, err := s.acceptJob(w, r, p, work)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if created {
		writeCreated(w, job, p.Payload)
		return
	}
	d, err := s.cfg.Store.Show(r.Context(), job.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// writeCreated is a new job's 201: the job detail as writeJSON writes it,
// but for the payload, which is written as stored, on one line, rather
// than re-indented: it is the compact JSON accept made (json.Marshal's),
// and for a chat request of a few KiB indenting it cost more than the
// rest of the answer. payload is the one accept stored; a job that comes
// back with another (which a store never does) is written by writeJSON.
func writeCreated(w http.ResponseWriter, job inkwell.Job, payload []byte) {
	d := inkwell.JobDetail{Job: job, Attempts: []inkwell.Attempt{}}
	if !bytes.Equal(job.Payload, payload) {
		writeJSON(w, http.StatusCreated, d)
		return
	}
	d.Job.Payload = nil // written as null, then replaced
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	// The first "payload": null is the job's: the fields before it are a
	// number and two strings, and a quote in a string is escaped.
	const null = `"payload": null`
	at := -1
	if enc.Encode(d) == nil {
		at = bytes.Index(buf.Bytes(), []byte(null))
	}
	if at < 0 {
		writeJSON(w, http.StatusCreated, inkwell.JobDetail{Job: job, Attempts: []inkwell.Attempt{}})
		return
	}
	b := buf.Bytes()
	at += len(null) - len("null")
	w.Header().Set("Content-Type", "application/json")
	// Its length is known: without it an answer past net/http's 2 KiB
	// buffer (a chat request's) goes out chunked, in more writes.
	w.Header().Set("Content-Length", strconv.Itoa(len(b)-len("null")+len(payload)))
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(b[:at])
	_, _ = w.Write(payload)
	_, _ = w.Write(b[at+len("null"):])
}

// acceptJob stores one parsed job request, as POST /v1/jobs and POST
// /v1/chat/completions both do: the catalog's check and the budget's
// reservation (reserve), the account's rpm and --max-queued, then the
// accept transaction. created is false for a re-send of a stored job.
func (s *Server) acceptJob(w http.ResponseWriter, r *http.Request, p store.AcceptParams, work inkwell.Work) (job inkwell.Job, created bool, err error) {
	p.MaxQueued = s.cfg.MaxQueued
	var refusal error
	if p.ReserveMicros, err = s.reserve(work); err != nil {
		if inkwell.ErrorCode(err) != inkwell.EINVALID {
			return job, false, err
		}
		// The catalog refuses this body (its model gone from the config
		// file, a check added since it was stored): a re-send of a stored
		// job is still answered with it, so the store looks the key up
		// and answers this refusal, nothing written, only when it finds
		// none.
		refusal, p.ReserveMicros = err, 0
	}
	// Keys are unique per account (migration 0008), and the account is
	// the token's: a client's re-send or reused key only ever finds a job
	// of its own account.
	err = s.underRPM(w, r, p.Account, func(refuse error) (bool, error) {
		p.Refuse = cmp.Or(refusal, refuse)
		job, created, err = s.cfg.Store.Accept(r.Context(), p)
		return created, err
	})
	if err != nil {
		return job, false, err
	}
	stored(r.Context()) // the token was used, whatever the answer's status
	s.cfg.Metrics.AcceptedJob(created)
	if created {
		s.log.InfoContext(r.Context(), "job accepted", "job_id", job.ID)
		if s.cfg.OnAccepted != nil {
			s.cfg.OnAccepted()
		}
	}
	return job, created, nil
}

// handleShow is GET /v1/jobs/{id}; with ?wait=30s a long-poll (wait.go).
func (s *Server) handleShow(w http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wait, err := waitParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := s.showWaiting(w, r, id, wait)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// handleRetry is POST /v1/jobs/{id}/retry: failed -> queued.
func (s *Server) handleRetry(w http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	job, err := s.cfg.Store.RetryIfFailed(r.Context(), id, actor(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "job retried", "job_id", id)
	if s.cfg.OnAccepted != nil {
		s.cfg.OnAccepted()
	}
	writeJSON(w, http.StatusOK, map[string]inkwell.Job{"job": job})
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReady answers 200 only after startup recovery has run, and while
// the database takes writes (503 "unavailable" with the reason otherwise:
// the last write failed for want of the database, or its files are gone).
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if s.stopping.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "stopping"})
		return
	}
	if !s.ready.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "recovering"})
		return
	}
	if err := s.cfg.Store.Unready(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": inkwell.ErrorMessage(err)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func jobID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, inkwell.Errorf(inkwell.EINVALID, "job id %q must be a positive whole number", r.PathValue("id"))
	}
	return id, nil
}

// handleCancel is POST /v1/jobs/{id}/cancel (docs/design.md §9): a queued or
// running job becomes failed, class cancelled. 200 with the job detail
// (as GET /v1/jobs/{id} answers it) when it was cancelled now or before (a
// re-sent cancel); 409 with the error and the job detail as it is now when
// it is done or failed otherwise (a completion that committed first
// wins); 404 for no such job. A refusal writes nothing. When a running
// attempt was closed, OnCancelled aborts its provider call in this
// process's lane at once.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.cfg.Store.Cancel(r.Context(), id, actor(r))
	if inkwell.ErrorCode(err) == inkwell.ECONFLICT && c.Job.ID == id {
		s.writeCancelRefused(w, r, c.Job, err)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.cfg.Waits.Wake(id) // committed: its long-polls answer now
	switch {
	case c.Attempt != 0:
		s.log.InfoContext(r.Context(), "job cancelled while running; aborting its provider call", "job_id", id, "attempt_id", c.Attempt)
		if s.cfg.OnCancelled != nil {
			s.cfg.OnCancelled(c.Attempt)
		}
	default:
		s.log.InfoContext(r.Context(), "job cancelled", "job_id", id, "status", c.Job.Status)
	}
	d, err := s.cfg.Store.Show(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// cancelRefused is a cancel's 409: the JSON error form and, beside it,
// the job detail as GET /v1/jobs/{id} answers it now, so the client sees
// what won (a job done, or failed for another reason) without asking.
type cancelRefused struct {
	Error *inkwell.Error `json:"error"`
	inkwell.JobDetail
}

func (s *Server) writeCancelRefused(w http.ResponseWriter, r *http.Request, job inkwell.Job, err error) {
	s.cfg.Metrics.Refusal(r.Pattern, inkwell.ECONFLICT)
	d, derr := s.cfg.Store.Show(r.Context(), job.ID)
	if derr != nil { // the job as the cancel saw it is still the answer
		d = inkwell.JobDetail{Job: job, Attempts: []inkwell.Attempt{}}
	}
	s.log.InfoContext(r.Context(), "cancel refused", "job_id", job.ID, "status", d.Job.Status, "error_class", d.Job.ErrorClass)
	writeJSON(w, http.StatusConflict, cancelRefused{
		Error:     &inkwell.Error{Code: inkwell.ECONFLICT, Message: inkwell.ErrorMessage(err)},
		JobDetail: d,
	})
}
