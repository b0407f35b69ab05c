package drill

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
)

// The in-flight family: every crash point with a lane's slots full of
// provider calls (docs/design.md §8). How each point is brought about is
// aboutInFlight's text, in docs/crash-timeline.md.

// inFlightCalls is how many calls the family holds in flight.
const inFlightCalls = 8

// inFlightChatEvery: of the calls in flight, every third (jobs 3 and 6) is
// the chat form on drill-claude, whose provider honours no key; the
// trigger job is the short form.
const inFlightChatEvery = 3

// InvInFlight: what a crash with calls in flight must leave, and what the
// restart's recovery must do with it (docs/design.md §8).
const InvInFlight = "§8 with calls in flight, the crash leaves each attempt running and the restart's one recovery run closes every one"

// trigger is what the family's workload adds once the calls are in flight.
type trigger int

const (
	triggerNone       trigger = iota
	triggerRequest            // one more request (accept.*)
	triggerRetry              // the retry of a job failed first by a provider error (retry.after-commit)
	triggerCancel             // the cancel of one of the calls in flight (cancel.after-commit)
	triggerOverBudget         // one more request, past the account's budget (inflight_budget.go)
)

// triggerSuffix ends the trigger job's key.
const triggerSuffix = "-t"

// inFlightHit is the hit of point at which serve dies with n calls in
// flight: after the n accepts of the fill, the next one; the n-th claim;
// otherwise the first.
func inFlightHit(point string, n int) int {
	switch point {
	case crashpoint.AcceptBeforeCommit, crashpoint.AcceptAfterCommit:
		return n + 1
	case crashpoint.ClaimAfterCommit:
		return n
	}
	return 1
}

// inFlightScenario builds the family's scenario for point with n calls in
// flight.
func inFlightScenario(point string, n int, lim limits) scenario {
	hit := inFlightHit(point, n)
	spec := fmt.Sprintf("%s:%d", point, hit)
	sc := scenario{name: "in flight: " + spec, point: point, hit: hit, jobs: n, inFlight: n, chatEvery: inFlightChatEvery}
	latency := map[string]time.Duration{"held": lim.heldLatency, "slow": lim.slowLatency, "fast": lim.latency}
	armed := func(crashAt, sim string) runSpec {
		return runSpec{crashAt: crashAt, target: true, retry: true, latency: latency[sim]}
	}
	switch point {
	case crashpoint.AcceptBeforeCommit, crashpoint.AcceptAfterCommit:
		sc.trigger = triggerRequest
		sc.runs = append(sc.runs, armed(spec, "held"))
	case crashpoint.ClaimAfterCommit:
		sc.runs = append(sc.runs, armed(spec, "held"))
	case crashpoint.ProviderAfterCall, crashpoint.CompleteBeforeCommit, crashpoint.CompleteAfterCommit, crashpoint.WebhookAfterSend:
		sc.runs = append(sc.runs, armed(spec, "slow"))
	case crashpoint.RecoverBeforeCommit:
		setup := armed(fmt.Sprintf("%s:%d", crashpoint.ClaimAfterCommit, n), "held")
		setup.target = false
		sc.runs = append(sc.runs, setup, armed(spec, "fast"))
	case crashpoint.CancelAfterCommit:
		sc.trigger = triggerCancel
		sc.runs = append(sc.runs, armed(spec, "held"))
	case crashpoint.RetryAfterCommit:
		sc.trigger = triggerRetry
		retry := armed(spec, "held")
		retry.openGate = true
		sc.runs = append(sc.runs, runSpec{failing: true, until: untilAllFailed}, retry)
	}
	sc.runs = append(sc.runs, runSpec{retry: true, until: untilAllDone, latency: lim.latency})
	return sc
}

// inFlightItems is the family's workload: the n jobs whose calls are held
// in flight, and the trigger job, if any: sent after them (a request), or
// before them, failed by the failing simulator, while they wait at gate
// for the next serve (a retry).
func (sc scenario) inFlightItems(gate <-chan struct{}) []item {
	mk := func(suffix string, words int) item {
		return item{
			key: fmt.Sprintf("drill-%s-%s", sc.slug(), suffix),
			req: inkwell.Request{
				Prompt:   fmt.Sprintf("in-flight drill %s, job %s: a short note on ink", sc.name, suffix),
				Account:  "drill",
				MaxWords: words,
			},
		}
	}
	var calls []item
	for i := range sc.inFlight {
		calls = append(calls, mk(fmt.Sprint(i+1), 8+i))
		calls[i].model = modelOf(i, sc.chatEvery)
	}
	trig := mk(strings.TrimPrefix(triggerSuffix, "-"), 8+sc.inFlight)
	switch sc.trigger {
	case triggerRequest:
		return append(calls, trig)
	case triggerOverBudget:
		trig.overBudget = true
		return append(calls, trig)
	case triggerRetry:
		calls[0].gate = gate
		return append([]item{trig}, calls...)
	case triggerCancel:
		// The first call's job, cancelled once every call is in flight
		// (the client cancels only after its sends: client.run).
		trig.req.MaxWords, trig.cancel = calls[0].req.MaxWords, cancelRunning
		return append([]item{trig}, calls[1:]...)
	}
	return calls
}

// aboutInFlight says, for the report, what the family's scenario at point
// does and what the drill expects of it.
func aboutInFlight(point string, n int) string {
	fill := fmt.Sprintf("Serve runs with `--concurrency %d`; the client sends %d jobs one after another, each once the one before it is claimed, so each accept and each claim is one job's. ", n, n)
	held := fmt.Sprintf("The simulator holds every call until serve dies: %d calls in flight. ", n)
	slow := "The simulator answers each call after the same latency, long enough for every slot to be filled first. "
	const end = "The restart's one recovery run must close exactly the attempts running at the crash, each linked to it; the client retries those jobs, and the simulator, restarted on the same ledger without the latency, answers them (a key it billed before from its record, without a second bill). " +
		"Every third of the calls (jobs 3 and 6) is a chat request on `drill-claude`, whose `anthropic` provider honours no idempotency key: one of those answered before the kill is billed again by its retry (the window of design.md §7), the user still charged once."
	var what string
	switch point {
	case crashpoint.AcceptBeforeCommit:
		what = fill + held + fmt.Sprintf("A %s request's accept dies before its commit (hit %d): nothing of it is stored, and its client re-sends it to the restarted serve. ", ordinal(n+1), n+1)
	case crashpoint.AcceptAfterCommit:
		what = fill + held + fmt.Sprintf("A %s request's accept commits and serve dies before answering (hit %d): the job is stored and stays queued, since every slot holds a call; the client's re-send finds it. ", ordinal(n+1), n+1)
	case crashpoint.ClaimAfterCommit:
		what = fill + held + fmt.Sprintf("Serve dies right after the %s claim (hit %d): %d calls in flight and one claimed whose call has not started, %d attempts running. ", ordinal(n), n, n-1, n)
	case crashpoint.ProviderAfterCall:
		what = fill + slow + fmt.Sprintf("Serve dies when the first answer comes back, billed and not stored, with the %d other calls in flight. ", n-1)
	case crashpoint.CompleteBeforeCommit:
		what = fill + slow + fmt.Sprintf("Serve dies inside the first answer's group commit, before it commits: nothing of it is stored, and the %d other calls are in flight. ", n-1)
	case crashpoint.CompleteAfterCommit:
		what = fill + slow + fmt.Sprintf("Serve dies just after the first answer's group commit: that job is done, with the %d other calls in flight. ", n-1)
	case crashpoint.WebhookAfterSend:
		what = fill + slow + "Serve dies when the receiver has answered 2xx to the first job's webhook, before that delivery is marked delivered; the other calls are in flight (or done, when their answers came back before the sender's next poll). " +
			"The restart sends the delivery again with the same webhook-id once its lease ends, and every other job's delivery once it is done. "
	case crashpoint.RecoverBeforeCommit:
		what = fill + held + fmt.Sprintf("Serve first dies after the %s claim (claim.after-commit:%d, %d attempts running); the restart dies inside startup recovery before its commit, and nothing of that recovery is kept. ", ordinal(n), n, n)
	case crashpoint.RetryAfterCommit:
		what = "One job first fails the ordinary way (a provider answering 500). " + fill + held +
			"Then the client retries the failed job; serve dies just after the retry's commit, before answering: the job is queued again, and stays queued, since every slot holds a call. "
	case crashpoint.CancelAfterCommit:
		what = fill + held + fmt.Sprintf("Then the client cancels the first of them; serve dies just after the cancel's commit, before answering: that job and its attempt are failed (cancelled), and the %d other calls' attempts are running. "+
			"The cancelled job stays cancelled (the client re-sends its cancel, answered 200); recovery closes only the others. ", n-1)
	}
	return what + end
}

func ordinal(n int) string {
	switch n % 10 {
	case 1:
		if n%100 != 11 {
			return fmt.Sprintf("%dst", n)
		}
	case 2:
		if n%100 != 12 {
			return fmt.Sprintf("%dnd", n)
		}
	case 3:
		if n%100 != 13 {
			return fmt.Sprintf("%drd", n)
		}
	}
	return fmt.Sprintf("%dth", n)
}

// expectInFlight lists the paths each job of the family's scenario at
// point may take: calls for each job whose call was in flight, trigger
// for the job added after them (nil when there is none); whyVariesInFlight
// says why.
func expectInFlight(point string) (calls, trigger []path) {
	held := orphan("0 / 0", "1 / 1")
	run := state{inkwell.StatusRunning, "#1 running", "0 / 0"}
	retried := func(bills string) state {
		return state{inkwell.StatusDone, "#1 " + failedRestarted + ", #2 done", bills}
	}
	answered := []path{
		orphan("1 / 1", "2 / 1")[0],
		{run, {inkwell.StatusFailed, "#1 " + failedRestarted, "1 / 1"}, retried("2 / 1")}, // billed after the crash read
		{run, {inkwell.StatusFailed, "#1 " + failedRestarted, "0 / 0"}, retried("2 / 1")}, // billed after the recovery read
	}
	switch point {
	case crashpoint.ClaimAfterCommit, crashpoint.RecoverBeforeCommit:
		return held, nil
	case crashpoint.AcceptBeforeCommit:
		return held, expect(point)
	case crashpoint.AcceptAfterCommit:
		return held, queuedAtCrash(racy(nil))
	case crashpoint.RetryAfterCommit:
		return held, queuedAtCrash(racy([]string{"#1 " + failedProvider}))
	case crashpoint.CancelAfterCommit:
		return held, expect(point)
	case crashpoint.ProviderAfterCall, crashpoint.CompleteBeforeCommit:
		return append(held, answered...), nil
	case crashpoint.CompleteAfterCommit, crashpoint.WebhookAfterSend:
		done := state{inkwell.StatusDone, "#1 done", "1 / 1"}
		return append(append(held, answered...), path{done, done, done}), nil
	}
	return nil, nil
}

// queuedAtCrash keeps the paths whose crash read finds the job queued: a
// job committed while every slot holds a call cannot be claimed before
// the kill.
func queuedAtCrash(paths []path) []path {
	return slices.DeleteFunc(paths, func(p path) bool { return p[0].job != inkwell.StatusQueued })
}

// whyVariesInFlight says, for the report, why the family's reads at point
// may differ from run to run; "" where they never do.
func whyVariesInFlight(point string) string {
	switch point {
	case crashpoint.ProviderAfterCall, crashpoint.CompleteBeforeCommit, crashpoint.CompleteAfterCommit, crashpoint.WebhookAfterSend:
		s := "The calls went out one after another, and the simulator answers each after the same latency, so the first answer fires the point while the others are still in flight; " +
			"those are cut off by the kill before the simulator answers and are never billed (0 / 0). " +
			"But the calls went out milliseconds apart, so the next answers may be billed in the instant before the kill (while the first one's commit runs): each leaves an orphan with a bill, whose retry is answered from the record (2 calls, 1 bill), " +
			"or on `drill-claude`, whose provider honours no key, billed again (2 calls, 2 bills: a second bill, counted in the report); " +
			"and as the ledger is read just after the database, that bill may show only in a later read. "
		if point == crashpoint.WebhookAfterSend {
			s += "The webhook is sent at the sender's next poll (every second) after the first completion, so more answers may have come back and been stored by then: those jobs are done at the crash. "
		}
		if point == crashpoint.CompleteAfterCommit {
			s += "The first group commit may also carry more than one answer, when they came back together: those jobs are done at the crash, and recovery closes the others. "
		}
		return s + "Never possible here: a running attempt the restart's recovery run does not close, two recovery runs for one restart, a job on `drill` billed twice, a second result or charge."
	case crashpoint.AcceptAfterCommit, crashpoint.RetryAfterCommit:
		return "The job the point's commit queued stays queued at the crash, since every slot holds a call; but the restarted lane claims it as soon as serve is ready, " +
			"so the after-recovery read races that claim (queued, running or done), and the ledger, read just after the database, may already hold its bill. " +
			"The jobs whose calls were in flight follow one path."
	}
	return ""
}

// expectInFlight is expectInFlight(t.Point), but for the budget-full
// scenario, whose trigger is a request the budget cannot cover: no job at
// any read.
func (t *Timeline) expectInFlight() (calls, trigger []path) {
	calls, trigger = expectInFlight(t.Point)
	if t.Budget > 0 {
		trigger = expectOverBudget()
	}
	return calls, trigger
}

// expectFor is the paths the job under key may take: its role's, with
// every answered call billed when it is on drill-claude.
func (t *Timeline) expectFor(key string) []path {
	calls, trig := t.expectInFlight()
	paths := calls
	if key == t.Trigger {
		paths = trig
	}
	if slices.Contains(t.Claude, key) {
		return unkeyed(paths)
	}
	return paths
}

// inFlightSets lists the family's paths by role: the calls in flight
// (those on drill-claude apart, where their paths differ), then the
// trigger job when there is one.
func (t *Timeline) inFlightSets() (sets [][]path, roles []string) {
	calls, trig := t.expectInFlight()
	n := t.InFlight
	if t.Point == crashpoint.CancelAfterCommit {
		n--
	}
	var claude int
	for _, k := range t.Claude {
		if k != t.Trigger && slices.Contains(t.Keys, k) {
			claude++
		}
	}
	other := ""
	if t.Point == crashpoint.CancelAfterCommit {
		other = " other"
	}
	sets, roles = [][]path{calls}, []string{fmt.Sprintf("each of the %d%s jobs whose calls were in flight", n, other)}
	if u := unkeyed(calls); claude > 0 && !slices.Equal(u, calls) {
		roles[0] = fmt.Sprintf("each of the %d%s jobs on `drill` whose calls were in flight", n-claude, other)
		sets, roles = append(sets, u), append(roles, fmt.Sprintf("each of the %d jobs on `drill-claude` whose calls were in flight (every answered call billed)", claude))
	}
	if t.Trigger != "" && trig != nil {
		role := "the job sent after them (key `" + t.Trigger + "`)"
		switch {
		case t.Budget > 0:
			role = "the request sent after them, past the account's budget (key `" + t.Trigger + "`)"
		case t.Point == crashpoint.RetryAfterCommit:
			role = "the job failed first and retried once they were in flight (key `" + t.Trigger + "`)"
		case t.Point == crashpoint.CancelAfterCommit:
			role = "the job whose call was in flight first, cancelled once they all were (key `" + t.Trigger + "`)"
		}
		sets, roles = append(sets, trig), append(roles, role)
	}
	return sets, roles
}

// readJob is what snapshot s shows of the job under key, in the words of
// expect's paths. As in read, what cannot belong to any path is spelled
// out in the job's status: a result or charge on a job that is not done,
// an attempt closed as a restart without a recovery run that closed it.
func (t *Timeline) readJob(s Snapshot, key string) state {
	c := checker{snap: s, keys: t.Keys}
	var calls, bills int64
	for _, e := range s.Ledger {
		if _, k, ok := c.owner(ledgerKey(e)); ok && k == key {
			calls += e.Calls
			bills += e.Bills
		}
	}
	out := state{job: noJob, attempts: "none", bills: fmt.Sprintf("%d / %d", calls, bills)}
	var jobs []JobRow
	for _, j := range s.Jobs {
		if j.Key == key {
			jobs = append(jobs, j)
		}
	}
	switch len(jobs) {
	case 0:
		return out
	case 1:
	default:
		out.job = fmt.Sprintf("%d jobs", len(jobs))
		return out
	}
	j := jobs[0]
	out.job = jobState(j)
	text, restarted := describeAttempts(s, j.ID)
	if text != "" {
		out.attempts = text
	}
	var odd []string
	want := 0
	if j.Status == inkwell.StatusDone {
		want = 1
	}
	if n := len(s.resultsOf(j.ID)); n != want {
		odd = append(odd, fmt.Sprintf("%d result(s)", n))
	}
	if n := len(s.chargesOf(j.ID)); n != want {
		odd = append(odd, fmt.Sprintf("%d charge(s)", n))
	}
	for _, a := range restarted {
		if _, ok := s.run(a.RecoveryRunID.Int64); !a.RecoveryRunID.Valid || !ok {
			odd = append(odd, fmt.Sprintf("attempt #%d closed as restarted by no recovery run", a.Number))
		}
	}
	if len(odd) > 0 {
		out.job += " with " + strings.Join(odd, ", ")
	}
	return out
}

// inFlightAtCrash counts, at the crash read, the attempts running and the
// jobs of the calls in flight that are done.
func (t *Timeline) inFlightAtCrash() (running, done int) {
	s := t.Snaps[t.Crash]
	for _, a := range s.Attempts {
		if a.Status == inkwell.StatusRunning {
			running++
		}
	}
	for _, j := range s.Jobs {
		if j.Key != t.Trigger && j.Status == inkwell.StatusDone {
			done++
		}
	}
	return running, done
}

// checkInFlight judges a scenario of the in-flight family: each job's
// three reads follow a path its role allows at the point (expectInFlight);
// the crash landed with the calls in flight (every slot's attempt running,
// but at complete.after-commit the jobs its commit finished); and the
// restart wrote one recovery run, which closed every attempt running at
// the crash. The §7 invariants (Check) judge the rest: each closed attempt
// linked to that run, nothing left running, every job done, billed once.
func (t *Timeline) checkInFlight() []Violation {
	idx := [3]int{t.Crash, t.Recovered, t.Final}
	if t.InFlight == 0 || slices.ContainsFunc(idx[:], func(i int) bool { return i < 0 || i >= len(t.Snaps) }) {
		return nil
	}
	var out []Violation
	for _, key := range t.Keys {
		paths := t.expectFor(key)
		var got path
		for m, i := range idx {
			got[m] = t.readJob(t.Snaps[i], key)
		}
		if slices.Contains(paths, got) {
			continue
		}
		var jobID int64
		if j, ok := t.Snaps[t.Final].jobByKey(key); ok {
			jobID = j.ID
		}
		m, detail := offPath(got, paths, fmt.Sprintf("%s with %d calls in flight", t.Point, t.InFlight))
		out = append(out, Violation{Snapshot: t.Snaps[idx[m]].Label, JobID: jobID, Invariant: InvPointState,
			Detail: "key " + key + ": " + detail})
	}
	crash := t.Snaps[t.Crash]
	add := func(snap Snapshot, format string, args ...any) {
		out = append(out, Violation{Snapshot: snap.Label, Invariant: InvInFlight, Detail: fmt.Sprintf(format, args...)})
	}
	running, done := t.inFlightAtCrash()
	switch {
	case t.Point == crashpoint.CompleteAfterCommit && (done < 1 || running < 1 || running+done != t.InFlight):
		add(crash, "%d attempt(s) running and %d job(s) done when serve died; the first completion's commit must leave its job(s) done and the others of the %d calls running", running, done, t.InFlight)
	case t.Point == crashpoint.WebhookAfterSend && (done < 1 || running+done != t.InFlight):
		add(crash, "%d attempt(s) running and %d job(s) done when serve died; a webhook is sent only for a job done, and the others of the %d calls are running or done", running, done, t.InFlight)
	case t.Point == crashpoint.CancelAfterCommit && running != t.InFlight-1:
		add(crash, "%d attempt(s) running when serve died; the scenario holds %d calls in flight, of which the cancel closed one", running, t.InFlight)
	case t.Point != crashpoint.CompleteAfterCommit && t.Point != crashpoint.CancelAfterCommit && t.Point != crashpoint.WebhookAfterSend && running != t.InFlight:
		add(crash, "%d attempt(s) running when serve died; the scenario holds %d calls in flight at this point", running, t.InFlight)
	}
	if t.Point == crashpoint.ProviderAfterCall || t.Point == crashpoint.CompleteBeforeCommit {
		if calls, bills, _ := t.billsOf(crash); bills == 0 {
			add(crash, "the provider had billed none of the calls (%d calls, %d bills); the point fires only once an answer, billed, is back", calls, bills)
		}
	}
	rec := t.Snaps[t.Recovered]
	var newRuns []RecoveryRunRow
	for _, r := range rec.Runs {
		if _, old := crash.run(r.ID); !old {
			newRuns = append(newRuns, r)
		}
	}
	switch {
	case len(newRuns) != 1:
		add(rec, "the restart wrote %d recovery run(s); one must close all %d attempt(s) running at the crash", len(newRuns), running)
	case newRuns[0].AttemptsClosed != int64(running) || newRuns[0].Failed != int64(running) || newRuns[0].AttemptsBackfilled != 0:
		r := newRuns[0]
		add(rec, "the restart's recovery run %d closed %d attempt(s) (%d back-filled) and failed %d job(s); %d attempt(s) were running at the crash, and it must close every one",
			r.ID, r.AttemptsClosed, r.AttemptsBackfilled, r.Failed, running)
	}
	return out
}

// offPath names the first read of got that leaves every path of paths
// (those who allows), with what was allowed there: the read's index and
// the words for it.
func offPath(got path, paths []path, who string) (int, string) {
	for m := range got {
		var allowed []state
		for _, p := range paths {
			if slices.Equal(p[:m], got[:m]) && !slices.Contains(allowed, p[m]) {
				allowed = append(allowed, p[m])
			}
		}
		if slices.Contains(allowed, got[m]) {
			continue
		}
		var before []string
		for _, s := range got[:m] {
			before = append(before, s.String())
		}
		after := ""
		if m > 0 {
			after = " after " + strings.Join(before, " → ")
		}
		alts := make([]string, len(allowed))
		for i, s := range allowed {
			alts[i] = "[" + s.String() + "]"
		}
		return m, fmt.Sprintf("read [%s], which %s does not allow here%s; it allows %s", got[m], who, after, strings.Join(alts, " or "))
	}
	return len(got) - 1, "read " + got.String() // not reached: a path outside paths leaves them at some read
}
