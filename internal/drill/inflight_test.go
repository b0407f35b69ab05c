package drill

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
)

// TestExpectInFlight_EveryPoint: every crash point has its in-flight
// scenario and says which reads each of its jobs may take, so a new point
// cannot join the family unjudged. The held calls' jobs have one path;
// the trigger job is there exactly where the family adds one, and is
// queued at the crash (every slot holds a call); every path ends done.
func TestExpectInFlight_EveryPoint(t *testing.T) {
	t.Parallel()
	lim := Config{Short: true}.limits()
	for _, p := range crashpoint.Names {
		sc := inFlightScenario(p, inFlightCalls, lim)
		calls, trig := expectInFlight(p)
		if len(calls) == 0 {
			t.Errorf("%s: no paths for the calls in flight", p)
		}
		if want := sc.trigger != triggerNone; (trig != nil) != want {
			t.Errorf("%s: trigger paths %v, want them: %v", p, trig, want)
		}
		for _, path := range trig {
			if p == crashpoint.CancelAfterCommit {
				if path[2].job != inkwell.StatusFailed+" (cancelled)" {
					t.Errorf("%s: trigger path %s does not end cancelled", p, path)
				}
				continue
			}
			if path[2].job != inkwell.StatusDone {
				t.Errorf("%s: trigger path %s does not end done", p, path)
			}
			if p != crashpoint.AcceptBeforeCommit && path[0].job != inkwell.StatusQueued {
				t.Errorf("%s: trigger path %s: the job cannot be claimed before the kill, every slot holds a call", p, path)
			}
		}
		for _, path := range calls {
			if path[2].job != inkwell.StatusDone {
				t.Errorf("%s: path %s does not end done", p, path)
			}
		}
		held := slices.Contains([]string{crashpoint.ProviderAfterCall, crashpoint.CompleteBeforeCommit, crashpoint.CompleteAfterCommit, crashpoint.WebhookAfterSend}, p)
		if !held && len(calls) != 1 {
			t.Errorf("%s: %d paths for calls the simulator holds until the kill; want exactly one", p, len(calls))
		}
		if (whyVariesInFlight(p) != "") != (held || trig != nil && len(trig) > 1) {
			t.Errorf("%s: says why it varies %q, but its paths are %d and %d", p, whyVariesInFlight(p), len(calls), len(trig))
		}
		if sc.hit != inFlightHit(p, inFlightCalls) || !strings.Contains(sc.name, fmt.Sprintf("%s:%d", p, sc.hit)) {
			t.Errorf("%s: scenario %q at hit %d", p, sc.name, sc.hit)
		}
		var targets int
		for _, r := range sc.runs {
			if r.target {
				targets++
				if !strings.HasPrefix(r.crashAt, p+":") {
					t.Errorf("%s: the target run dies at %s", p, r.crashAt)
				}
			}
		}
		if last := sc.runs[len(sc.runs)-1]; targets != 1 || last.crashAt != "" || last.until != untilAllDone || last.latency != lim.latency {
			t.Errorf("%s: runs %+v: want one target crash, then a clean run against the fast simulator until every job is done", p, sc.runs)
		}
	}
}

// TestInFlightItems: the family's workload: the calls in flight, and the
// trigger job after them (a request) or before them with the calls held
// at the gate (a retry).
func TestInFlightItems(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	lim := Config{}.limits()
	for point, want := range map[string][]string{
		crashpoint.ClaimAfterCommit:    {"1", "2", "3", "4", "5", "6", "7", "8"},
		crashpoint.AcceptAfterCommit:   {"1", "2", "3", "4", "5", "6", "7", "8", "t"},
		crashpoint.RetryAfterCommit:    {"t", "1=gate", "2", "3", "4", "5", "6", "7", "8"},
		crashpoint.CompleteAfterCommit: {"1", "2", "3", "4", "5", "6", "7", "8"},
	} {
		sc := inFlightScenario(point, inFlightCalls, lim)
		var got []string
		for _, it := range sc.inFlightItems(gate) {
			s := it.key[strings.LastIndex(it.key, "-")+1:]
			if it.gate != nil {
				s += "=gate"
			}
			got = append(got, s)
			if !strings.HasPrefix(it.key, "drill-"+sc.slug()+"-") {
				t.Errorf("%s: key %q is not the scenario's", point, it.key)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: items %v, want %v", point, got, want)
		}
	}
}

// familyBreaks are the ways a test breaks the database of an in-flight
// scenario, at the moment each names; asPoint judges the result as
// another point's scenario would be judged; claims is how many of the
// jobs are claimed before the crash (all of them when 0).
type familyBreaks struct {
	beforeCrash, beforeRecovery, afterRecovery, beforeFinal func(w *world)
	asPoint                                                 string
	claims                                                  int
}

// playFamily builds, through the real store and a real simulator on
// loopback, what the in-flight scenario at point leaves in the database
// (see inFlightScenario): eight jobs accepted and claimed one by one;
// at accept.after-commit a ninth accepted and left queued; at
// provider.after-call the first one's call answered and not stored, at
// complete.after-commit stored. That is the crash read. Then the store's
// own recovery, the after-recovery read; then the client's retries and
// the lane's calls, the final read. It returns the timeline and what the
// drill finds in it.
func playFamily(t *testing.T, point string, br familyBreaks) (*Timeline, []Violation) {
	t.Helper()
	ctx := context.Background()
	w := emptyWorld(t)
	slug := "inflight-" + strings.NewReplacer(".", "-").Replace(point)
	claims := cmp0(br.claims, inFlightCalls)
	st := w.open()
	for i := range inFlightCalls {
		w.mustAccept(fmt.Sprintf("drill-%s-%d", slug, i+1))
		if i >= claims {
			continue
		}
		c, err := claimAs(st, "drill")
		if err != nil || c == nil {
			t.Fatalf("claim: %v %v", c, err)
		}
		if i == 0 && (point == crashpoint.ProviderAfterCall || point == crashpoint.CompleteAfterCommit) {
			w.mustCall(st, c, point == crashpoint.CompleteAfterCommit)
		}
	}
	st.Close()
	tl := &Timeline{Name: "in flight: " + point, Point: cmpStr(br.asPoint, point), Hit: inFlightHit(point, inFlightCalls), InFlight: inFlightCalls}
	if point == crashpoint.AcceptAfterCommit {
		tl.Trigger = fmt.Sprintf("drill-%s%s", slug, triggerSuffix)
		w.mustAccept(tl.Trigger)
	}
	run(br.beforeCrash, w)
	crash := w.mustSnap(KindCrash, "after crash")
	run(br.beforeRecovery, w)
	st = w.open()
	lock, err := st.LockLane(ctx, "drill")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recover(ctx, lock, false); err != nil {
		t.Fatal(err)
	}
	lock.Release()
	st.Close()
	run(br.afterRecovery, w)
	rec := w.mustSnap(KindRecovered, "after restart")
	w.mustDrain()
	run(br.beforeFinal, w)
	final := w.mustSnap(KindFinal, "final")
	tl.Keys, tl.Snaps, tl.Crash, tl.Recovered, tl.Final = w.keys, []Snapshot{crash, rec, final}, 0, 1, 2
	vs := Check(Evidence{Snapshots: tl.Snaps, Keys: w.keys, Requests: w.sent})
	return tl, append(vs, tl.checkInFlight()...)
}

// mustDrain does what the client and the restarted lane do after the
// restart: every failed job retried, then every queued job claimed, its
// provider called and its answer stored.
func (w *world) mustDrain() {
	w.t.Helper()
	ctx := context.Background()
	s, err := Inspect(ctx, w.dsn)
	if err != nil {
		w.t.Fatal(err)
	}
	st := w.open()
	defer st.Close()
	for _, j := range s.Jobs {
		if j.Status == inkwell.StatusFailed {
			if _, err := st.RetryIfFailed(ctx, j.ID, "cli"); err != nil {
				w.t.Fatal(err)
			}
			w.sent = append(w.sent, Sent{Seq: len(w.sent) + 1, Path: fmt.Sprintf("%s/%d/retry", pathJobs, j.ID), JobID: j.ID, Outcome: OutcomeOK, Status: 200})
		}
	}
	for {
		c, err := claimAs(st, "drill")
		if err != nil {
			w.t.Fatal(err)
		}
		if c == nil {
			return
		}
		w.mustCall(st, c, true)
	}
}

func run(f func(*world), w *world) {
	if f != nil {
		f(w)
	}
}

func cmp0(n, or int) int {
	if n == 0 {
		return or
	}
	return n
}

func cmpStr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// TestCheckInFlight_RealRecoveryPasses: the store's own recovery of eight
// orphans, each scenario's way, passes every check, and the restart's one
// recovery run closed exactly the attempts running at the crash.
func TestCheckInFlight_RealRecoveryPasses(t *testing.T) {
	t.Parallel()
	for _, point := range []string{crashpoint.ClaimAfterCommit, crashpoint.AcceptAfterCommit, crashpoint.ProviderAfterCall, crashpoint.CompleteAfterCommit} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			tl, vs := playFamily(t, point, familyBreaks{})
			if len(vs) != 0 {
				t.Fatalf("%d violations:\n%s", len(vs), joinViolations(vs))
			}
			running, done := tl.inFlightAtCrash()
			want := inFlightCalls
			if point == crashpoint.CompleteAfterCommit {
				want--
			}
			if running != want || running+done != inFlightCalls {
				t.Errorf("at the crash: %d running, %d done; want %d running", running, done, want)
			}
			if n := len(tl.Snaps[tl.Recovered].Runs); n != 1 || tl.Snaps[tl.Recovered].Runs[0].AttemptsClosed != int64(want) {
				t.Errorf("recovery runs %+v, want one that closed %d", tl.Snaps[tl.Recovered].Runs, want)
			}
		})
	}
}

// TestCheckInFlight_BrokenDatabases: each way a crash with calls in flight
// or its recovery could go wrong is caught, naming the job and the
// invariant: a recovery run that closed fewer attempts than were running,
// an attempt left running, two recovery runs for one restart, two
// results, fewer calls in flight than the point holds, the trigger job
// claimed with no slot free, and no bill where an answer fired the point.
func TestCheckInFlight_BrokenDatabases(t *testing.T) {
	t.Parallel()
	type want struct {
		job int64
		inv string
	}
	tests := []struct {
		name  string
		point string
		br    familyBreaks
		want  []want
	}{
		{"RecoveryClosedFewerThanRunning", crashpoint.ClaimAfterCommit, familyBreaks{beforeRecovery: func(w *world) {
			// Job 8's rows claim another lane, so the recovery of this
			// one passes it by: 7 of the 8 attempts closed.
			w.mustExec(`UPDATE jobs SET lane = 'elsewhere' WHERE id = 8`, `UPDATE job_attempts SET lane = 'elsewhere' WHERE job_id = 8`)
		}}, []want{{0, InvInFlight}, {8, InvNothingRunning}, {8, InvPointState}, {8, InvAllDone}}},
		{"AttemptLeftRunning", crashpoint.ClaimAfterCommit, familyBreaks{afterRecovery: func(w *world) {
			// Undo the recovery of job 3's attempt, as a recovery that
			// skipped it while counting it would have left it.
			w.mustExec(`DROP TRIGGER job_attempts_finished_immutable`,
				`UPDATE job_attempts SET status = 'running', error = NULL, finished_at = NULL, recovery_run_id = NULL WHERE job_id = 3`,
				`UPDATE jobs SET status = 'running', error = NULL, finished_at = NULL WHERE id = 3`)
		}}, []want{{3, InvNothingRunning}, {3, InvPointState}, {0, InvRecoveryRun}, {3, InvAllDone}}},
		{"TwoRecoveryRunsForOneRestart", crashpoint.ClaimAfterCommit, familyBreaks{afterRecovery: func(w *world) {
			w.mustExec(`INSERT INTO recovery_runs (lane, incarnation, started_at, lock_method, evidence) 
				VALUES ('drill', 'x', '2026-01-01T00:00:00.000000Z', 'flock', '{"proof":"made up"}')`)
		}}, []want{{0, InvRecoveryRun}, {0, InvInFlight}}},
		{"TwoResults", crashpoint.AcceptAfterCommit, familyBreaks{beforeFinal: func(w *world) {
			w.mustExec(`CREATE TABLE results_copy AS SELECT * FROM results`,
				`DROP TABLE results`,
				`CREATE TABLE results AS SELECT * FROM results_copy`,
				`DROP TABLE results_copy`,
				`INSERT INTO results (id, job_id, attempt_id, text, created_at) SELECT id + 100, job_id, attempt_id, text, created_at FROM results WHERE job_id = 2`)
		}}, []want{{2, InvOneResult}, {2, InvPointState}}},
		{"FewerCallsInFlight", crashpoint.ClaimAfterCommit, familyBreaks{claims: 7}, []want{{0, InvInFlight}, {8, InvPointState}}},
		{"TriggerClaimedWithNoSlotFree", crashpoint.AcceptAfterCommit, familyBreaks{beforeCrash: func(w *world) {
			st := w.open()
			defer st.Close()
			if c, err := claimAs(st, "drill"); err != nil || c == nil {
				w.t.Fatalf("claim: %v %v", c, err)
			}
		}}, []want{{0, InvInFlight}, {9, InvPointState}}},
		{"NoBillWhereAnAnswerFiredThePoint", crashpoint.ClaimAfterCommit, familyBreaks{asPoint: crashpoint.ProviderAfterCall}, []want{{0, InvInFlight}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, vs := playFamily(t, tt.point, tt.br)
			for _, w := range tt.want {
				wantViolation(t, vs, w.job, w.inv)
			}
		})
	}
}

// TestCheckInFlight_Messages: the family's violations say what was wrong
// in numbers: how many attempts ran, how many the run closed.
func TestCheckInFlight_Messages(t *testing.T) {
	t.Parallel()
	_, vs := playFamily(t, crashpoint.ClaimAfterCommit, familyBreaks{beforeRecovery: func(w *world) {
		w.mustExec(`UPDATE jobs SET lane = 'elsewhere' WHERE id IN (7, 8)`, `UPDATE job_attempts SET lane = 'elsewhere' WHERE job_id IN (7, 8)`)
	}})
	msg := joinViolations(vs)
	for _, want := range []string{
		"closed 6 attempt(s) (0 back-filled) and failed 6 job(s); 8 attempt(s) were running at the crash",
		"key drill-inflight-claim-after-commit-8: read [running: #1 running; 0 / 0], which claim.after-commit with 8 calls in flight does not allow here after running: #1 running; 0 / 0",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("violations do not say %q:\n%s", want, msg)
		}
	}
}

// TestVarying_InFlight: the family's cells vary exactly where a role's
// paths differ: nowhere at claim.after-commit; at provider.after-call only
// the bills; at accept.after-commit the trigger job's after-recovery read.
func TestVarying_InFlight(t *testing.T) {
	t.Parallel()
	fam := func(point, trigger string) *Timeline {
		return &Timeline{Point: point, InFlight: inFlightCalls, Trigger: trigger}
	}
	if v := fam(crashpoint.ClaimAfterCommit, "").varying(); v != [6][3]bool{} {
		t.Errorf("claim.after-commit: varying %v, want nothing", v)
	}
	if v := fam(crashpoint.ProviderAfterCall, "").varying(); v != [6][3]bool{4: {true, true, true}} {
		t.Errorf("provider.after-call: varying %v, want the bills only", v)
	}
	v := fam(crashpoint.AcceptAfterCommit, "k-t").varying()
	if v[0] != [3]bool{false, true, false} || v[4] != [3]bool{false, true, false} {
		t.Errorf("accept.after-commit: varying %v, want the after-recovery status and bills", v)
	}
}
