package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

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
none, fails those jobs, and records a recovery_runs row with the evidence
and the counts. Run twice, the second run changes nothing.

--dry-run does the same inside a transaction that is rolled back, and
prints exactly what a real run would change.`

func runRecover(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("recover", "[--db PATH] [--lane NAME] [--dry-run]", recoverHelp, stdout, stderr)
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

func printRecovery(w io.Writer, rep store.RecoveryReport) {
	verb := "closed"
	if rep.DryRun {
		verb = "would close"
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
	for _, a := range rep.Anomalies {
		fmt.Fprintf(w, "  left unchanged (invariant break, needs a person): %s\n", a)
	}
	if rep.JobsFailed > 0 {
		fmt.Fprintln(w, "  next: inspect the failed jobs ('inkwell show ID'), then 'inkwell retry ID...'")
	}
}
