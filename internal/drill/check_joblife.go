package drill

import (
	"fmt"
	"strings"

	"github.com/inkwell/inkwell"
)

// The invariants of a job's life without a human (docs/design.md §9): failure
// classes, automatic retry (reschedule), cancel and retention (prune).
const (
	InvErrorClass     = "§9 every failed attempt and failed job has a valid error_class; a running or done one has none"
	InvRestartedClass = "§9 an attempt closed by recovery is worker_restarted, and only such an attempt"
	InvRetrySafe      = "§9 a job goes on after a failed attempt automatically only when its class is retry-safe"
	InvNotBefore      = "§9 a queued job waiting for not_before got it from its last attempt, failed with a retry-safe class"
	InvGaveUp         = "§9 gave_up_after equals the number of attempts, and the last one failed with a retry-safe class"
	InvCancelled      = "§9 a cancelled job stays failed (cancelled): no later attempt, result or charge"
	InvCancelAsked    = "§9 a job is cancelled only when a client asked, and a cancel answered 200 left it cancelled"
	InvPruned         = "§9 a pruned job keeps its key, hash, status, attempts and charge; only its prompt and text go"
	InvPrunedNotRerun = "§9 a re-send of a pruned job's key answers 200 with the pruned job, and it never runs again"
)

func isCancelled(j JobRow) bool {
	return j.Status == inkwell.StatusFailed && j.ErrorClass.String == string(inkwell.ClassCancelled)
}

func isPruned(j JobRow) bool { return j.PrunedAt.Valid }

// joblife checks, on one snapshot, what §9 says of a job and its attempts.
func (c *checker) joblife(j JobRow, atts []AttemptRow) {
	class := inkwell.ErrorClass(j.ErrorClass.String)
	switch {
	case j.Status == inkwell.StatusFailed && !class.Valid():
		c.add(j.ID, InvErrorClass, "job is failed with error_class %q, not one of %v", j.ErrorClass.String, inkwell.ErrorClasses)
	case (j.Status == inkwell.StatusRunning || j.Status == inkwell.StatusDone) && j.ErrorClass.Valid:
		c.add(j.ID, InvErrorClass, "job is %s with error_class %q", j.Status, j.ErrorClass.String)
	}
	for _, a := range atts {
		ac := inkwell.ErrorClass(a.ErrorClass.String)
		switch {
		case a.Status == inkwell.StatusFailed && !ac.Valid():
			c.add(j.ID, InvErrorClass, "attempt #%d is failed with error_class %q, not one of %v", a.Number, a.ErrorClass.String, inkwell.ErrorClasses)
		case a.Status != inkwell.StatusFailed && a.ErrorClass.Valid:
			c.add(j.ID, InvErrorClass, "attempt #%d is %s with error_class %q", a.Number, a.Status, a.ErrorClass.String)
		}
		byRecovery := a.RecoveryRunID.Valid
		switch {
		case byRecovery && a.Status == inkwell.StatusFailed && ac != inkwell.ClassWorkerRestarted:
			c.add(j.ID, InvRestartedClass, "attempt #%d was closed by recovery run %d with class %q, want %s", a.Number, a.RecoveryRunID.Int64, ac, inkwell.ClassWorkerRestarted)
		case !byRecovery && ac == inkwell.ClassWorkerRestarted:
			c.add(j.ID, InvRestartedClass, "attempt #%d is %s but no recovery run closed it", a.Number, ac)
		}
	}
	var last *AttemptRow
	if len(atts) > 0 {
		last = &atts[len(atts)-1]
	}
	if j.NotBefore.Valid {
		switch {
		case j.Status != inkwell.StatusQueued:
			c.add(j.ID, InvNotBefore, "job is %s with not_before %s; only a queued job waits for a back-off", j.Status, j.NotBefore.String)
		case last == nil || last.Status != inkwell.StatusFailed:
			c.add(j.ID, InvNotBefore, "job is queued with not_before %s, but its last attempt is %s", j.NotBefore.String, describeLast(last))
		case last.ErrorClass.String != j.ErrorClass.String || !c.retrySafe(j, inkwell.ErrorClass(last.ErrorClass.String)):
			c.add(j.ID, InvNotBefore, "job is queued with not_before %s and class %q after attempt #%d failed %q; want that attempt's class, and a retry-safe one",
				j.NotBefore.String, j.ErrorClass.String, last.Number, last.ErrorClass.String)
		}
	}
	if j.GaveUpAfter.Valid {
		switch {
		case j.Status != inkwell.StatusFailed:
			c.add(j.ID, InvGaveUp, "job is %s with gave_up_after %d", j.Status, j.GaveUpAfter.Int64)
		case j.GaveUpAfter.Int64 != int64(len(atts)):
			c.add(j.ID, InvGaveUp, "gave_up_after is %d, but the job has %d attempt(s)", j.GaveUpAfter.Int64, len(atts))
		case last == nil || last.Status != inkwell.StatusFailed || !c.retrySafe(j, inkwell.ErrorClass(last.ErrorClass.String)):
			c.add(j.ID, InvGaveUp, "gave_up_after is %d, but its last attempt is %s: automatic retry gives up only on a retry-safe failure", j.GaveUpAfter.Int64, describeLast(last))
		}
	}
	if isCancelled(j) && last != nil && last.Status == inkwell.StatusDone {
		c.add(j.ID, InvCancelled, "job is cancelled, but its last attempt #%d is done", last.Number)
	}
	if isPruned(j) {
		if j.Status != inkwell.StatusDone && j.Status != inkwell.StatusFailed {
			c.add(j.ID, InvPruned, "job is %s and pruned; only a finished job is pruned", j.Status)
		}
		for _, r := range c.snap.resultsOf(j.ID) {
			if r.Text != "" {
				c.add(j.ID, InvPruned, "job was pruned at %s but its result still holds text %q", j.PrunedAt.String, clip(r.Text))
			}
		}
	}
}

func describeLast(a *AttemptRow) string {
	if a == nil {
		return "none"
	}
	s := fmt.Sprintf("#%d %s", a.Number, a.Status)
	if a.ErrorClass.Valid {
		s += " (" + a.ErrorClass.String + ")"
	}
	return s
}

// retrySafe is the class's policy for job j: a timeout or shutdown is
// retry-safe only on a provider serve trusts to honour keys (the drill's
// sim-openai; never its anthropic provider), as its route says.
func (c *checker) retrySafe(j JobRow, class inkwell.ErrorClass) bool {
	return class.RetrySafe(c.route(j).honoursKeys)
}

// joblifeSince checks what §9 says may change between two snapshots: a
// cancelled job stays so, and a pruned one keeps everything but its
// prompt and text, and never runs again.
func (c *checker) joblifeSince(prev Snapshot) {
	cur := c.snap
	prevBills, curBills := prev.billings(), cur.billings()
	for _, pj := range prev.Jobs {
		j, ok := cur.job(pj.ID)
		if !ok {
			continue // InvOneJobPerKey says so
		}
		patts, atts := prev.attemptsOf(pj.ID), cur.attemptsOf(pj.ID)
		if isCancelled(pj) && !c.retried[pj.ID] {
			switch {
			case !isCancelled(j):
				c.add(pj.ID, InvCancelled, "the job was cancelled %s and is %s (%s) now, though no client retried it", prev.Label, j.Status, j.ErrorClass.String)
			case len(atts) != len(patts):
				c.add(pj.ID, InvCancelled, "the job was cancelled %s with %d attempt(s), and has %d now", prev.Label, len(patts), len(atts))
			}
		}
		if !isPruned(j) {
			if isPruned(pj) {
				c.add(pj.ID, InvPruned, "the job was pruned %s and is not now", prev.Label)
			}
			continue
		}
		key := cur.Installation.ProviderKey(j.ID, j.Key)
		pb, cb := prevBills[key], curBills[key]
		switch {
		case j.Key != pj.Key || j.RequestHash != pj.RequestHash:
			c.add(j.ID, InvPruned, "pruning changed the job's key or request hash")
		case j.Status != pj.Status || j.ErrorClass != pj.ErrorClass:
			c.add(j.ID, InvPruned, "the job was %s (%s) %s and is %s (%s) pruned", pj.Status, pj.ErrorClass.String, prev.Label, j.Status, j.ErrorClass.String)
		case len(atts) != len(patts):
			c.add(j.ID, InvPrunedNotRerun, "the job had %d attempt(s) %s and has %d pruned", len(patts), prev.Label, len(atts))
		case len(cur.chargesOf(j.ID)) != len(prev.chargesOf(pj.ID)) || len(cur.resultsOf(j.ID)) != len(prev.resultsOf(pj.ID)):
			c.add(j.ID, InvPruned, "the job had %d charge(s) and %d result row(s) %s, and has %d and %d pruned",
				len(prev.chargesOf(pj.ID)), len(prev.resultsOf(pj.ID)), prev.Label, len(cur.chargesOf(j.ID)), len(cur.resultsOf(j.ID)))
		case isPruned(pj) && (cb.calls != pb.calls || cb.bills != pb.bills):
			c.add(j.ID, InvPrunedNotRerun, "the provider was called for the pruned job since %s: %d/%d calls/bills then, %d/%d now", prev.Label, pb.calls, pb.bills, cb.calls, cb.bills)
		}
		if pj.Payload != j.Payload && strings.Contains(j.Payload, promptOf(pj.Payload)) && promptOf(pj.Payload) != "" {
			c.add(j.ID, InvPruned, "the job was pruned but its payload still holds the prompt")
		}
	}
}

// promptOf is the prompt in a stored payload, "" when it has none.
func promptOf(payload string) string {
	_, rest, ok := strings.Cut(payload, `"prompt":"`)
	if !ok {
		return ""
	}
	p, _, _ := strings.Cut(rest, `"`)
	return p
}

// joblifeEvidence checks the job-life invariants that need what the
// clients sent: a job went on after a failure that is not retry-safe only
// when a client retried it; a job was cancelled only when a client asked,
// and a cancel answered 200 left it cancelled; a re-send of a pruned key
// answered 200 with the pruned job.
func (c *checker) joblifeEvidence(e Evidence) {
	retries, cancels, cancelled200 := map[int64]int{}, map[int64]int{}, map[int64]bool{}
	for _, s := range e.Requests {
		if s.Outcome == OutcomeRefused {
			continue
		}
		switch {
		case strings.HasSuffix(s.Path, "/retry"):
			retries[s.JobID]++
		case strings.HasSuffix(s.Path, "/cancel"):
			cancels[s.JobID]++
			if s.Outcome == OutcomeOK {
				cancelled200[s.JobID] = true
			}
		}
	}
	for _, j := range c.snap.Jobs {
		atts := c.snap.attemptsOf(j.ID)
		var unsafe []string
		for _, a := range atts[:max(len(atts)-1, 0)] {
			if a.Status == inkwell.StatusFailed && !c.retrySafe(j, inkwell.ErrorClass(a.ErrorClass.String)) {
				unsafe = append(unsafe, fmt.Sprintf("#%d (%s)", a.Number, a.ErrorClass.String))
			}
		}
		if len(unsafe) > retries[j.ID] {
			c.add(j.ID, InvRetrySafe, "the job went on after attempt(s) %s, whose class is not retry-safe, %d time(s), but clients retried it %d time(s): something re-queued it on its own",
				strings.Join(unsafe, ", "), len(unsafe), retries[j.ID])
		}
		switch {
		case isCancelled(j) && cancels[j.ID] == 0:
			c.add(j.ID, InvCancelAsked, "the job is cancelled, but no client asked to cancel it")
		case cancelled200[j.ID] && !isCancelled(j) && retries[j.ID] == 0:
			c.add(j.ID, InvCancelAsked, "a cancel of the job was answered 200, but it is %s (%s)", j.Status, j.ErrorClass.String)
		}
	}
	for _, s := range e.Requests {
		if !s.AfterPrune || s.Path != pathJobs {
			continue
		}
		j, ok := c.snap.jobByKey(s.Key)
		switch {
		case !ok:
			continue // answers() says so
		case s.Outcome != OutcomeOK || s.Status != 200 || s.JobID != j.ID:
			c.add(j.ID, InvPrunedNotRerun, "the re-send #%d of pruned key %q was answered %s, want 200 with job %d", s.Seq, s.Key, s, j.ID)
		case !s.Pruned:
			c.add(j.ID, InvPrunedNotRerun, "the re-send #%d of pruned key %q was answered with a job that does not say it was pruned", s.Seq, s.Key)
		}
	}
}
