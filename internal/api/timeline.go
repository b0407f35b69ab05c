package api

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// timelineEntry is one event in a job's life as the job page shows it.
type timelineEntry struct {
	At    *time.Time // nil when the database holds no time for it (a retry)
	Kind  string     // accepted, started, failed, done, retried, running
	Title string
	Lines []string
}

// timeline orders what the rows say happened to a job: accepted, each
// attempt's start and end (with the recovery run that closed it and that
// run's evidence), the retries between attempts, and the result and charge.
func timeline(d inkwell.JobDetail, runs map[int64]*store.RecoveryRun) []timelineEntry {
	j := d.Job
	out := []timelineEntry{{At: &j.CreatedAt, Kind: "accepted", Title: "accepted", Lines: []string{"idempotency key " + j.IdempotencyKey}}}
	for i, a := range d.Attempts {
		out = append(out, attemptStart(a))
		switch a.Status {
		case inkwell.StatusRunning:
			out = append(out, timelineEntry{Kind: "running", Title: fmt.Sprintf("attempt %d running on lane %s", a.AttemptNumber, a.Lane)})
			continue
		case inkwell.StatusDone:
			out = append(out, attemptDone(a, d))
			continue
		}
		out = append(out, attemptFailed(a, runs))
		if i < len(d.Attempts)-1 || j.Status == inkwell.StatusQueued {
			out = append(out, timelineEntry{Kind: "retried", Title: "retried: failed → queued",
				Lines: []string{"the next attempt reuses the job's provider key"}})
		}
	}
	return out
}

func attemptStart(a inkwell.Attempt) timelineEntry {
	e := timelineEntry{At: a.StartedAt, Kind: "started", Title: fmt.Sprintf("attempt %d started on lane %s", a.AttemptNumber, a.Lane)}
	if a.Lane == "" {
		e.Title = fmt.Sprintf("attempt %d (back-filled by recovery for a legacy job)", a.AttemptNumber)
	}
	return e
}

func attemptDone(a inkwell.Attempt, d inkwell.JobDetail) timelineEntry {
	e := timelineEntry{At: a.FinishedAt, Kind: "done", Title: fmt.Sprintf("attempt %d done%s", a.AttemptNumber, took(a))}
	if c := d.Charge; c != nil {
		e.Lines = append(e.Lines, fmt.Sprintf("charged %d.%06d to account %s (provider request %s)",
			c.AmountMicros/1_000_000, c.AmountMicros%1_000_000, c.Account, c.ProviderRequestID))
	}
	if d.Result != nil {
		e.Lines = append(e.Lines, fmt.Sprintf("result stored: %d characters", len(d.Result.Text)))
	}
	return e
}

func attemptFailed(a inkwell.Attempt, runs map[int64]*store.RecoveryRun) timelineEntry {
	e := timelineEntry{At: a.FinishedAt, Kind: "failed", Title: fmt.Sprintf("attempt %d failed%s", a.AttemptNumber, took(a))}
	e.Lines = append(e.Lines, "error: "+a.Error)
	if a.RecoveryRunID == nil {
		return e
	}
	run := runs[*a.RecoveryRunID]
	if run == nil {
		e.Lines = append(e.Lines, fmt.Sprintf("closed by recovery run %d", *a.RecoveryRunID))
		return e
	}
	return withRecovery(e, run)
}

// withRecovery adds the evidence that allowed recovery to close the attempt.
func withRecovery(e timelineEntry, run *store.RecoveryRun) timelineEntry {
	e.Lines = append(e.Lines, fmt.Sprintf("closed by recovery run %d of lane %s at %s (%s)", run.ID, run.Lane,
		inkwell.FormatTime(run.StartedAt), run.LockMethod))
	var ev store.Evidence
	if json.Unmarshal([]byte(run.Evidence), &ev) != nil {
		return e
	}
	e.Lines = append(e.Lines, "evidence: "+ev.Proof)
	if p := ev.LaneRow; p != nil {
		e.Lines = append(e.Lines, fmt.Sprintf("previous holder: pid %d on %s, incarnation %s, last heartbeat %s",
			p.PID, p.Host, p.Incarnation, inkwell.FormatTime(p.HeartbeatAt)))
	}
	return e
}

func took(a inkwell.Attempt) string {
	if a.StartedAt == nil || a.FinishedAt == nil {
		return ""
	}
	return " after " + span(a.FinishedAt.Sub(*a.StartedAt))
}

// span prints a short duration precisely (45ms, 2.3s) and a long one as
// the views print ages.
func span(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return shortDuration(d)
}
