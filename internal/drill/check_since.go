package drill

import (
	"fmt"
	"slices"
	"strings"

	"github.com/inkwell/inkwell"
)

// since checks what may change between the previous snapshot and this
// one: history is append-only, text and money are written once, and a
// restart after a death closes exactly the orphans with evidence.
func (c *checker) since(prev Snapshot, dead []int) {
	cur := c.snap
	for _, pj := range prev.Jobs {
		j, ok := cur.job(pj.ID)
		switch {
		case !ok:
			c.add(pj.ID, InvOneJobPerKey, "the job for key %q, present %s, is gone", pj.Key, prev.Label)
		case j.Key != pj.Key || j.RequestHash != pj.RequestHash || (j.Payload != pj.Payload && !isPruned(j)):
			c.add(pj.ID, InvOneJobPerKey, "the job's key or request changed since %s", prev.Label)
		case pj.Status == inkwell.StatusDone && j.Status != inkwell.StatusDone:
			c.add(pj.ID, InvWrittenOnce, "the job was done %s and is %s now", prev.Label, j.Status)
		}
	}
	for _, pa := range prev.Attempts {
		a, ok := cur.attempt(pa.ID)
		switch {
		case !ok:
			c.add(pa.JobID, InvFinishedImmutable, "attempt #%d (id %d), present %s, is gone", pa.Number, pa.ID, prev.Label)
		case pa.Status != inkwell.StatusRunning && a != pa:
			c.add(pa.JobID, InvFinishedImmutable, "finished attempt #%d (id %d) changed since %s: %s", pa.Number, pa.ID, prev.Label, attemptDiff(pa, a))
		case a.JobID != pa.JobID || a.Number != pa.Number:
			c.add(pa.JobID, InvFinishedImmutable, "attempt id %d was job %d #%d %s and is job %d #%d now", pa.ID, pa.JobID, pa.Number, prev.Label, a.JobID, a.Number)
		}
	}
	c.writtenOnce(prev)
	for _, pr := range prev.Runs {
		if r, ok := cur.run(pr.ID); !ok || r != pr {
			c.add(0, InvRecoveryRun, "recovery run %d changed or vanished since %s", pr.ID, prev.Label)
		}
	}
	if cur.Kind == KindRecovered && (prev.Kind == KindCrash || prev.Kind == KindQuiet) {
		c.recovered(prev, dead)
	}
}

// writtenOnce: a result or charge, once there, stays exactly as it was.
func (c *checker) writtenOnce(prev Snapshot) {
	for _, pr := range prev.Results {
		rs := c.snap.resultsOf(pr.JobID)
		if j, ok := c.snap.job(pr.JobID); ok && isPruned(j) {
			// Retention removes the text and keeps the row (InvPruned).
			pr.Text = ""
		}
		if !slices.Contains(rs, pr) {
			c.add(pr.JobID, InvWrittenOnce, "the result written for attempt id %d (present %s) changed or vanished", pr.AttemptID, prev.Label)
		}
	}
	for _, pc := range prev.Charges {
		if cs := c.snap.chargesOf(pc.JobID); !slices.Contains(cs, pc) {
			c.add(pc.JobID, InvWrittenOnce, "the charge for provider request %s (present %s) changed or vanished", pc.ProviderRequestID, prev.Label)
		}
	}
}

// recovered checks the first ready snapshot after serve died: recovery
// wrote a new recovery_runs row naming the dead holder as evidence, and
// closed every attempt that was running when it died, linked to that row.
func (c *checker) recovered(prev Snapshot, dead []int) {
	cur := c.snap
	var newRuns []RecoveryRunRow
	for _, r := range cur.Runs {
		if _, old := prev.run(r.ID); !old {
			newRuns = append(newRuns, r)
		}
	}
	switch {
	case len(newRuns) == 0:
		c.add(0, InvRecoveryRun, "serve restarted (%s) and became ready without writing a recovery_runs row", prev.Label)
	case len(newRuns) > 1:
		// Between these reads one serve started: its startup recovery ran
		// once, and closes every orphan in one run (docs/design.md §8).
		c.add(0, InvRecoveryRun, "serve restarted once (%s) and %d recovery_runs rows were written; one restart recovers once, in one run", prev.Label, len(newRuns))
	}
	isNew := func(id int64) bool {
		return slices.ContainsFunc(newRuns, func(r RecoveryRunRow) bool { return r.ID == id })
	}
	var orphans int64
	for _, pa := range prev.Attempts {
		if pa.Status != inkwell.StatusRunning {
			continue
		}
		orphans++
		a, _ := cur.attempt(pa.ID)
		switch {
		case a.Status == inkwell.StatusRunning:
			c.add(pa.JobID, InvNothingRunning, "attempt #%d (id %d) was running when serve died and is still running after recovery", pa.Number, pa.ID)
		case !a.RecoveryRunID.Valid || !isNew(a.RecoveryRunID.Int64):
			c.add(pa.JobID, InvNothingRunning, "orphan attempt #%d (id %d) is %s but names no recovery run of this restart", pa.Number, pa.ID, a.Status)
		case a.Error.String != inkwell.ErrWorkerRestarted:
			c.add(pa.JobID, InvNothingRunning, "orphan attempt #%d closed with error %q, want %q", pa.Number, a.Error.String, inkwell.ErrWorkerRestarted)
		}
	}
	var closed int64
	for _, r := range newRuns {
		closed += r.AttemptsClosed
		c.evidence(prev, r, dead)
	}
	if closed != orphans {
		c.add(0, InvRecoveryRun, "recovery closed %d attempts; %d were running when serve died", closed, orphans)
	}
}

// evidence checks that a recovery run names the holder it proved dead:
// the pid the lanes row held, which must be a process the drill saw die.
func (c *checker) evidence(prev Snapshot, r RecoveryRunRow, dead []int) {
	var holder *LaneRow
	for i := range prev.Lanes {
		if prev.Lanes[i].Name == r.Lane {
			holder = &prev.Lanes[i]
		}
	}
	switch {
	case holder == nil && r.PrevPID.Valid:
		c.add(0, InvRecoveryRun, "recovery run %d names previous pid %d, but no process had registered lane %s", r.ID, r.PrevPID.Int64, r.Lane)
	case holder != nil && (!r.PrevPID.Valid || r.PrevPID.Int64 != holder.PID):
		c.add(0, InvRecoveryRun, "recovery run %d names previous pid %s; the lanes row named pid %d", r.ID, nullPID(r), holder.PID)
	case holder != nil && !slices.Contains(dead, int(holder.PID)):
		c.add(0, InvRecoveryRun, "recovery run %d proved pid %d dead, but the drill never saw that process die", r.ID, holder.PID)
	}
}

func nullPID(r RecoveryRunRow) string {
	if !r.PrevPID.Valid {
		return "NULL"
	}
	return fmt.Sprint(r.PrevPID.Int64)
}

// attemptDiff names the columns that differ between two versions of an attempt.
func attemptDiff(a, b AttemptRow) string {
	var d []string
	field := func(name string, x, y any) {
		if x != y {
			d = append(d, fmt.Sprintf("%s %v -> %v", name, x, y))
		}
	}
	field("status", a.Status, b.Status)
	field("error", a.Error.String, b.Error.String)
	field("lane", a.Lane.String, b.Lane.String)
	field("started_at", a.StartedAt.String, b.StartedAt.String)
	field("finished_at", a.FinishedAt.String, b.FinishedAt.String)
	field("recovery_run_id", a.RecoveryRunID.Int64, b.RecoveryRunID.Int64)
	field("attempt_number", a.Number, b.Number)
	return strings.Join(d, "; ")
}

func (s Snapshot) attempt(id int64) (AttemptRow, bool) {
	return firstWhere(s.Attempts, func(a AttemptRow) bool { return a.ID == id })
}

func (s Snapshot) run(id int64) (RecoveryRunRow, bool) {
	return firstWhere(s.Runs, func(r RecoveryRunRow) bool { return r.ID == id })
}
