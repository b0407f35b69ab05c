package drill

import (
	"fmt"
	"slices"
	"strings"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/catalog"
)

// Invariants of docs/design.md §7, as a violation names them.
const (
	InvOneJobPerKey      = "1 one job per idempotency key"
	InvNoRowForRefused   = "1 no row for a refused request"
	InvOneResult         = "2 at most one result per job"
	InvOneCharge         = "2 at most one charge per job"
	InvDoneIffBoth       = "2 a job is done exactly when it has a result and a charge"
	InvHighestDone       = "2 the highest attempt is the one done attempt"
	InvWrittenOnce       = "2 text and money are written once and never change"
	InvOneRunning        = "3 a running job has exactly one running attempt"
	InvNothingRunning    = "3 nothing left running after recovery"
	InvNumbering         = "4 attempt numbers run 1..n without gaps"
	InvFinishedImmutable = "4 a finished attempt never changes"
	InvFinishedFields    = "5 failed and done rows have finished_at; failed rows have an error"
	InvBilledOnce        = "6 the provider billed each job at most once"
	InvUnkeyedBills      = "6 a provider that honours no idempotency key billed a job more than once only for calls whose answer was lost (an attempt ended worker_restarted, shutdown, timeout or cancelled)"
	InvChargeKnown       = "6 each charge names a provider request the provider knows"
	InvBilledText        = "6 the stored text is the text the provider billed for"
	InvPricedCharge      = "§12 a priced model's charge is its answer's usage at the model's prices, the usage the provider counted for the billed text"
	InvReservedWorst     = "§12 accept reserves a job's provable worst case on its model"
	InvRecoveryRun       = "7 each recovery run wrote one row whose counts equal the rows it changed"
	InvIntegrity         = "8 the database passes its own integrity checks"
	InvAllDone           = "9 every job is done in the end, but one its client cancelled"
)

// Violation is one broken invariant: where it was seen, on which job, and
// what exactly is wrong.
type Violation struct {
	Snapshot  string // the snapshot's label
	JobID     int64  // 0 when the violation is not about one job
	Invariant string // one of the Inv constants
	Detail    string
}

func (v Violation) String() string {
	job := ""
	if v.JobID != 0 {
		job = fmt.Sprintf("job %d: ", v.JobID)
	}
	return fmt.Sprintf("%s: %sinvariant %s: %s", v.Snapshot, job, v.Invariant, v.Detail)
}

// Evidence is everything the checker judges: the snapshots in the order
// they were taken, and what the drill's clients sent and saw.
type Evidence struct {
	Snapshots []Snapshot
	// Keys are the idempotency keys the clients used; bills under them
	// are this scenario's, whatever else the shared simulator billed.
	Keys []string
	// Requests is every POST the clients sent, with its outcome.
	Requests []Sent
	// Texts is the text each client read for its key at the end.
	Texts map[string]string
	// DeadPIDs are the serve processes the drill saw die.
	DeadPIDs []int
	// Catalog is the models and providers serve ran with (the config file
	// the drill writes, models.go): each job is judged by its model's
	// provider (does it honour idempotency keys; does it key its bills)
	// and prices. Nil: every job ran on one openai provider whose keys the
	// simulator honours, unpriced, and HonoursKeys says whether serve
	// trusted it to (which makes timeout and shutdown retry-safe,
	// docs/design.md §9).
	Catalog     *catalog.Catalog
	HonoursKeys bool
	// WebhookIDs are the webhook-ids the drill's receiver got, with their
	// counts (nil: not known; check_webhooks.go).
	WebhookIDs map[string]int
	// OverBudget are the keys sent past their account's budget, each to
	// be refused 402 (check_budget.go).
	OverBudget []string
}

// Check returns every violation of docs/design.md §7 in e; none means the
// database told the truth at every snapshot.
func Check(e Evidence) []Violation {
	var out []Violation
	retried := map[int64]bool{}
	for _, s := range e.Requests {
		if strings.HasSuffix(s.Path, "/retry") && s.Outcome != OutcomeRefused {
			retried[s.JobID] = true
		}
	}
	for i, s := range e.Snapshots {
		c := checker{snap: s, keys: e.Keys, cat: e.Catalog, honoursKeys: e.HonoursKeys, retried: retried}
		c.static()
		c.webhooks() // check_webhooks.go
		if i > 0 {
			c.since(e.Snapshots[i-1], e.DeadPIDs)
			c.joblifeSince(e.Snapshots[i-1])
		}
		if s.Kind == KindFinal {
			c.final(e)
			c.joblifeEvidence(e)
			c.webhooksFinal(e)
			c.overBudget(e) // check_budget.go
		}
		out = append(out, c.out...)
	}
	return out
}

// checker judges one snapshot, alone and against the one before it.
type checker struct {
	snap        Snapshot
	keys        []string
	cat         *catalog.Catalog // Evidence.Catalog
	honoursKeys bool             // Evidence.HonoursKeys
	retried     map[int64]bool   // jobs a client retried (the request may have taken effect)
	out         []Violation
}

func (c *checker) add(jobID int64, inv, format string, args ...any) {
	c.out = append(c.out, Violation{Snapshot: c.snap.Label, JobID: jobID, Invariant: inv, Detail: fmt.Sprintf(format, args...)})
}

// static checks what must hold in any single snapshot.
func (c *checker) static() {
	s := c.snap
	byKey := map[string][]int64{}
	for _, j := range s.Jobs {
		byKey[j.Key] = append(byKey[j.Key], j.ID)
	}
	for key, ids := range byKey {
		if len(ids) > 1 {
			c.add(ids[1], InvOneJobPerKey, "key %q has %d jobs: %v", key, len(ids), ids)
		}
	}
	known := map[int64]bool{}
	for _, j := range s.Jobs {
		known[j.ID] = true
		c.job(j)
	}
	for _, a := range s.Attempts {
		if !known[a.JobID] {
			c.add(a.JobID, InvIntegrity, "attempt %d belongs to job %d, which does not exist", a.ID, a.JobID)
		}
	}
	c.recoveryRuns()
	c.ledger()
	c.budgets()      // check_budget.go
	c.reservations() // check_models.go
	for _, p := range s.Integrity {
		c.add(0, InvIntegrity, "%s", p)
	}
}

// job checks one job against its attempts, result and charge.
func (c *checker) job(j JobRow) {
	atts := c.snap.attemptsOf(j.ID)
	results := c.snap.resultsOf(j.ID)
	charges := c.snap.chargesOf(j.ID)
	if len(results) > 1 {
		c.add(j.ID, InvOneResult, "%d results", len(results))
	}
	if len(charges) > 1 {
		c.add(j.ID, InvOneCharge, "%d charges (provider requests %s)", len(charges), requestIDs(charges))
	}
	done := j.Status == inkwell.StatusDone
	if done && (len(results) == 0 || len(charges) == 0) {
		c.add(j.ID, InvDoneIffBoth, "job is done with %d result(s) and %d charge(s)", len(results), len(charges))
	}
	if !done && (len(results) > 0 || len(charges) > 0) {
		c.add(j.ID, InvDoneIffBoth, "job is %s but has %d result(s) and %d charge(s)", j.Status, len(results), len(charges))
	}
	c.numbering(j, atts)
	c.running(j, atts)
	c.doneAttempt(j, atts, results, charges)
	c.finishedFields(j, atts)
	c.joblife(j, atts) // check_joblife.go
}

func (c *checker) numbering(j JobRow, atts []AttemptRow) {
	nums := make([]int, len(atts))
	for i, a := range atts {
		nums[i] = a.Number
	}
	for i, n := range nums {
		if n != i+1 {
			c.add(j.ID, InvNumbering, "attempt numbers are %v, want 1..%d", nums, len(nums))
			return
		}
	}
}

func (c *checker) running(j JobRow, atts []AttemptRow) {
	var running []AttemptRow
	for _, a := range atts {
		if a.Status == inkwell.StatusRunning {
			running = append(running, a)
		}
	}
	switch {
	case j.Status == inkwell.StatusRunning && len(running) != 1:
		c.add(j.ID, InvOneRunning, "job is running with %d running attempts", len(running))
	case j.Status == inkwell.StatusRunning && running[0].Number != atts[len(atts)-1].Number:
		c.add(j.ID, InvOneRunning, "running attempt #%d is not the highest (#%d)", running[0].Number, atts[len(atts)-1].Number)
	case j.Status != inkwell.StatusRunning && len(running) > 0:
		c.add(j.ID, InvOneRunning, "attempt #%d is running under a job that is %s", running[0].Number, j.Status)
	}
}

func (c *checker) doneAttempt(j JobRow, atts []AttemptRow, results []ResultRow, charges []ChargeRow) {
	var done []AttemptRow
	for _, a := range atts {
		if a.Status == inkwell.StatusDone {
			done = append(done, a)
		}
	}
	if j.Status != inkwell.StatusDone {
		if len(done) > 0 {
			c.add(j.ID, InvHighestDone, "attempt #%d is done but the job is %s", done[0].Number, j.Status)
		}
		return
	}
	if len(done) != 1 || done[0].Number != atts[len(atts)-1].Number {
		c.add(j.ID, InvHighestDone, "done attempts %v of %d attempts; want exactly the highest", numbers(done), len(atts))
		return
	}
	for _, r := range results {
		if r.AttemptID != done[0].ID {
			c.add(j.ID, InvHighestDone, "result names attempt id %d, the done attempt is id %d", r.AttemptID, done[0].ID)
		}
	}
	for _, ch := range charges {
		if ch.AttemptID != done[0].ID {
			c.add(j.ID, InvHighestDone, "charge names attempt id %d, the done attempt is id %d", ch.AttemptID, done[0].ID)
		}
	}
}

func (c *checker) finishedFields(j JobRow, atts []AttemptRow) {
	finished := j.Status == inkwell.StatusFailed || j.Status == inkwell.StatusDone
	if finished && !j.Finished.Valid {
		c.add(j.ID, InvFinishedFields, "job is %s without finished_at", j.Status)
	}
	if j.Status == inkwell.StatusFailed && strings.TrimSpace(j.Error.String) == "" {
		c.add(j.ID, InvFinishedFields, "job is failed without an error")
	}
	for _, a := range atts {
		if a.Status != inkwell.StatusRunning && !a.FinishedAt.Valid {
			c.add(j.ID, InvFinishedFields, "attempt #%d is %s without finished_at", a.Number, a.Status)
		}
		if a.Status == inkwell.StatusFailed && strings.TrimSpace(a.Error.String) == "" {
			c.add(j.ID, InvFinishedFields, "attempt #%d is failed without an error", a.Number)
		}
	}
}

// recoveryRuns checks each run's counts against the rows linked to it.
// Each closed or back-filled attempt names its run, and each job the run
// failed had exactly one such attempt, so the counts are recomputable.
func (c *checker) recoveryRuns() {
	for _, r := range c.snap.Runs {
		linked, jobs := 0, map[int64]bool{}
		for _, a := range c.snap.Attempts {
			if a.RecoveryRunID.Valid && a.RecoveryRunID.Int64 == r.ID {
				linked++
				jobs[a.JobID] = true
			}
		}
		if int64(linked) != r.AttemptsClosed+r.AttemptsBackfilled {
			c.add(0, InvRecoveryRun, "recovery run %d counts %d closed + %d back-filled attempts, but %d attempts name it",
				r.ID, r.AttemptsClosed, r.AttemptsBackfilled, linked)
		}
		if int64(len(jobs)) != r.Failed {
			c.add(0, InvRecoveryRun, "recovery run %d counts %d failed jobs, but its attempts belong to %d jobs", r.ID, r.Failed, len(jobs))
		}
		if r.LockMethod == "" || !strings.Contains(r.Evidence, "proof") {
			c.add(0, InvRecoveryRun, "recovery run %d names no evidence (lock method %q, evidence %q)", r.ID, r.LockMethod, r.Evidence)
		}
		if strings.TrimSpace(r.Anomalies.String) != "" {
			c.add(0, InvOneRunning, "recovery run %d found rows that break the invariants: %s", r.ID, r.Anomalies.String)
		}
	}
}

func requestIDs(cs []ChargeRow) string {
	ids := make([]string, len(cs))
	for i, ch := range cs {
		ids[i] = ch.ProviderRequestID
	}
	return strings.Join(ids, ", ")
}

func numbers(as []AttemptRow) []int {
	out := make([]int, len(as))
	for i, a := range as {
		out[i] = a.Number
	}
	return out
}

func (s Snapshot) attemptsOf(jobID int64) []AttemptRow {
	out := rowsWhere(s.Attempts, func(a AttemptRow) bool { return a.JobID == jobID })
	slices.SortFunc(out, func(a, b AttemptRow) int { return a.Number - b.Number })
	return out
}

func (s Snapshot) resultsOf(jobID int64) []ResultRow {
	return rowsWhere(s.Results, func(r ResultRow) bool { return r.JobID == jobID })
}

func (s Snapshot) chargesOf(jobID int64) []ChargeRow {
	return rowsWhere(s.Charges, func(ch ChargeRow) bool { return ch.JobID == jobID })
}

func (s Snapshot) job(id int64) (JobRow, bool) {
	return firstWhere(s.Jobs, func(j JobRow) bool { return j.ID == id })
}

func (s Snapshot) jobByKey(key string) (JobRow, bool) {
	return firstWhere(s.Jobs, func(j JobRow) bool { return j.Key == key })
}

// rowsWhere returns the rows that match, in the snapshot's order (nil when
// none does).
func rowsWhere[T any](rows []T, match func(T) bool) []T {
	var out []T
	for _, r := range rows {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}

// firstWhere returns the first row that matches, and whether one does.
func firstWhere[T any](rows []T, match func(T) bool) (T, bool) {
	for _, r := range rows {
		if match(r) {
			return r, true
		}
	}
	var zero T
	return zero, false
}
