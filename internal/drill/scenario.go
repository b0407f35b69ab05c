package drill

import (
	"fmt"
	"strings"

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
}

// runSpec is one start of serve.
type runSpec struct {
	crashAt string // INKWELL_CRASH_AT for this run, or "" for a clean run
	target  bool   // this crash is the one the scenario is about
	failing bool   // the provider is the failing simulator (every call 500)
	retry   bool   // the clients retry failed jobs during this run
	until   until  // for a clean run: when to stop it gracefully
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
	default:
		sc.runs = append(sc.runs, runSpec{crashAt: spec, target: true, retry: true})
	}
	sc.runs = append(sc.runs, clean)
	return sc
}

// slug names the scenario's database and log files.
func (sc scenario) slug() string {
	return strings.NewReplacer(".", "-", ":", "-").Replace(sc.name)
}

// items is the scenario's workload: one request per job, each with its
// own key, so each key's bills can be told apart in the shared ledger.
func (sc scenario) items() []item {
	out := make([]item, sc.jobs)
	for i := range out {
		out[i] = item{
			key: fmt.Sprintf("drill-%s-%d", sc.slug(), i+1),
			req: inkwell.Request{
				Prompt:   fmt.Sprintf("crash drill %s, job %d: a short note on ink", sc.name, i+1),
				Account:  "drill",
				MaxWords: 8 + i,
			},
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
		return "Serve dies after committing the job but before answering: the client does not know. Its re-send with the same key is answered 200 with the job already stored, never a second job. (The restarted lane claims the queued job as soon as it is ready, so the after-recovery read may show queued or running.)"
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
		return "Jobs first fail the ordinary way (a provider answering 500). The client retries; serve dies just after the retry committed, before answering. The job is queued with its attempts untouched, and the restart runs it. (The restarted lane claims it as soon as it is ready, so the after-recovery read may show queued or running.)"
	}
	return ""
}
