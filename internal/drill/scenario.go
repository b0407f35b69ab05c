package drill

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
)

// scenario is one crash point at one hit, over a small workload: a list
// of serve runs, each started on the same database after the last died or
// stopped.
type scenario struct {
	name  string // "claim.after-commit" or, in a sweep, "claim.after-commit:3"
	point string
	hit   int
	jobs  int
	runs  []runSpec
	// inFlight is, in the in-flight family (inflight.go), how many provider
	// calls serve holds in flight when it dies: serve runs with
	// --concurrency inFlight, and the workload is its own (items). 0 for
	// the one-job scenarios and the sweep.
	inFlight int
	// trigger says what the family's workload adds after the calls in
	// flight: nothing, one more request, or the retry of a job failed first.
	trigger trigger
	// budget, when not 0, is the account's budget in micros in place of
	// DrillBudgetMicros: one that binds (inflight_budget.go).
	budget int64
	// chatEvery: every chatEvery-th job of the workload is the chat form
	// on drill-claude, whose provider honours no idempotency key (1: every
	// job; 0: none; models.go).
	chatEvery int

	// The job-life families (joblife.go). family is "" for the points,
	// the sweep and the in-flight family.
	family string
	// front, when set, puts the drill's front (front.go) between serve and
	// the simulator, failing each key's first frontFails calls that way;
	// retryAfter is its 429's Retry-After ("" for 1).
	front      failure
	frontFails int
	retryAfter string
	// maxAttempts is serve's --max-attempts (0 for 1: no automatic retry);
	// above 1 serve also runs with the family's short back-off.
	maxAttempts int
	// cancel says when the client cancels the job.
	cancel cancelWhen
	// prune: once the scenario ends, prune every finished job and re-send
	// every key (prune.go).
	prune bool
	// expect, about and why replace the point's own (expect, about,
	// whyVaries) for a job-life scenario.
	expect     []path
	about, why string
}

// runSpec is one start of serve.
type runSpec struct {
	crashAt string // INKWELL_CRASH_AT for this run, or "" for a clean run
	target  bool   // this crash is the one the scenario is about
	failing bool   // the provider is the failing simulator (every call 500)
	retry   bool   // the clients retry failed jobs during this run
	until   until  // for a clean run: when to stop it gracefully
	// latency, when not zero, makes the provider the scenario's own
	// simulator with this latency, on the scenario's own ledger (the
	// in-flight family: calls held until the crash, then answered fast).
	latency time.Duration
	// openGate: once this run's serve is ready, the requests held for a
	// later serve (item.gate) may be sent.
	openGate bool
}

type until int

const (
	untilCrash     until = iota // armed: the run ends when serve dies
	untilAllFailed              // setup: every job failed the ordinary way
	untilAllDone                // the end: every job done
)

// pointScenario builds the scenario for point at its hit-th hit over jobs
// jobs. Most points need only serve armed with the point, then a clean
// restart. Two need a state to crash in:
//
//   - recover.before-commit needs orphans to recover: serve first dies at
//     claim.after-commit, then hit restarts in a row die inside recovery;
//   - retry.after-commit needs failed jobs to retry: serve first runs
//     against the failing simulator until every job failed, then a run
//     whose clients retry them dies at the hit-th retry.
func pointScenario(point string, hit, jobs int) scenario {
	sc := scenario{name: point, point: point, hit: hit, jobs: jobs}
	if hit > 1 || jobs > 1 {
		sc.name = fmt.Sprintf("%s:%d", point, hit)
	}
	spec := fmt.Sprintf("%s:%d", point, hit)
	clean := runSpec{retry: true, until: untilAllDone}
	switch point {
	case crashpoint.RecoverBeforeCommit:
		// Recovery runs once per process, so the N-th hit is the N-th
		// restart in a row that dies inside it.
		sc.runs = append(sc.runs, runSpec{crashAt: crashpoint.ClaimAfterCommit + ":1"})
		for i := 1; i <= hit; i++ {
			sc.runs = append(sc.runs, runSpec{crashAt: point + ":1", target: i == hit})
		}
	case crashpoint.RetryAfterCommit:
		sc.runs = append(sc.runs,
			runSpec{failing: true, until: untilAllFailed},
			runSpec{crashAt: spec, target: true, retry: true})
	case crashpoint.CancelAfterCommit:
		// The point's own scenario is the cancel of a job whose call is in
		// flight (joblife.go).
		c := cancelScenario(point, cancelRunning)
		c.name, c.hit = sc.name, hit
		if hit > 1 || jobs > 1 {
			// The sweep: the N-th cancel, one per job.
			c.jobs = jobs
			c.runs[0].crashAt = spec
			c.expect = nil
		}
		return c
	default:
		sc.runs = append(sc.runs, runSpec{crashAt: spec, target: true, retry: true})
	}
	sc.runs = append(sc.runs, clean)
	// Every third job of a sweep's workload, and the one job at every
	// other point, is on drill-claude.
	sc.chatEvery = 3
	if jobs == 1 {
		sc.chatEvery = 0
		if onClaude(point) {
			sc.chatEvery, sc.about = 1, aboutClaude(point)
		}
	}
	return sc
}

// slug names the scenario's database and log files.
func (sc scenario) slug() string {
	if sc.family != "" {
		r := strings.NewReplacer("): ", "-", ".", "-", ":", "-", " ", "-", "(", "", ")", "", "after-commit", "ac", "before-commit", "bc")
		return r.Replace(sc.name)
	}
	if sc.inFlight > 0 {
		prefix := "inflight-"
		if sc.budget > 0 {
			prefix = "inflight-budget-" // its own database, keys and ledger beside the family's
		}
		return prefix + strings.NewReplacer(".", "-", ":", "-").Replace(fmt.Sprintf("%s:%d", sc.point, sc.hit))
	}
	return strings.NewReplacer(".", "-", ":", "-").Replace(sc.name)
}

// items is the scenario's workload: one request per job, each with its
// own key, so each key's bills can be told apart in the shared ledger.
func (sc scenario) items() []item {
	out := make([]item, sc.jobs)
	for i := range out {
		out[i] = item{
			cancel: sc.cancel,
			key:    fmt.Sprintf("drill-%s-%d", sc.slug(), i+1),
			req: inkwell.Request{
				Prompt:   fmt.Sprintf("crash drill %s, job %d: a short note on ink", sc.name, i+1),
				Account:  "drill",
				MaxWords: 8 + i,
			},
			model: modelOf(i, sc.chatEvery),
		}
	}
	return out
}

// about says, for the report, what a crash at point leaves behind and
// what the drill expects of the restart.
func about(point string) string {
	switch point {
	case crashpoint.AcceptBeforeCommit:
		return "Serve dies inside the accept transaction: the job row is not committed, and the client's connection breaks (outcome unknown). The client re-sends the same key to the restarted serve, which creates the job once."
	case crashpoint.AcceptAfterCommit:
		return "Serve dies after committing the job but before answering: the client does not know. Its re-send with the same key is answered 200 with the job already stored, never a second job."
	case crashpoint.ClaimAfterCommit:
		return "Serve dies right after claiming: the job is running with a running attempt, and the provider was never called. Recovery closes the attempt as failed (worker restarted) and fails the job; the client retries it."
	case crashpoint.ProviderAfterCall:
		return "Serve dies after the provider answered and billed, before anything is written. Recovery fails the orphan; the retried attempt sends the same job-scoped key, and the simulator answers from its record without a second bill."
	case crashpoint.CompleteBeforeCommit:
		return "Serve dies inside the completion transaction: result, charge and done are written but not committed, so the database is as at provider.after-call. The retry is answered from the provider's record: one bill."
	case crashpoint.CompleteAfterCommit:
		return "Serve dies just after the completion committed: the job is done with one result and one charge. Recovery finds nothing to close."
	case crashpoint.RecoverBeforeCommit:
		return "Serve first dies at claim.after-commit (an orphan), then the restart dies inside startup recovery before its commit: nothing of that recovery is kept. The next restart recovers the same orphan, once."
	case crashpoint.RetryAfterCommit:
		return "Jobs first fail the ordinary way (a provider answering 500). The client retries; serve dies just after the retry committed, before answering. The commit leaves the job queued again with its attempts untouched, for the lane to run: the restarted one, or the dying one if it got there first."
	case crashpoint.CancelAfterCommit:
		return cancelScenario(point, cancelRunning).about
	case crashpoint.WebhookAfterSend:
		return "The job is done and its webhook delivery was posted; serve dies after the receiver's 2xx, before the commit that marks the delivery delivered. After the restart the delivery is still pending and, once its lease (--webhook-timeout + 5 s) ends, is sent again with the same webhook-id: at least once."
	}
	return ""
}

// InvPointState: in points mode (one job, first hit) the three reads of a
// scenario follow one of the paths its crash point allows (expect).
const InvPointState = "§6 the three reads follow a path the crash point allows"

// state is one read of a points-mode scenario's one job, in the words of
// the report: its status, its attempts in order (a failed one says why:
// the worker restarted, or a provider error), and the provider's calls
// and bills under its key.
type state struct {
	job      string // its status; "no job"; or a status plus what is wrong with it
	attempts string // "none", or "#1 failed (provider error), #2 running"
	bills    string // "calls / bills"
}

func (s state) String() string { return s.job + ": " + s.attempts + "; " + s.bills }

// path is what the three reads show: after the crash, after recovery, final.
type path [3]state

func (p path) String() string {
	return p[0].String() + " → " + p[1].String() + " → " + p[2].String()
}

const (
	noJob           = "no job"
	failedRestarted = "failed (" + inkwell.ErrWorkerRestarted + ")"
	failedProvider  = "failed (provider error)"
)

// expect lists every path a points-mode scenario at point may take: one
// for most points, since only the dying process moves the job; several
// where the point fires on an HTTP request's path after its commit (racy).
func expect(point string) []path {
	switch point {
	case crashpoint.AcceptBeforeCommit:
		none := state{noJob, "none", "0 / 0"}
		return []path{{none, none, {inkwell.StatusDone, "#1 done", "1 / 1"}}}
	case crashpoint.AcceptAfterCommit:
		return racy(nil)
	case crashpoint.ClaimAfterCommit, crashpoint.RecoverBeforeCommit:
		return orphan("0 / 0", "1 / 1") // the provider was never called
	case crashpoint.ProviderAfterCall, crashpoint.CompleteBeforeCommit:
		return orphan("1 / 1", "2 / 1") // billed once; the retry is answered from the record
	case crashpoint.CompleteAfterCommit, crashpoint.WebhookAfterSend:
		done := state{inkwell.StatusDone, "#1 done", "1 / 1"}
		return []path{{done, done, done}}
	case crashpoint.RetryAfterCommit:
		return racy([]string{"#1 " + failedProvider})
	case crashpoint.CancelAfterCommit:
		// The job's call is in flight, held by the simulator, when the
		// client cancels it (joblife.go): never answered, never billed.
		s := state{inkwell.StatusFailed + " (cancelled)", "#1 failed (cancelled)", "0 / 0"}
		return []path{{s, s, s}}
	}
	return nil
}

// orphan is the one path of a point that kills serve with the job running
// on attempt #1: recovery closes the attempt and fails the job, and the
// client's retry runs attempt #2.
func orphan(bills, final string) []path {
	return []path{{
		{inkwell.StatusRunning, "#1 running", bills},
		{inkwell.StatusFailed, "#1 " + failedRestarted, bills},
		{inkwell.StatusDone, "#1 " + failedRestarted + ", #2 done", final},
	}}
}

// racy lists the paths of a point that fires just after an HTTP request's
// commit left the job queued (attempts before untouched; n is the one the
// lane opens next); whyVaries says why each may happen.
func racy(before []string) []path {
	n := len(before) + 1
	att := func(more ...string) string { return strings.Join(append(slices.Clone(before), more...), ", ") }
	queued := func(bills string) state { return state{inkwell.StatusQueued, cmp.Or(att(), "none"), bills} }
	running := func(bills string) state {
		return state{inkwell.StatusRunning, att(fmt.Sprintf("#%d running", n)), bills}
	}
	done := state{inkwell.StatusDone, att(fmt.Sprintf("#%d done", n)), "1 / 1"}
	failed := func(bills string) state {
		return state{inkwell.StatusFailed, att(fmt.Sprintf("#%d %s", n, failedRestarted)), bills}
	}
	retried := func(bills string) state {
		return state{inkwell.StatusDone, att(fmt.Sprintf("#%d %s", n, failedRestarted), fmt.Sprintf("#%d done", n+1)), bills}
	}
	return []path{
		{queued("0 / 0"), queued("0 / 0"), done},
		{queued("0 / 0"), queued("1 / 1"), done}, // the ledger is read just after the database
		{queued("0 / 0"), running("0 / 0"), done},
		{queued("0 / 0"), running("1 / 1"), done},
		{queued("0 / 0"), done, done},
		{running("0 / 0"), failed("0 / 0"), retried("1 / 1")},
		{running("0 / 0"), failed("0 / 0"), retried("2 / 1")}, // billed after the recovery read
		{running("0 / 0"), failed("1 / 1"), retried("2 / 1")}, // billed after the crash read
		{running("1 / 1"), failed("1 / 1"), retried("2 / 1")},
		{done, done, done},
	}
}

// whyVaries says, for the report, why a point's reads may differ from run
// to run; "" for the points whose reads never do.
func whyVaries(point string) string {
	var commit string
	switch point {
	case crashpoint.AcceptAfterCommit:
		commit = "the accept's (group) commit"
	case crashpoint.RetryAfterCommit:
		commit = "the retry's commit"
	default:
		return ""
	}
	return "This point fires right after " + commit + ", before the HTTP handler answers or wakes the lane; " +
		"but the lane also looks for queued jobs on its own every `--poll` (100 ms in the drill). " +
		"So in the instant between the commit and the kill the lane may claim the job (after crash: running), " +
		"may already have been billed for it, and may even have completed it (done): each is true of the database at that moment. " +
		"(On SQLite the store lets one writer in at a time per process and, today, keeps that turn until the point has fired, " +
		"so there the lane cannot claim in that instant and the after-crash read is queued; on PostgreSQL it can. " +
		"The drill accepts the same paths on both.) " +
		"A job claimed that way is an orphan: recovery closes its attempt (worker restarted), and the client retries it. " +
		"The restarted lane claims a queued job as soon as serve is ready, so the after-recovery read races it: queued, running or done; " +
		"and as the provider's ledger is read just after the database, it may already hold the bill of a claim that read did not see. " +
		"A provider call cut off by the kill is billed only if the simulator had already decided to answer, " +
		"and that bill may land after a read; the retried call carries the same key and is answered from the record (2 calls, 1 bill). " +
		"Never possible here: a job failed without a recovery run that closed its attempt, a second attempt without a first one closed, " +
		"a second result, charge or bill."
}

// paths returns what expect allows for t, when t is a points-mode scenario
// (one job, the point's first hit); sweeps and random runs have no list.
// A job on drill-claude has the same paths with every answered call
// billed (unkeyed).
func (t *Timeline) paths() ([]path, bool) {
	ps := t.Expect
	switch {
	case ps != nil:
		if len(t.Keys) != 1 {
			return ps, false
		}
	case t.Point == "" || t.Hit != 1 || len(t.Keys) != 1 || t.InFlight > 0:
		return nil, false
	default:
		ps = expect(t.Point)
	}
	if slices.Contains(t.Claude, t.Keys[0]) {
		ps = unkeyed(ps)
	}
	return ps, len(ps) > 0
}

// read is what snapshot s shows of the scenario's one job. What cannot
// belong to any path (a result on a job that is not done, an attempt
// closed as a restart without a recovery run that closed it) is spelled
// out in the job's status, so that it matches no state.
func (t *Timeline) read(s Snapshot) state {
	calls, bills, _ := t.billsOf(s)
	out := state{job: noJob, attempts: "none", bills: fmt.Sprintf("%d / %d", calls, bills)}
	var closed int64
	for _, r := range s.Runs {
		closed += r.AttemptsClosed
	}
	if len(s.Jobs) != 1 {
		if len(s.Jobs) > 1 {
			out.job = fmt.Sprintf("%d jobs", len(s.Jobs))
		}
		if closed != 0 {
			out.job += fmt.Sprintf(" with recovery runs that closed %d attempt(s)", closed)
		}
		return out
	}
	j := s.Jobs[0]
	out.job = jobState(j)
	text, closedBy := describeAttempts(s, j.ID)
	if text != "" {
		out.attempts = text
	}
	restarted := int64(len(closedBy))
	want := 0
	if j.Status == inkwell.StatusDone {
		want = 1
	}
	var odd []string
	if n := len(s.resultsOf(j.ID)); n != want {
		odd = append(odd, fmt.Sprintf("%d result(s)", n))
	}
	if n := len(s.chargesOf(j.ID)); n != want {
		odd = append(odd, fmt.Sprintf("%d charge(s)", n))
	}
	if closed != restarted {
		odd = append(odd, fmt.Sprintf("recovery runs that closed %d attempt(s), not %d", closed, restarted))
	}
	if len(odd) > 0 {
		out.job += " with " + strings.Join(odd, ", ")
	}
	return out
}

// checkPaths fails a points-mode scenario whose reads follow no path its
// point allows, naming the first read that left every allowed path and
// what was allowed there.
func (t *Timeline) checkPaths() []Violation {
	paths, ok := t.paths()
	idx := [3]int{t.Crash, t.Recovered, t.Final}
	if !ok || slices.ContainsFunc(idx[:], func(i int) bool { return i < 0 || i >= len(t.Snaps) }) {
		return nil
	}
	var got path
	for m, i := range idx {
		got[m] = t.read(t.Snaps[i])
	}
	if slices.Contains(paths, got) {
		return nil
	}
	var jobID int64
	if jobs := t.Snaps[t.Final].Jobs; len(jobs) == 1 {
		jobID = jobs[0].ID
	}
	m, detail := offPath(got, paths, t.Point)
	return []Violation{{Snapshot: t.Snaps[idx[m]].Label, JobID: jobID, Invariant: InvPointState, Detail: detail}}
}

// describeAttempts renders job's attempts in order as the reads say them
// ("#1 failed (worker restarted), #2 done"; "" when it has none), and
// returns those closed as a restart.
func describeAttempts(s Snapshot, jobID int64) (string, []AttemptRow) {
	var parts []string
	var restarted []AttemptRow
	for _, a := range s.attemptsOf(jobID) {
		p := fmt.Sprintf("#%d %s", a.Number, a.Status)
		if a.Status == inkwell.StatusFailed {
			switch e, class := a.Error.String, inkwell.ErrorClass(a.ErrorClass.String); {
			case e == inkwell.ErrWorkerRestarted:
				p = fmt.Sprintf("#%d %s", a.Number, failedRestarted)
				restarted = append(restarted, a)
			case class != "" && class != inkwell.ClassWorkerRestarted:
				p += fmt.Sprintf(" (%s)", classWords(class))
			case strings.HasPrefix(e, "provider: "):
				p = fmt.Sprintf("#%d %s", a.Number, failedProvider)
			default:
				p += fmt.Sprintf(" (%s)", e)
			}
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", "), restarted
}

// jobState is a job's status as the reads say it: a cancelled job says so,
// and a job automatic retry gave up on says after how many attempts.
func jobState(j JobRow) string {
	switch {
	case isCancelled(j):
		return j.Status + " (cancelled)"
	case j.GaveUpAfter.Valid:
		return fmt.Sprintf("%s (gave up after %d)", j.Status, j.GaveUpAfter.Int64)
	}
	return j.Status
}

// classWords is an error class in the reads' words: "provider error" for
// provider_error.
func classWords(c inkwell.ErrorClass) string {
	return strings.ReplaceAll(string(c), "_", " ")
}
