package inkwell

import (
	"encoding/json"
	"time"
)

// Request is what a client asks for: the body of POST /v1/jobs.
//
// This is the short form: one user message to the default model (or to
// Model, when named). The chat form is ChatRequest.
type Request struct {
	Prompt   string `json:"prompt"`
	Account  string `json:"account,omitempty"`
	MaxWords int    `json:"max_words,omitempty"`
	Model    string `json:"model,omitempty"`
}

// Limits on a request, enforced before anything is written.
const (
	MaxKeyBytes    = 255
	MaxPromptBytes = 8 << 10
	// MaxBodyBytes is one job body in either form: a chat request's
	// history and tools are larger than the short form's prompt, whose
	// own limit (MaxPromptBytes) is the one its client meets.
	MaxBodyBytes    = MaxChatBodyBytes
	MaxAccountBytes = 64
	DefaultAccount  = "default"
	DefaultMaxWords = 50
	MaxMaxWords     = 2000
)

// Job is one row of jobs, the unit a client asked for.
type Job struct {
	ID             int64           `json:"id"`
	IdempotencyKey string          `json:"idempotency_key"`
	RequestHash    string          `json:"request_hash"`
	Payload        json.RawMessage `json:"payload"`
	Status         string          `json:"status"`
	Error          string          `json:"error,omitempty"`
	ErrorClass     ErrorClass      `json:"error_class,omitempty"` // failed: what ended it; queued: the failure it waits out
	Lane           string          `json:"lane,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	StartedAt      *time.Time      `json:"started_at,omitempty"`
	FinishedAt     *time.Time      `json:"finished_at,omitempty"`
	NotBefore      *time.Time      `json:"not_before,omitempty"`    // queued: not claimed before this (back-off)
	GaveUpAfter    int             `json:"gave_up_after,omitempty"` // failed: automatic retry gave up after this many attempts
	PrunedAt       *time.Time      `json:"pruned_at,omitempty"`     // retention removed its prompt and text
	Account        string          `json:"account"`                 // who pays; idempotency keys are unique per account
}

// Attempt is one row of job_attempts: one try at running a job. Finished
// attempts are never updated again.
type Attempt struct {
	ID            int64      `json:"id"`
	JobID         int64      `json:"job_id"`
	AttemptNumber int        `json:"attempt_number"`
	Status        string     `json:"status"`
	Error         string     `json:"error,omitempty"`
	ErrorClass    ErrorClass `json:"error_class,omitempty"`
	Lane          string     `json:"lane"`
	StartedAt     *time.Time `json:"started_at,omitempty"`
	FinishedAt    *time.Time `json:"finished_at,omitempty"`
	RecoveryRunID *int64     `json:"recovery_run_id,omitempty"`
}

// Result is the answer of a done job: its text, and beside it the
// provider's whole answer (Response: the chat.completion object, an
// Anthropic answer mapped to that form), its usage and why it stopped.
type Result struct {
	JobID            int64           `json:"job_id"`
	AttemptID        int64           `json:"attempt_id"`
	Text             string          `json:"text"`
	Model            string          `json:"model,omitempty"`
	FinishReason     string          `json:"finish_reason,omitempty"`
	PromptTokens     *int64          `json:"prompt_tokens,omitempty"`
	CompletionTokens *int64          `json:"completion_tokens,omitempty"`
	Response         json.RawMessage `json:"response,omitempty"`
	CreatedAt        time.Time       `json:"created_at"`
}

// Charge is the money a done job cost its account.
type Charge struct {
	JobID             int64     `json:"job_id"`
	AttemptID         int64     `json:"attempt_id"`
	Account           string    `json:"account"`
	AmountMicros      int64     `json:"amount_micros"`
	ProviderRequestID string    `json:"provider_request_id"`
	Model             string    `json:"model,omitempty"`
	PromptTokens      *int64    `json:"prompt_tokens,omitempty"` // the usage a priced model's charge is computed from
	CompletionTokens  *int64    `json:"completion_tokens,omitempty"`
	CreatedAt         time.Time `json:"created_at"`
}

// JobDetail is a job with everything it owns, as GET /v1/jobs/{id} returns it.
type JobDetail struct {
	Job      Job       `json:"job"`
	Attempts []Attempt `json:"attempts"`
	Result   *Result   `json:"result,omitempty"`
	Charge   *Charge   `json:"charge,omitempty"`
}

// ProviderKey is the idempotency key sent to the provider for a job of a
// database created before installation ids existed (see
// Installation.ProviderKey). It is scoped to the job, not the attempt, so a
// retry after a crash between the provider's answer and the completion
// commit is answered from the provider's own record instead of being
// billed again.
func ProviderKey(jobID int64, idempotencyKey string) string {
	return "inkwell-job-" + itoa(jobID) + "-" + hashShort(idempotencyKey)
}

// Installation is the database's identity, written once by a migration
// (table installation). Its ID goes into every provider idempotency key, so
// two databases (a dev database reset to job 1, a second installation)
// never send the provider the same key for different work.
type Installation struct {
	ID string
	// KeysFromJob is the first job id whose key carries ID. Jobs stored
	// before the migration may already have reached the provider under the
	// old key, and keep it: a retry under a new key could be billed twice.
	KeysFromJob int64
}

// ProviderKey is the idempotency key sent to the provider for a job.
func (in Installation) ProviderKey(jobID int64, idempotencyKey string) string {
	if in.ID == "" || jobID < in.KeysFromJob {
		return ProviderKey(jobID, idempotencyKey)
	}
	return "inkwell-" + in.ID[:min(12, len(in.ID))] + "-job-" + itoa(jobID) + "-" + hashShort(idempotencyKey)
}
