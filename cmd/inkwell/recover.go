package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
)

func init() {
	register("recover", "run startup recovery alone (closes a dead lane's orphans as failed)", runRecover)
}

const recoverHelp = `
Recover runs the startup recovery of 'inkwell serve' without serving: it
takes the lane's lock (refusing, with the holder named, while a live
process holds it: a live lane's running jobs are not orphans), then in one
transaction closes the lane's running attempts as failed ('worker
restarted'), back-fills one failed attempt for legacy running jobs that had
none, fails those jobs, marks the dead holder's lanes row stopped (so
status stops calling it alive), and records a recovery_runs row with the
evidence and the counts. Run twice, the second run changes nothing.

A --lane that nothing in the database names (no lanes row, no running job
or attempt, no earlier recovery) is refused, exit 1, with the lanes that
did run: nothing is written for a mistyped name.

--dry-run does the same inside a transaction that is rolled back, and
prints exactly what a real run would change.`

func runRecover(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("recover", "[--db PATH] [--lane NAME] [--dry-run] [--json]", recoverHelp, stdout, stderr)
	db := dbFlag(fs)
	lane := fs.String("lane", "local", "the lane whose orphans to close")
	dry := fs.Bool("dry-run", false, "print what would change, change nothing")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if !flagsOnly(fs, stderr, "the lane is --lane NAME, the database --db PATH") {
		return 2
	}
	if err := inkwell.ValidateLane(*lane); err != nil { // bad input: before the database is opened
		fmt.Fprintf(stderr, "inkwell recover: --lane: %s\n", inkwell.ErrorMessage(err))
		return 2
	}
	st, code := openArmed(ctx, "recover", *db, stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	if code := refuseUnknownLane(ctx, st, *lane, stderr); code != 0 {
		return code
	}
	lock, err := st.LockLane(ctx, *lane)
	if err != nil {
		return fail(stderr, "recover", err)
	}
	defer lock.Release()
	rep, err := st.Recover(ctx, lock, *dry)
	if err != nil {
		return fail(stderr, "recover", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(api.RecoveryReportOf(rep))
		return 0
	}
	printRecovery(stdout, rep)
	return 0
}

// refuseUnknownLane refuses (exit 1, nothing written) a lane that nothing
// in the database names: a mistyped --lane would otherwise take a lock
// file and record a recovery run for a lane that never ran.
func refuseUnknownLane(ctx context.Context, st *store.Store, lane string, stderr io.Writer) int {
	traced, err := st.LaneHasTrace(ctx, lane)
	if err != nil {
		return fail(stderr, "recover", err)
	}
	if traced {
		return 0
	}
	lanes, err := st.Lanes(ctx)
	if err != nil {
		return fail(stderr, "recover", err)
	}
	known := "no lane has run on it yet"
	if len(lanes) > 0 {
		names := make([]string, len(lanes))
		for i, l := range lanes {
			names[i] = l.Name
		}
		known = "lanes that ran here: " + strings.Join(names, ", ")
	}
	fmt.Fprintf(stderr, "inkwell recover: lane %s never ran on this database (%s): nothing to recover, nothing written; check --lane\n", lane, known)
	return 1
}

func printRecovery(w io.Writer, rep store.RecoveryReport) {
	verb, mark := "closed", "marked"
	if rep.DryRun {
		verb, mark = "would close", "would mark"
		fmt.Fprintf(w, "dry run on lane %s: nothing was changed\n", rep.Lane)
	} else {
		fmt.Fprintf(w, "recovery run %d on lane %s\n", rep.RunID, rep.Lane)
	}
	fmt.Fprintf(w, "  evidence: %s\n", rep.Evidence.Proof)
	if rep.Evidence.LaneRow != nil {
		p := rep.Evidence.LaneRow
		fmt.Fprintf(w, "  previous holder: pid %d on %s, last heartbeat %s\n", p.PID, p.Host, fmtTime(&p.HeartbeatAt))
	}
	fmt.Fprintf(w, "  %s %d running attempt(s), back-filled %d legacy attempt(s), failed %d job(s)\n",
		verb, rep.AttemptsClosed, rep.AttemptsBackfilled, rep.JobsFailed)
	if rep.PreviousStopped != "" {
		fmt.Fprintf(w, "  %s the previous holder's lanes row stopped: %s\n", mark, rep.PreviousStopped)
	}
	for _, a := range rep.Anomalies {
		fmt.Fprintf(w, "  left unchanged (invariant break, needs a person): %s\n", a)
	}
	if rep.JobsFailed > 0 {
		fmt.Fprintln(w, "  next: inspect the failed jobs ('inkwell show ID'), then 'inkwell retry ID...'")
	}
}
