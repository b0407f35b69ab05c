package api

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// DefaultSyncWait is how long POST /v1/chat/completions waits for its job
// when Config.SyncWait is zero (serve --sync-wait).
const DefaultSyncWait = 10 * time.Minute

// handleChatCompletions is POST /v1/chat/completions (docs/api.md): the
// chat request is stored as a job, exactly as POST /v1/jobs stores it
// (Idempotency-Key honoured), then waited for; the answer is the job's
// chat.completion object, so an OpenAI SDK reads it unchanged. A job that
// failed answers the OpenAI error form with a status for its class; one
// still queued or running when the wait runs out answers 504, and the
// same request with the same key waits on the same job. Every answer
// names the job in Inkwell-Job-Id.
func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request) {
	key, generated, err := chatKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := jsonContentType(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	work, payload, err := readJob(r, body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p := store.AcceptParams{Account: work.Account, IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload}
	job, _, err := s.acceptJob(w, r, p, work)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if generated {
		// Said only once the job is stored: a key that named nothing
		// would invite a re-send that is a new job after all.
		w.Header().Set("Idempotency-Key", key)
	}
	w.Header().Set("Inkwell-Job-Id", strconv.FormatInt(job.ID, 10))
	d, err := s.showWaiting(w, r, job.ID, s.syncWait())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeCompletion(w, r, d, generated)
}

// chatKey is the request's Idempotency-Key; without one, a new key
// (generated: sent back in Idempotency-Key once its job is stored), so
// the request is a job of its own: an OpenAI SDK sends none unless told
// to, and a re-send without one is a new job.
func chatKey(r *http.Request) (key string, generated bool, err error) {
	if len(r.Header.Values("Idempotency-Key")) > 0 {
		key, err = idempotencyKey(r)
		return key, false, err
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "chatcmpl-" + hex.EncodeToString(b), true, nil
}

func (s *Server) syncWait() time.Duration {
	if s.cfg.SyncWait > 0 {
		return s.cfg.SyncWait
	}
	return DefaultSyncWait
}

// writeCompletion answers a job as the chat-completions API would: done,
// its chat.completion object; failed, the error form with the status its
// class maps to; still queued or running, 504, or 503 when the server is
// stopping.
//
// The official OpenAI SDKs retry 409, 429 and 5xx on their own unless the
// answer says x-should-retry: false. A failed job's answer always says so:
// the job has ended, and a re-send is answered the same (with the key), or
// is a new job that may be billed again (without: a cancelled job would
// run after all). A pending job's answer says so when its key was
// generated (keyless): the SDK's re-send, keyless too, would be a second
// job beside the first; with the caller's key the re-send waits on it.
func (s *Server) writeCompletion(w http.ResponseWriter, r *http.Request, d inkwell.JobDetail, generated bool) {
	id := strconv.FormatInt(d.Job.ID, 10)
	switch {
	case d.Job.PrunedAt != nil:
		// Retention took its answer: an empty completion would pass for
		// the model's. Said, and not to be sent again (it would be the
		// same job, as pruned).
		s.cfg.Metrics.Refusal(r.Pattern, "pruned")
		w.Header().Set("X-Should-Retry", "false")
		writeJSON(w, http.StatusGone, map[string]any{"error": map[string]any{
			"code": "pruned", "type": "inkwell_job_pruned",
			"message": "job " + id + " ended " + d.Job.Status + " and was pruned by retention at " + inkwell.FormatTime(*d.Job.PrunedAt) +
				": its answer is gone, and sending it again under this key answers the same pruned job; GET /v1/jobs/" + id + " shows what is kept",
		}})
	case d.Job.Status == inkwell.StatusDone && d.Result != nil:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(CompletionOf(d))
	case d.Job.Status == inkwell.StatusFailed:
		status := classStatus(d.Job.ErrorClass)
		s.cfg.Metrics.Refusal(r.Pattern, string(d.Job.ErrorClass))
		w.Header().Set("X-Should-Retry", "false")
		writeJSON(w, status, map[string]any{"error": map[string]any{
			"code": string(d.Job.ErrorClass), "type": "inkwell_job_failed",
			"message": "job " + id + " failed: " + d.Job.Error,
		}})
	default:
		again := "send the same request with the same Idempotency-Key to wait on it again, or GET /v1/jobs/" + id + "?wait=60s"
		if generated {
			w.Header().Set("X-Should-Retry", "false")
			again = "it was sent without an Idempotency-Key, so sending it again would be a second job: GET /v1/jobs/" + id + "?wait=60s reads this one"
		}
		if s.cfg.Waits.Stopping() {
			s.cfg.Metrics.Refusal(r.Pattern, "server_stopping")
			w.Header().Set("Retry-After", "5")
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]any{
				"code": "server_stopping", "type": "inkwell_job_pending",
				"message": "job " + id + " is stored and " + d.Job.Status + ", but this server is stopping and claims no more jobs; " +
					"a lane runs it when one is up (this server restarted, or another on the same database): " + again,
			}})
			return
		}
		s.cfg.Metrics.Refusal(r.Pattern, "still_"+d.Job.Status)
		writeJSON(w, http.StatusGatewayTimeout, map[string]any{"error": map[string]any{
			"code": "still_" + d.Job.Status, "type": "inkwell_job_pending",
			"message": "job " + id + " is still " + d.Job.Status + " after the server's --sync-wait; " + again,
		}})
	}
}

// classStatus is the HTTP status a failed job's class answers with, as
// the provider's own failure would have: its refusal 400, its 429 429,
// its 5xx 502, no answer 504; a cancel 409; anything else 500.
func classStatus(c inkwell.ErrorClass) int {
	switch c {
	case inkwell.ClassRejected:
		return http.StatusBadRequest
	case inkwell.ClassRateLimited:
		return http.StatusTooManyRequests
	case inkwell.ClassProviderError, inkwell.ClassMalformed, inkwell.ClassNotSent:
		return http.StatusBadGateway
	case inkwell.ClassTimeout:
		return http.StatusGatewayTimeout
	case inkwell.ClassCancelled:
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// CompletionOf is a done job's answer as a chat.completion object: the
// provider's whole answer as stored, or for a job stored before answers
// were kept whole (or pruned), one made from its text.
func CompletionOf(d inkwell.JobDetail) json.RawMessage {
	if d.Result == nil {
		return nil
	}
	if len(d.Result.Response) > 0 {
		return d.Result.Response
	}
	var usage map[string]int64
	if d.Result.PromptTokens != nil && d.Result.CompletionTokens != nil {
		usage = map[string]int64{"prompt_tokens": *d.Result.PromptTokens, "completion_tokens": *d.Result.CompletionTokens,
			"total_tokens": *d.Result.PromptTokens + *d.Result.CompletionTokens}
	}
	finish := d.Result.FinishReason
	if finish == "" {
		finish = "stop"
	}
	id := "inkwell-job-" + strconv.FormatInt(d.Job.ID, 10)
	if d.Charge != nil && d.Charge.ProviderRequestID != "" {
		id = d.Charge.ProviderRequestID
	}
	b, _ := json.Marshal(map[string]any{
		"id": id, "object": "chat.completion", "created": d.Result.CreatedAt.Unix(), "model": d.Result.Model,
		"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": d.Result.Text}, "finish_reason": finish}},
		"usage":   usage,
	})
	return b
}
