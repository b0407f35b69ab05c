package api

import (
	"net/http"
	"strconv"

	"github.com/inkwell/inkwell"
)

// handleAccept is POST /v1/jobs: 201 for a new job, 200 with the existing
// job (whatever its status) for a re-send, 422 for a key reused with
// another body, 400/413 for bad input. Every refusal writes nothing.
func (s *Server) handleAccept(w http.ResponseWriter, r *http.Request) {
	p, err := parseAccept(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p.MaxQueued = s.cfg.MaxQueued
	job, created, err := s.cfg.Store.Accept(r.Context(), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.cfg.Metrics.acceptedJob(created)
	if created {
		s.log.InfoContext(r.Context(), "job accepted", "job_id", job.ID)
		if s.cfg.OnAccepted != nil {
			s.cfg.OnAccepted()
		}
		writeJSON(w, http.StatusCreated, inkwell.JobDetail{Job: job, Attempts: []inkwell.Attempt{}})
		return
	}
	d, err := s.cfg.Store.Show(r.Context(), job.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// handleShow is GET /v1/jobs/{id}.
func (s *Server) handleShow(w http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := s.cfg.Store.Show(r.Context(), id)
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
	job, err := s.cfg.Store.RetryIfFailed(r.Context(), id)
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

// handleReady answers 200 only after startup recovery has run.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if !s.ready.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "recovering"})
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
