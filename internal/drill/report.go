package drill

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider/providersim"
)

// Report is a whole drill: one timeline per scenario.
type Report struct {
	Mode      Mode
	Command   string
	DB        string // "sqlite" or "postgres"
	Short     bool
	Seed      int64 // random mode
	WorkDir   string
	Started   time.Time
	Took      time.Duration
	Timelines []*Timeline
}

// Failed reports whether any scenario broke an invariant or did not finish.
func (r *Report) Failed() bool {
	return slices.ContainsFunc(r.Timelines, (*Timeline).Failed)
}

// Violations counts the broken invariants over all scenarios.
func (r *Report) Violations() int {
	n := 0
	for _, t := range r.Timelines {
		n += len(t.Violations)
	}
	return n
}

// WriteSummary prints the verdict: one line per failed scenario, and the
// totals.
func (r *Report) WriteSummary(w io.Writer) {
	failed := 0
	for _, t := range r.Timelines {
		if t.Failed() {
			failed++
			fmt.Fprintf(w, "FAIL %s\n", t.Name)
			if t.Err != nil {
				fmt.Fprintf(w, "  did not finish: %v\n", t.Err)
			}
			for _, v := range t.Violations {
				fmt.Fprintf(w, "  %s\n", v)
			}
		}
	}
	verdict := "PASS"
	if failed > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "%s: %d scenario(s), %d failed, %d violation(s), %s on %s in %s\n",
		verdict, len(r.Timelines), failed, r.Violations(), r.Mode, r.DB, r.Took.Round(100*time.Millisecond))
	r.writeSecondBills(w)
	if r.Mode == ModeRandom {
		var kills, several, most int
		for _, t := range r.Timelines {
			for _, n := range t.Running {
				kills++
				most = max(most, n)
				if n > 1 {
					several++
				}
			}
		}
		fmt.Fprintf(w, "seed %d; %d of %d kills landed with several attempts running (calls in flight), %d at most\n", r.Seed, several, kills, most)
	}
}

// writeSecondBills prints the measured window of the provider that honours
// no idempotency key: its jobs, their second bills, and where.
func (r *Report) writeSecondBills(w io.Writer) {
	var jobs, second int64
	var where []string
	for _, t := range r.Timelines {
		if t.Final < 0 || t.Final >= len(t.Snaps) {
			continue
		}
		j, s := t.secondBills(t.Snaps[t.Final])
		jobs, second = jobs+j, second+s
		if s > 0 {
			where = append(where, fmt.Sprintf("%s: %d", t.Name, s))
		}
	}
	if jobs == 0 {
		return
	}
	fmt.Fprintf(w, "%s (anthropic, no idempotency key): %d job(s) called, %d second bill(s), each for an answer lost",
		modelClaude, jobs, second)
	if len(where) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(where, "; "))
	}
	fmt.Fprintln(w)
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

// columns are the report's three moments of a scenario.
var columns = []string{"after crash", "after recovery", "final"}

// row is one line of a scenario's table: a name and a cell per column.
type row struct {
	name  string
	cells [3]string
}

// table summarizes the three snapshots of a timeline. Its rows are in the
// order varying follows.
func (t *Timeline) table() []row {
	rows := []row{{name: "job status"}, {name: "attempts"}, {name: "results"}, {name: "charges"},
		{name: "provider calls / bills"}, {name: "recovery runs"}}
	for i, idx := range []int{t.Crash, t.Recovered, t.Final} {
		if idx < 0 || idx >= len(t.Snaps) {
			for r := range rows {
				rows[r].cells[i] = "-"
			}
			continue
		}
		s := t.Snaps[idx]
		rows[0].cells[i] = jobsCell(s)
		rows[1].cells[i] = attemptsCell(s)
		rows[2].cells[i] = fmt.Sprint(len(s.Results))
		rows[3].cells[i] = chargesCell(s)
		calls, bills, _ := t.billsOf(s)
		rows[4].cells[i] = fmt.Sprintf("%d / %d", calls, bills)
		rows[5].cells[i] = runsCell(s)
	}
	return rows
}

// varying says which cells of table may differ from run to run: those
// whose value differs between the paths the point allows (expect, or in
// the in-flight family expectInFlight). Only points-mode scenarios have
// paths; for the others it says nothing.
func (t *Timeline) varying() (cells [6][3]bool) {
	for _, paths := range t.pathSets() {
		v := varyingOf(paths)
		for r := range cells {
			for m := range cells[r] {
				cells[r][m] = cells[r][m] || v[r][m]
			}
		}
	}
	return cells
}

// pathSets lists the path lists a timeline's reads are judged by: the
// point's, for a points-mode scenario; one per role in the in-flight
// family (a job's cells may vary when that job's may); none otherwise.
func (t *Timeline) pathSets() [][]path {
	if t.InFlight > 0 {
		sets, _ := t.inFlightSets()
		return sets
	}
	if paths, ok := t.paths(); ok {
		return [][]path{paths}
	}
	return nil
}

// varyingOf says which table cells differ between paths.
func varyingOf(paths []path) (cells [6][3]bool) {
	for m := range columns {
		var seen [6]map[string]bool
		for _, p := range paths {
			s := p[m]
			done := fmt.Sprint(s.job == inkwell.StatusDone)
			vals := [6]string{s.job, s.attempts, done, done, s.bills, fmt.Sprint(strings.Count(s.attempts, failedRestarted))}
			for r, v := range vals {
				if seen[r] == nil {
					seen[r] = map[string]bool{}
				}
				seen[r][v] = true
			}
		}
		for r := range seen {
			cells[r][m] = len(seen[r]) > 1
		}
	}
	return cells
}

func jobsCell(s Snapshot) string {
	switch len(s.Jobs) {
	case 0:
		return "no job"
	case 1:
		return jobState(s.Jobs[0])
	}
	return countBy(len(s.Jobs), func(yield func(string)) {
		for _, j := range s.Jobs {
			yield(j.Status)
		}
	})
}

func attemptsCell(s Snapshot) string {
	if len(s.Jobs) != 1 {
		return countBy(len(s.Attempts), func(yield func(string)) {
			for _, a := range s.Attempts {
				yield(a.Status)
			}
		})
	}
	var parts []string
	for _, a := range s.attemptsOf(s.Jobs[0].ID) {
		p := fmt.Sprintf("#%d %s", a.Number, a.Status)
		if a.Status == inkwell.StatusFailed {
			class := inkwell.ErrorClass(a.ErrorClass.String)
			if class != "" && class != inkwell.ClassWorkerRestarted && a.Error.String != inkwell.ErrWorkerRestarted {
				p += " (" + classWords(class) + ")"
			} else {
				p += " (" + shortError(a.Error.String) + ")"
			}
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// countBy renders "7: 5 done, 2 failed" in the order of the statuses.
func countBy(total int, each func(yield func(string))) string {
	counts := map[string]int{}
	each(func(s string) { counts[s]++ })
	var parts []string
	for _, st := range inkwell.JobStatuses {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	if total == 0 {
		return "none"
	}
	return fmt.Sprintf("%d: %s", total, strings.Join(parts, ", "))
}

func chargesCell(s Snapshot) string {
	if len(s.Charges) == 0 {
		return "0"
	}
	var sum int64
	for _, c := range s.Charges {
		sum += c.AmountMicros
	}
	return fmt.Sprintf("%d (%s)", len(s.Charges), money(sum))
}

func runsCell(s Snapshot) string {
	if len(s.Runs) == 0 {
		return "none"
	}
	var closed, failed int64
	for _, r := range s.Runs {
		closed += r.AttemptsClosed
		failed += r.Failed
	}
	return fmt.Sprintf("%d, which closed %d attempt(s) and failed %d job(s) in all", len(s.Runs), closed, failed)
}

// jobBills is one job's calls and bills at the provider; unkeyed says
// they were messages, billed whatever their key (models.go).
type jobBills struct {
	job          int64
	calls, bills int64
	unkeyed      bool
}

// billsOf sums the ledger over this timeline's keys, in total and per job.
func (t *Timeline) billsOf(s Snapshot) (calls, bills int64, perJob []jobBills) {
	c := checker{snap: s, keys: t.Keys}
	byJob := map[int64]jobBills{}
	for _, e := range s.Ledger {
		id, _, ok := c.owner(ledgerKey(e))
		if !ok {
			continue
		}
		calls += e.Calls
		bills += e.Bills
		b := byJob[id]
		b.job, b.calls, b.bills = id, b.calls+e.Calls, b.bills+e.Bills
		b.unkeyed = b.unkeyed || e.Kind == providersim.KindMessages
		byJob[id] = b
	}
	for _, b := range byJob {
		perJob = append(perJob, b)
	}
	slices.SortFunc(perJob, func(a, b jobBills) int { return int(a.job - b.job) })
	return calls, bills, perJob
}

// billsNote is the measured answer to "was the provider paid twice?".
func (t *Timeline) billsNote() string {
	if t.Final < 0 {
		return ""
	}
	calls, _, perJob := t.billsOf(t.Snaps[t.Final])
	if len(perJob) == 0 {
		return "The provider was never called."
	}
	var most, keyedCalls, keyedBills int64
	var parts []string
	for _, j := range perJob {
		most = max(most, j.bills)
		p := fmt.Sprintf("job %d: %d call(s), %d bill(s)", j.job, j.calls, j.bills)
		if j.unkeyed {
			p += " on " + modelClaude
		} else {
			keyedCalls, keyedBills = keyedCalls+j.calls, keyedBills+j.bills
		}
		parts = append(parts, p)
	}
	note := "Bills per job: " + strings.Join(parts, "; ") + "."
	if len(perJob) > 5 {
		note = fmt.Sprintf("%d jobs called the provider %d time(s); the most any job was billed is %d.", len(perJob), calls, most)
	}
	if keyedCalls > keyedBills {
		note += fmt.Sprintf(" Of %d calls under keys the provider honours, %d were billed: every repeated call carried its job's key and was answered from the simulator's record, with no second bill.", keyedCalls, keyedBills)
	}
	return note + t.secondBillsNote()
}

// secondBillsNote is the measured window of a provider that honours no
// idempotency key (docs/design.md §7): how many of the scenario's jobs ran
// on drill-claude, and how many bills beyond the first they drew, each
// for an answer lost; "" when none ran there.
func (t *Timeline) secondBillsNote() string {
	jobs, second := t.secondBills(t.Snaps[t.Final])
	if jobs == 0 {
		return ""
	}
	what := "none was billed twice"
	if second > 0 {
		what = fmt.Sprintf("**%d second bill(s)**, each for a call answered and lost when serve died (or gave up) before storing it, then retried: the window a provider without idempotency keys leaves (design.md §7); the user was still charged once", second)
	}
	return fmt.Sprintf(" The provider of `%s` honours no idempotency key; of its %d job(s) called, %s.", modelClaude, jobs, what)
}

// secondBillsCell is the report's count of second bills on drill-claude
// at the end of a scenario: "-" when no job ran there.
func (t *Timeline) secondBillsCell() string {
	if t.Final < 0 || t.Final >= len(t.Snaps) {
		return "-"
	}
	jobs, second := t.secondBills(t.Snaps[t.Final])
	if jobs == 0 {
		return "-"
	}
	return fmt.Sprint(second)
}

func shortError(e string) string {
	if e == inkwell.ErrWorkerRestarted {
		return e
	}
	e = strings.TrimPrefix(e, "provider: provider call: ")
	if len(e) > 32 {
		e = e[:32] + "..."
	}
	return e
}

func money(micros int64) string {
	return fmt.Sprintf("%d.%06d", micros/1_000_000, micros%1_000_000)
}

// verdict is a scenario's one-word result.
func (t *Timeline) verdict() string {
	switch {
	case t.Err != nil:
		return "DID NOT FINISH"
	case len(t.Violations) > 0:
		return fmt.Sprintf("FAIL (%d violations)", len(t.Violations))
	}
	return "PASS"
}

// writeText prints a timeline for the terminal: its table, or in compact
// form (the sweep) one line.
func (t *Timeline) writeText(w io.Writer, compact bool) {
	if compact {
		calls, bills, _ := t.billsOf(t.lastSnap())
		fmt.Fprintf(w, "%-28s %-16s final: %s; attempts %s; provider calls/bills %d/%d; second bills on %s %s (%s)\n",
			t.Name, t.verdict(), jobsCell(t.lastSnap()), attemptsCell(t.lastSnap()), calls, bills, modelClaude, t.secondBillsCell(), t.Took.Round(10*time.Millisecond))
		t.writeProblems(w)
		return
	}
	fmt.Fprintf(w, "== %s: %s (%s)\n", t.Name, t.verdict(), t.Took.Round(10*time.Millisecond))
	for _, l := range t.Plan {
		fmt.Fprintf(w, "   plan: %s\n", l)
	}
	for _, e := range t.Events {
		if e.Extra != "" {
			fmt.Fprintf(w, "   %s (%s)\n", e.What, e.Extra)
		} else {
			fmt.Fprintf(w, "   %s\n", e.What)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "   \t%s\n", strings.Join(columns, "\t"))
	for _, r := range t.table() {
		fmt.Fprintf(tw, "   %s\t%s\n", r.name, strings.Join(r.cells[:], "\t"))
	}
	tw.Flush()
	if note := t.billsNote(); note != "" {
		fmt.Fprintf(w, "   %s\n", note)
	}
	fmt.Fprintf(w, "   requests: %s\n", t.requestSummary())
	if t.Seed == 0 {
		for _, s := range t.Requests {
			fmt.Fprintf(w, "     #%d %s (at %s)\n", s.Seq, s, s.At.Round(time.Millisecond))
		}
	}
	t.writeProblems(w)
	fmt.Fprintln(w)
}

func (t *Timeline) writeProblems(w io.Writer) {
	if t.Err != nil {
		fmt.Fprintf(w, "   DID NOT FINISH: %v\n", t.Err)
	}
	for _, v := range t.Violations {
		fmt.Fprintf(w, "   VIOLATION %s\n", v)
	}
}

func (t *Timeline) lastSnap() Snapshot {
	if len(t.Snaps) == 0 {
		return Snapshot{}
	}
	return t.Snaps[len(t.Snaps)-1]
}

// requestSummary counts the POSTs by outcome.
func (t *Timeline) requestSummary() string {
	counts := map[Outcome]int{}
	for _, s := range t.Requests {
		counts[s.Outcome]++
	}
	return fmt.Sprintf("%d POST(s): %d ok, %d refused, %d unknown; %d GET(s)",
		len(t.Requests), counts[OutcomeOK], counts[OutcomeRefused], counts[OutcomeUnknown], t.Gets)
}
