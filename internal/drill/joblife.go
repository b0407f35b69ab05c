package drill

import (
	"fmt"
	"strings"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
)

// The job-life families (docs/design.md §9): automatic retry (reschedule)
// and cancel, crashed where they matter, one job each; how each is played
// is each scenario's about text (aboutReschedule, cancelScenario), in
// docs/crash-timeline.md.

// Families of scenarios besides the points and the in-flight family.
const (
	familyReschedule = "reschedule"
	familyCancel     = "cancel"
)

// Reschedule flags of every serve in the job-life families.
const (
	joblifeMaxAttempts = 3
	joblifeRetryBase   = "50ms"
	joblifeRetryCap    = "200ms"
)

// cancelWhen says when a client cancels an item's job.
type cancelWhen int

const (
	cancelNever   cancelWhen = iota
	cancelRunning            // once it reads the job running (its call in flight)
	cancelBackoff            // once it reads the job queued waiting out a back-off (not_before set)
	cancelDone               // once it reads the job done: the cancel must answer 409
)

// rescheduleScenario is the reschedule family's scenario crashed at
// point's hit, with the front failing the job's first `fails` calls how.
func rescheduleScenario(point string, hit int, how failure, fails int) scenario {
	spec := fmt.Sprintf("%s:%d", point, hit)
	sc := scenario{name: fmt.Sprintf("reschedule (%s): %s", how, spec), point: point, hit: hit, jobs: 1,
		family: familyReschedule, front: how, frontFails: fails, maxAttempts: joblifeMaxAttempts, prune: joblifePrune}
	if how == failCut {
		// A timeout is retry-safe on the drill's openai provider, which
		// honours keys; its scenario is the one on drill-claude, whose
		// anthropic provider honours none.
		sc.chatEvery = 1
	}
	first := "#1 " + failedAs(how)
	pre := []string{first}
	switch point {
	case crashpoint.RecoverBeforeCommit:
		sc.runs = append(sc.runs, runSpec{crashAt: crashpoint.ClaimAfterCommit + ":2"}, runSpec{crashAt: spec, target: true})
	case crashpoint.RetryAfterCommit:
		// Every attempt fails until automatic retry gives up; then the
		// client retries by hand and serve dies at that retry's commit.
		pre = nil
		for i := 1; i <= fails; i++ {
			pre = append(pre, fmt.Sprintf("#%d %s", i, failedAs(how)))
		}
		sc.runs = append(sc.runs, runSpec{until: untilAllFailed}, runSpec{crashAt: spec, target: true, retry: true})
	default:
		sc.runs = append(sc.runs, runSpec{crashAt: spec, target: true, retry: true})
	}
	sc.runs = append(sc.runs, runSpec{retry: true, until: untilAllDone})
	att := func(more ...string) string { return strings.Join(append(append([]string(nil), pre...), more...), ", ") }
	orphanOf := func(bills, final string) []path {
		return []path{{
			{inkwell.StatusRunning, att("#2 running"), bills},
			{inkwell.StatusFailed, att("#2 " + failedRestarted), bills},
			{inkwell.StatusDone, att("#2 "+failedRestarted, "#3 done"), final},
		}}
	}
	switch point {
	case crashpoint.ClaimAfterCommit, crashpoint.RecoverBeforeCommit:
		sc.expect = orphanOf("0 / 0", "1 / 1")
	case crashpoint.ProviderAfterCall, crashpoint.CompleteBeforeCommit:
		sc.expect = orphanOf("1 / 1", "2 / 1")
	case crashpoint.CompleteAfterCommit:
		done := state{inkwell.StatusDone, att("#2 done"), "1 / 1"}
		sc.expect = []path{{done, done, done}}
	case crashpoint.RetryAfterCommit:
		sc.expect = racy(pre)
		sc.why = whyVaries(point) + fmt.Sprintf(" Here the job had failed %d times first, each a %s the front answered before the simulator saw it, "+
			"until automatic retry gave up (gave_up_after %d); the client's retry by hand is not automatic retry and is allowed for any class.", fails, how, fails)
	}
	sc.about = aboutReschedule(point, hit, how, fails)
	return sc
}

// failedAs is how describeAttempts renders an attempt the front failed.
func failedAs(how failure) string {
	switch how {
	case fail429:
		return "failed (rate limited)"
	case failRefused:
		return "failed (not sent)"
	case failCut:
		return "failed (timeout)"
	}
	return failedProvider
}

func aboutReschedule(point string, hit int, how failure, fails int) string {
	flags := fmt.Sprintf("Serve runs with `--max-attempts %d --retry-base %s --retry-cap %s`; the drill's front %s to the job's first call", joblifeMaxAttempts, joblifeRetryBase, joblifeRetryCap, how.words())
	if how == failRefused {
		flags = fmt.Sprintf("Serve runs with `--max-attempts %d --retry-base %s --retry-cap %s`; the first serve's provider address refuses connections, and the restarted serve's reaches the simulator. ", joblifeMaxAttempts, joblifeRetryBase, joblifeRetryCap)
	}
	if fails > 1 {
		flags = fmt.Sprintf("Serve runs with `--max-attempts %d --retry-base %s --retry-cap %s`; the drill's front %s to the job's first %d calls", joblifeMaxAttempts, joblifeRetryBase, joblifeRetryCap, how.words(), fails)
	}
	if how != failRefused {
		flags += ", unbilled, and passes the others to the simulator. "
	}
	var first string
	switch how {
	case failRefused:
		first = "A refused connection is not_sent, retry-safe: nothing reached the provider; in the transaction that fails attempt #1 the job goes back to queued with `not_before`; the lane claims attempt #2 then. "
	case failCut:
		first = "The job is a chat request on `drill-claude`, whose provider is `anthropic`. A cut connection is a timeout: the request may have reached the provider, which honours no idempotency key (`honours_keys` is refused for anthropic), so a second call could bill again, and the job is NOT rescheduled: it fails, and the client retries it by hand (attempt #2). " +
			"(On `drill`, whose openai provider honours keys, a timeout is rescheduled like a 500.) "
	case fail429:
		first = "The 429 is retry-safe: in the transaction that fails attempt #1 the job goes back to queued, not before its `Retry-After` (which wins over the back-off); the lane claims attempt #2 then. "
	default:
		first = "The 500 is retry-safe: in the transaction that fails attempt #1 the job goes back to queued with `not_before` (the back-off); the lane claims attempt #2 then. "
	}
	var what string
	switch point {
	case crashpoint.ClaimAfterCommit:
		what = fmt.Sprintf("Serve dies right after attempt #2's claim (hit %d): recovery closes it (worker restarted) and, never re-queuing, fails the job; the client retries it: attempt #3 is done, billed once.", hit)
	case crashpoint.ProviderAfterCall:
		what = "Attempt #2's call is answered and billed, and serve dies before storing it. Recovery fails the orphan; the client's retry (attempt #3) sends the same job-scoped key and is answered from the simulator's record: one bill."
	case crashpoint.CompleteBeforeCommit:
		what = "Serve dies inside attempt #2's completion transaction: nothing of it is kept, as at provider.after-call; attempt #3 is answered from the record: one bill."
	case crashpoint.CompleteAfterCommit:
		what = "Serve dies just after attempt #2's completion committed: the job is done with one result and one charge; the failed attempt #1 stays as it was."
	case crashpoint.RecoverBeforeCommit:
		what = "Serve first dies right after attempt #2's claim (claim.after-commit:2), then the restart dies inside startup recovery before its commit: nothing of that recovery is kept. The next restart recovers the orphan once; the client retries it (attempt #3)."
	case crashpoint.RetryAfterCommit:
		what = fmt.Sprintf("Every attempt fails until automatic retry gives up after %d (`gave_up_after`); the client then retries the job by hand, and serve dies just after that retry's commit, before answering.", fails)
	}
	return flags + first + what
}

// cancelScenario is the cancel family's scenario: the client cancels the
// job when, and serve dies at crashAt (the target point).
func cancelScenario(point string, when cancelWhen) scenario {
	spec := point + ":1"
	sc := scenario{point: point, hit: 1, jobs: 1, family: familyCancel, cancel: when, maxAttempts: joblifeMaxAttempts, prune: joblifePrune}
	cancelled := inkwell.StatusFailed + " (cancelled)"
	switch when {
	case cancelRunning:
		sc.name = "cancel (call in flight): " + spec
		// The simulator holds the call until serve dies: the provider has
		// not answered, so it has not billed.
		sc.runs = []runSpec{{crashAt: spec, target: true, retry: true, latency: heldCall}, {retry: true, until: untilAllDone}}
		s := state{cancelled, "#1 failed (cancelled)", "0 / 0"}
		sc.expect = []path{{s, s, s}}
		sc.about = "The job's call is in flight (the simulator holds it) when the client cancels it. The cancel closes the running attempt and fails the job, class `cancelled`, in one transaction, and serve dies just after its commit, before answering. " +
			"The provider never answered, so it never billed. Recovery finds nothing running; the client re-sends its cancel, whose answer was lost, and the restarted serve answers 200 with the job as it is. No later attempt, result or charge."
	case cancelBackoff:
		sc.name = "cancel (waiting out a 429): " + spec
		sc.front, sc.frontFails, sc.retryAfter = fail429, 1, "60"
		sc.runs = []runSpec{{crashAt: spec, target: true, retry: true}, {retry: true, until: untilAllDone}}
		s := state{cancelled, "#1 failed (rate limited)", "0 / 0"}
		sc.expect = []path{{s, s, s}}
		sc.about = "The front answers the job's first call 429 with `Retry-After: 60`: the job goes back to queued, not before a minute from then. The client cancels it while it waits: a queued job is cancelled at once (failed, class `cancelled`, `not_before` cleared), and serve dies just after the commit. " +
			"The restarted serve never claims it; the client's re-sent cancel is answered 200."
	case cancelDone:
		sc.name = "cancel (after done): " + crashpoint.CompleteAfterCommit + ":1"
		sc.point = crashpoint.CompleteAfterCommit
		sc.runs = []runSpec{{crashAt: crashpoint.CompleteAfterCommit + ":1", target: true, retry: true}, {retry: true, until: untilAllDone}}
		done := state{inkwell.StatusDone, "#1 done", "1 / 1"}
		sc.expect = []path{{done, done, done}}
		sc.about = "Serve dies just after the job's completion committed. The client, reading it done from the restarted serve, cancels it: a completion that committed first wins, and the cancel is answered 409 with the job done, which stays done."
	}
	return sc
}

// heldCall is a simulator latency longer than any scenario: the call stays
// in flight until serve dies or gives it up.
const heldCall = -1

// joblifeScenarios lists the job-life families over the given points: the
// reschedule family at each point where it matters, and the cancel family
// when cancel.after-commit is among them (its own scenario, the cancel of
// a call in flight, is the point's: pointScenario).
func joblifeScenarios(points []string) []scenario {
	var out []scenario
	has := func(p string) bool {
		for _, q := range points {
			if q == p {
				return true
			}
		}
		return false
	}
	for _, p := range []string{crashpoint.ClaimAfterCommit, crashpoint.ProviderAfterCall, crashpoint.CompleteBeforeCommit,
		crashpoint.CompleteAfterCommit, crashpoint.RecoverBeforeCommit} {
		if !has(p) {
			continue
		}
		hit := 1
		if p == crashpoint.ClaimAfterCommit {
			hit = 2
		}
		out = append(out, rescheduleScenario(p, hit, fail500, 1))
	}
	if has(crashpoint.ClaimAfterCommit) {
		out = append(out, rescheduleScenario(crashpoint.ClaimAfterCommit, 2, fail429, 1),
			rescheduleScenario(crashpoint.ClaimAfterCommit, 2, failRefused, 1),
			rescheduleScenario(crashpoint.ClaimAfterCommit, 2, failCut, 1))
	}
	if has(crashpoint.RetryAfterCommit) {
		out = append(out, rescheduleScenario(crashpoint.RetryAfterCommit, 1, fail500, joblifeMaxAttempts))
	}
	if has(crashpoint.CancelAfterCommit) {
		out = append(out, cancelScenario(crashpoint.CancelAfterCommit, cancelBackoff),
			cancelScenario(crashpoint.CompleteAfterCommit, cancelDone))
	}
	return out
}

// joblifePrune: the job-life scenarios end with a prune and re-sends of
// every key (prune.go).
const joblifePrune = true
