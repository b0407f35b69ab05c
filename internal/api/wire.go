package api

import (
	"encoding/json"
	"time"

	"github.com/inkwell/inkwell/internal/store"
)

// The HTTP API's answers are types of this package: the wire format
// belongs to the edge, so a store type can change without changing what
// clients read. Times are time.Time (RFC 3339 in JSON). Job answers use
// the root vocabulary (inkwell.JobDetail), which is already the wire form.

// OverviewResponse is GET /v1/overview (and `inkwell status --json`).
type OverviewResponse struct {
	Overview        []StatusRow  `json:"overview"`
	Lanes           []Lane       `json:"lanes"`
	LastRecoveryRun *RecoveryRun `json:"last_recovery_run"`
	// Jobs is filled by `inkwell status --json` only: job_board's rows.
	Jobs []BoardJob `json:"jobs,omitempty"`
	// SilentLanes is filled by `inkwell status --json` only: per silent
	// lane, what its host can tell of its process and what to do.
	SilentLanes map[string]string `json:"silent_lanes,omitempty"`
}

// StatusRow is one row of job_overview: one status.
type StatusRow struct {
	Status           string `json:"status"`
	Jobs             int64  `json:"jobs"`
	OldestJobID      *int64 `json:"oldest_job_id,omitempty"`
	OldestAgeSeconds *int64 `json:"oldest_age_seconds,omitempty"`
	OldestAge        string `json:"oldest_age,omitempty"`
	NextAction       string `json:"next_action"`
}

// Lane is one row of lane_liveness.
type Lane struct {
	Lane                string     `json:"lane"`
	State               string     `json:"state"`
	Alive               bool       `json:"alive"`
	HeartbeatAgeSeconds int64      `json:"heartbeat_age_seconds"`
	HeartbeatAge        string     `json:"heartbeat_age"`
	RunningJobs         int64      `json:"running_jobs"`
	HeartbeatAt         time.Time  `json:"heartbeat_at"`
	PID                 int        `json:"pid"`
	Host                string     `json:"host"`
	Incarnation         string     `json:"incarnation"`
	StartedAt           time.Time  `json:"started_at"`
	StoppedAt           *time.Time `json:"stopped_at,omitempty"`
	StopReason          string     `json:"stop_reason,omitempty"`
	AnswersWaiting      int64      `json:"answers_waiting"`
	Slots               int        `json:"slots"`
	SlotsInUse          int        `json:"slots_in_use"`
	PausedUntil         *time.Time `json:"paused_until,omitempty"`
}

// RecoveryRun is one row of recovery_runs, its evidence as JSON.
type RecoveryRun struct {
	ID                 int64           `json:"id"`
	Lane               string          `json:"lane"`
	StartedAt          time.Time       `json:"started_at"`
	LockMethod         string          `json:"lock_method"`
	Evidence           json.RawMessage `json:"evidence"`
	AttemptsClosed     int64           `json:"attempts_closed"`
	AttemptsBackfilled int64           `json:"attempts_backfilled"`
	JobsFailed         int64           `json:"jobs_failed"`
	Anomalies          string          `json:"anomalies,omitempty"`
}

// BoardJob is one row of job_board: a job that is not done.
type BoardJob struct {
	ID         int64      `json:"id"`
	Status     string     `json:"status"`
	Lane       string     `json:"lane,omitempty"`
	Attempt    int        `json:"attempt"`
	Since      *time.Time `json:"since,omitempty"`
	AgeSeconds *int64     `json:"age_seconds,omitempty"`
	Age        string     `json:"age,omitempty"`
	Error      string     `json:"error,omitempty"`
	NextAction string     `json:"next_action"`
	// ErrorClass is what kind of failure ended a failed job, or the one a
	// queued job waits out after an automatic retry (docs/design.md §9).
	ErrorClass string `json:"error_class,omitempty"`
	// PrunedAt: retention removed a failed job's prompt; it cannot run again.
	PrunedAt *time.Time `json:"pruned_at,omitempty"`
}

// NewOverviewResponse puts the store's operator reads in their wire form.
func NewOverviewResponse(ov []store.OverviewRow, lanes []store.LaneState, run *store.RecoveryRun) OverviewResponse {
	r := OverviewResponse{Overview: make([]StatusRow, len(ov)), Lanes: make([]Lane, len(lanes)), LastRecoveryRun: NewRecoveryRun(run)}
	for i, o := range ov {
		r.Overview[i] = StatusRow(o)
	}
	for i, l := range lanes {
		r.Lanes[i] = Lane(l)
	}
	return r
}

// NewRecoveryRun is a recovery run in its wire form (nil for nil).
func NewRecoveryRun(run *store.RecoveryRun) *RecoveryRun {
	if run == nil {
		return nil
	}
	ev := json.RawMessage(run.Evidence)
	if !json.Valid(ev) {
		ev, _ = json.Marshal(run.Evidence) // stored evidence is JSON; anything else travels as a string
	}
	return &RecoveryRun{ID: run.ID, Lane: run.Lane, StartedAt: run.StartedAt, LockMethod: run.LockMethod, Evidence: ev,
		AttemptsClosed: run.AttemptsClosed, AttemptsBackfilled: run.AttemptsBackfilled, JobsFailed: run.JobsFailed, Anomalies: run.Anomalies}
}

// NewBoardJobs are job_board rows in their wire form.
func NewBoardJobs(rows []store.BoardRow) []BoardJob {
	out := make([]BoardJob, len(rows))
	for i, b := range rows {
		out[i] = BoardJob(b)
	}
	return out
}
