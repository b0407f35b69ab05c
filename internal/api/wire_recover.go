package api

import "github.com/inkwell/inkwell/internal/store"

// RecoveryReport is what `inkwell recover --json` prints: what one startup
// recovery (or a dry run of it) did, and the evidence it acted on.
// Evidence keeps the form stored in recovery_runs.evidence.
type RecoveryReport struct {
	RunID              int64          `json:"run_id,omitempty"`
	Lane               string         `json:"lane"`
	DryRun             bool           `json:"dry_run"`
	AttemptsClosed     int64          `json:"attempts_closed"`
	AttemptsBackfilled int64          `json:"attempts_backfilled"`
	JobsFailed         int64          `json:"jobs_failed"`
	Anomalies          []string       `json:"anomalies,omitempty"`
	Evidence           store.Evidence `json:"evidence"`
	// PreviousStopped is the stop_reason written on the dead holder's
	// lanes row (absent when there was no live-looking row to stop).
	PreviousStopped string `json:"previous_stopped,omitempty"`
}

// RecoveryReportOf is rep on the wire.
func RecoveryReportOf(rep store.RecoveryReport) RecoveryReport {
	return RecoveryReport{
		RunID: rep.RunID, Lane: rep.Lane, DryRun: rep.DryRun,
		AttemptsClosed: rep.AttemptsClosed, AttemptsBackfilled: rep.AttemptsBackfilled, JobsFailed: rep.JobsFailed,
		Anomalies: rep.Anomalies, Evidence: rep.Evidence, PreviousStopped: rep.PreviousStopped,
	}
}
