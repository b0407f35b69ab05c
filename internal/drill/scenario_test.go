package drill

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/inkwell/inkwell/internal/provider/providersim"
)

// TestExpect_EveryPoint: every crash point says which reads it allows, so
// a new point cannot join the drill unjudged; only the two that fire on an
// HTTP request's path right after its commit race the lane and allow
// several paths, and those say why.
func TestExpect_EveryPoint(t *testing.T) {
	t.Parallel()
	racing := []string{crashpoint.AcceptAfterCommit, crashpoint.RetryAfterCommit}
	for _, p := range crashpoint.Names {
		paths := expect(p)
		switch {
		case len(paths) == 0:
			t.Errorf("%s: no paths: decide what a crash there may leave", p)
		case slices.Contains(racing, p) && (len(paths) < 2 || whyVaries(p) == ""):
			t.Errorf("%s: %d path(s), why %q; want several, and why", p, len(paths), whyVaries(p))
		case !slices.Contains(racing, p) && (len(paths) != 1 || whyVaries(p) != ""):
			t.Errorf("%s: %d paths, why %q; want exactly one", p, len(paths), whyVaries(p))
		}
		for _, path := range paths {
			if p == crashpoint.CancelAfterCommit {
				if path[2].job != inkwell.StatusFailed+" (cancelled)" {
					t.Errorf("%s: path %s does not end cancelled", p, path)
				}
				continue
			}
			if path[2].job != inkwell.StatusDone {
				t.Errorf("%s: path %s does not end done", p, path)
			}
		}
	}
}

// fakeRead builds a snapshot of one job, as a point's scenario would read
// it: job 1 with key k, its attempts ("running", "done", "restarted" for
// one closed by recovery, "provider" for one failed by a provider error),
// the provider's calls and bills under its key, and the attempts all
// recovery runs closed. A done job has one result and one charge.
type fakeRead struct {
	kind     Kind
	job      string // "" for no job
	attempts []string
	calls    int64
	bills    int64
	closed   int64
	results  int // -1: as a done job has
	jobs     int // more than one job under distinct keys, when > 1
}

func (f fakeRead) snap(key string) Snapshot {
	s := Snapshot{Label: string(f.kind), Kind: f.kind}
	s.Runs = []RecoveryRunRow{{ID: 1, AttemptsClosed: f.closed, Failed: f.closed}}
	if f.bills > 0 || f.calls > 0 {
		s.Ledger = []providersim.LedgerEntry{{Key: inkwell.ProviderKey(1, key), Calls: f.calls, Bills: f.bills}}
	}
	if f.job == "" {
		return s
	}
	for i := range max(f.jobs, 1) {
		s.Jobs = append(s.Jobs, JobRow{ID: int64(i + 1), Key: fmt.Sprintf("%s-%d", key, i), Status: f.job})
	}
	s.Jobs[0].Key = key
	for i, a := range f.attempts {
		row := AttemptRow{ID: int64(i + 1), JobID: 1, Number: i + 1, Status: a}
		switch a {
		case "restarted":
			row.Status, row.Error = inkwell.StatusFailed, sql.NullString{String: inkwell.ErrWorkerRestarted, Valid: true}
		case "provider":
			row.Status, row.Error = inkwell.StatusFailed, sql.NullString{String: "provider: server error: HTTP 500", Valid: true}
		}
		s.Attempts = append(s.Attempts, row)
	}
	results := f.results
	if results < 0 && f.job == inkwell.StatusDone {
		results = 1
	}
	for range max(results, 0) {
		s.Results = append(s.Results, ResultRow{JobID: 1})
		s.Charges = append(s.Charges, ChargeRow{JobID: 1})
	}
	return s
}

// fakeTimeline is a points-mode timeline of point with the three reads.
func fakeTimeline(point string, reads ...fakeRead) *Timeline {
	key := "drill-" + point + "-1"
	tl := &Timeline{Name: point, Point: point, Hit: 1, Keys: []string{key}, Crash: 0, Recovered: 1, Final: 2}
	for i, r := range reads {
		r.kind = []Kind{KindCrash, KindRecovered, KindFinal}[i]
		tl.Snaps = append(tl.Snaps, r.snap(key))
	}
	return tl
}

// fr is a read of job (a status, or "" for none) with its provider calls
// and bills, the attempts recovery closed in all, and its attempts.
func fr(job string, calls, bills, closed int64, attempts ...string) fakeRead {
	return fakeRead{job: job, attempts: attempts, calls: calls, bills: bills, closed: closed, results: -1}
}

// TestCheckPaths_Allowed: what the truth allows at a point passes, on
// every path, including those where the lane won the race to the kill.
func TestCheckPaths_Allowed(t *testing.T) {
	t.Parallel()
	const q, r, f, d = inkwell.StatusQueued, inkwell.StatusRunning, inkwell.StatusFailed, inkwell.StatusDone
	for name, tl := range map[string]*Timeline{
		"AcceptBeforeCommit": fakeTimeline(crashpoint.AcceptBeforeCommit, fr("", 0, 0, 0), fr("", 0, 0, 0), fr(d, 1, 1, 0, "done")),
		"AcceptAfterCommitQueued": fakeTimeline(crashpoint.AcceptAfterCommit,
			fr(q, 0, 0, 0), fr(r, 0, 0, 0, "running"), fr(d, 1, 1, 0, "done")),
		"AcceptAfterCommitClaimedBeforeTheKill": fakeTimeline(crashpoint.AcceptAfterCommit,
			fr(r, 1, 1, 0, "running"), fr(f, 1, 1, 1, "restarted"), fr(d, 2, 1, 1, "restarted", "done")),
		"AcceptAfterCommitDoneBeforeTheKill": fakeTimeline(crashpoint.AcceptAfterCommit,
			fr(d, 1, 1, 0, "done"), fr(d, 1, 1, 0, "done"), fr(d, 1, 1, 0, "done")),
		"ClaimAfterCommit": fakeTimeline(crashpoint.ClaimAfterCommit,
			fr(r, 0, 0, 0, "running"), fr(f, 0, 0, 1, "restarted"), fr(d, 1, 1, 1, "restarted", "done")),
		"CompleteAfterCommit": fakeTimeline(crashpoint.CompleteAfterCommit,
			fr(d, 1, 1, 0, "done"), fr(d, 1, 1, 0, "done"), fr(d, 1, 1, 0, "done")),
		"RetryAfterCommitQueued": fakeTimeline(crashpoint.RetryAfterCommit,
			fr(q, 0, 0, 0, "provider"), fr(q, 0, 0, 0, "provider"), fr(d, 1, 1, 0, "provider", "done")),
		"RetryAfterCommitClaimedBeforeTheKill": fakeTimeline(crashpoint.RetryAfterCommit,
			fr(r, 0, 0, 0, "provider", "running"), fr(f, 0, 0, 1, "provider", "restarted"), fr(d, 1, 1, 1, "provider", "restarted", "done")),
		"RetryAfterCommitBilledAfterTheCrashRead": fakeTimeline(crashpoint.RetryAfterCommit,
			fr(r, 0, 0, 0, "provider", "running"), fr(f, 1, 1, 1, "provider", "restarted"), fr(d, 2, 1, 1, "provider", "restarted", "done")),
	} {
		if vs := tl.checkPaths(); len(vs) != 0 {
			t.Errorf("%s: %d violation(s):\n%s", name, len(vs), joinViolations(vs))
		}
	}
}

// TestCheckPaths_Refused: a read the truth does not allow at a point fails
// the scenario, naming the read, the point and what it allows there.
func TestCheckPaths_Refused(t *testing.T) {
	t.Parallel()
	const q, r, f, d = inkwell.StatusQueued, inkwell.StatusRunning, inkwell.StatusFailed, inkwell.StatusDone
	tests := []struct {
		name string
		tl   *Timeline
		at   Kind   // the read named
		says string // in the violation
	}{
		{"RetryNotCommitted", fakeTimeline(crashpoint.RetryAfterCommit,
			fr(f, 0, 0, 0, "provider"), fr(f, 0, 0, 0, "provider"), fr(d, 1, 1, 0, "provider", "done")),
			KindCrash, "read [failed: #1 failed (provider error); 0 / 0], which retry.after-commit does not allow here"},
		{"FailedWithoutARecoveryRun", fakeTimeline(crashpoint.AcceptAfterCommit,
			fr(r, 0, 0, 0, "running"), fr(f, 0, 0, 0, "restarted"), fr(d, 1, 1, 0, "restarted", "done")),
			KindRecovered, "failed with recovery runs that closed 0 attempt(s), not 1"},
		{"QueuedJobFailedByRecovery", fakeTimeline(crashpoint.AcceptAfterCommit,
			fr(q, 0, 0, 0), fr(f, 0, 0, 1, "restarted"), fr(d, 1, 1, 1, "restarted", "done")),
			KindRecovered, "after queued: none; 0 / 0"},
		{"OrphanLeftRunning", fakeTimeline(crashpoint.RetryAfterCommit,
			fr(r, 0, 0, 0, "provider", "running"), fr(r, 0, 0, 0, "provider", "running"), fr(d, 1, 1, 0, "provider", "done")),
			KindRecovered, "it allows [failed: #1 failed (provider error), #2 failed (worker restarted); 0 / 0] or"},
		{"ClaimNotCommitted", fakeTimeline(crashpoint.ClaimAfterCommit,
			fr(q, 0, 0, 0), fr(q, 0, 0, 0), fr(d, 1, 1, 0, "done")),
			KindCrash, "it allows [running: #1 running; 0 / 0]"},
		{"BilledTwice", fakeTimeline(crashpoint.ProviderAfterCall,
			fr(r, 1, 1, 0, "running"), fr(f, 1, 1, 1, "restarted"), fr(d, 2, 2, 1, "restarted", "done")),
			KindFinal, "2 / 2"},
		{"TwoResults", fakeTimeline(crashpoint.CompleteAfterCommit,
			fr(d, 1, 1, 0, "done"), fr(d, 1, 1, 0, "done"), fakeRead{job: d, attempts: []string{"done"}, calls: 1, bills: 1, results: 2}),
			KindFinal, "done with 2 result(s), 2 charge(s)"},
		{"TwoJobs", fakeTimeline(crashpoint.AcceptAfterCommit,
			fr(q, 0, 0, 0), fakeRead{job: q, jobs: 2}, fr(d, 1, 1, 0, "done")),
			KindRecovered, "2 jobs"},
		{"ThirdAttempt", fakeTimeline(crashpoint.RecoverBeforeCommit,
			fr(r, 0, 0, 0, "running"), fr(f, 0, 0, 1, "restarted"), fr(d, 1, 1, 1, "restarted", "restarted", "done")),
			KindFinal, "#1 failed (worker restarted), #2 failed (worker restarted), #3 done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vs := tt.tl.checkPaths()
			if len(vs) != 1 {
				t.Fatalf("%d violations, want 1:\n%s", len(vs), joinViolations(vs))
			}
			v := vs[0]
			if v.Invariant != InvPointState || v.Snapshot != string(tt.at) || !strings.Contains(v.Detail, tt.says) {
				t.Errorf("violation %q; want invariant %q at the %s read, saying %q", v, InvPointState, tt.at, tt.says)
			}
		})
	}
}

// TestCheckPaths_OnlyPointsMode: sweeps (several jobs, N-th hits) and
// random runs have no list of paths; their reads are judged by the
// invariants alone.
func TestCheckPaths_OnlyPointsMode(t *testing.T) {
	t.Parallel()
	const q = inkwell.StatusQueued
	wrong := []fakeRead{fr(q, 0, 0, 0), fr(q, 0, 0, 0), fr(q, 0, 0, 0)}
	sweep := fakeTimeline(crashpoint.ClaimAfterCommit, wrong...)
	sweep.Hit, sweep.Keys = 3, []string{"a", "b", "c"}
	random := fakeTimeline("", wrong...)
	for name, tl := range map[string]*Timeline{"Sweep": sweep, "Random": random} {
		if vs := tl.checkPaths(); len(vs) != 0 {
			t.Errorf("%s: %d violations, want none:\n%s", name, len(vs), joinViolations(vs))
		}
		if tl.varying() != [6][3]bool{} {
			t.Errorf("%s: cells marked as varying; without paths there is nothing to say", name)
		}
	}
	if vs := fakeTimeline(crashpoint.ClaimAfterCommit, wrong...).checkPaths(); len(vs) != 1 {
		t.Errorf("the same reads in points mode: %d violations, want 1", len(vs))
	}
}

// TestVarying: exactly the cells that differ between a point's paths are
// marked: for retry.after-commit the crash and recovery reads and the
// final attempts, bills and recovery counts, never the final status.
func TestVarying(t *testing.T) {
	t.Parallel()
	tl := fakeTimeline(crashpoint.RetryAfterCommit)
	got := tl.varying()
	want := [6][3]bool{
		{true, true, false}, // job status
		{true, true, true},  // attempts
		{true, true, false}, // results
		{true, true, false}, // charges
		{true, true, true},  // provider calls / bills
		{false, true, true}, // recovery runs: the crash read comes before any recovery of it
	}
	if got != want {
		t.Errorf("varying = %v, want %v", got, want)
	}
	if exact := fakeTimeline(crashpoint.ProviderAfterCall).varying(); exact != [6][3]bool{} {
		t.Errorf("provider.after-call: varying = %v, want nothing", exact)
	}
}

// TestJoblifeScenarios: the reschedule family crashes at each point where
// it matters, with serve's automatic retry on and the front failing the
// job's first call, and every path ends done with one bill; the cancel
// family joins only with cancel.after-commit, and its paths end cancelled
// (or done, for the cancel that comes too late).
func TestJoblifeScenarios(t *testing.T) {
	t.Parallel()
	all := joblifeScenarios(append(slices.Clone(crashpoint.Names), crashpoint.CancelAfterCommit))
	without := joblifeScenarios(slices.DeleteFunc(slices.Clone(crashpoint.Names), func(p string) bool { return p == crashpoint.CancelAfterCommit }))
	var resched, cancels int
	for _, sc := range all {
		if sc.maxAttempts != joblifeMaxAttempts || len(sc.expect) == 0 || sc.about == "" {
			t.Errorf("%s: --max-attempts %d, %d paths, about %q", sc.name, sc.maxAttempts, len(sc.expect), sc.about)
		}
		var targets int
		for _, r := range sc.runs {
			if r.target {
				targets++
			}
		}
		if last := sc.runs[len(sc.runs)-1]; targets != 1 || last.crashAt != "" || last.until != untilAllDone {
			t.Errorf("%s: runs %+v: want one target crash, then a clean run until every job is finished", sc.name, sc.runs)
		}
		for _, p := range sc.expect {
			switch sc.family {
			case familyReschedule:
				if p[2].job != inkwell.StatusDone || (p[2].bills != "1 / 1" && p[2].bills != "2 / 1") || sc.front == failNone {
					t.Errorf("%s: path %s (front %q): want it to end done, billed once", sc.name, p, sc.front)
				}
			case familyCancel:
				if p[2].job != inkwell.StatusFailed+" (cancelled)" && sc.cancel != cancelDone {
					t.Errorf("%s: path %s does not end cancelled", sc.name, p)
				}
			}
		}
		if len(sc.expect) > 1 && sc.why == "" {
			t.Errorf("%s: %d paths and no why", sc.name, len(sc.expect))
		}
		switch sc.family {
		case familyReschedule:
			resched++
		case familyCancel:
			cancels++
		}
	}
	if resched != 9 || cancels != 2 {
		t.Errorf("%d reschedule and %d cancel scenarios; want 9 and 2", resched, cancels)
	}
	if len(without) != resched {
		t.Errorf("without cancel.after-commit: %d scenarios, want the %d of the reschedule family", len(without), resched)
	}
	if c := pointScenario(crashpoint.CancelAfterCommit, 1, 1); c.cancel != cancelRunning || c.name != crashpoint.CancelAfterCommit || c.runs[0].latency != heldCall {
		t.Errorf("cancel.after-commit's own scenario: %+v; want the cancel of a held call", c)
	}
}
