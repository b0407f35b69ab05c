package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
)

func init() {
	register("status", "the overview: jobs by status with the next safe action, lanes, last recovery run", runStatus)
}

const statusHelp = `
Status prints what the database says right now, read from the operator
views that 'SELECT * FROM job_overview;' shows in sqlite3 or psql:

  - one row per status (queued, running, failed, done): how many, the
    oldest, and the next safe action, computed from lane heartbeats,
    failure classes and job states (docs/operations.md explains each):
    jobs waiting for back-off, and per failure class how many and what
    is safe to do (a rejected job: fix its cause first; a timeout with a
    provider that ignores keys: a retry may bill twice);
  - every lane: alive, silent (heartbeat too old) or stopped;
  - the last startup recovery run and the evidence it acted on;
  - the jobs that are not done (job_board), each with its failure class
    and its own next action (possible poison jobs, jobs automatic retry
    gave up on, cancelled and pruned jobs included).

It works whether or not a server is running, and changes nothing.`

// statusReport is what status reads; --json prints it in the HTTP API's
// wire form (api.OverviewResponse).
type statusReport struct {
	Overview        []store.OverviewRow
	Lanes           []store.LaneState
	LastRecoveryRun *store.RecoveryRun
	Jobs            []store.BoardRow
	// SilentLanes says, per silent lane, what this host can tell of its
	// process (alive and stopped or hung, or gone) and what to do.
	SilentLanes map[string]string
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("status", "[--db PATH] [--json] [--jobs N]", statusHelp, stdout, stderr)
	db := dbFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	jobs := fs.Int("jobs", 10, "list at most this many jobs that are not done (0: none, -1: all)")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if !flagsOnly(fs, stderr, "the database is --db PATH") {
		return 2
	}
	if *jobs < -1 {
		fmt.Fprintf(stderr, "inkwell status: --jobs %d: say how many jobs to list (0: none, -1: all)\n", *jobs)
		return 2
	}
	st, err := openForReading(ctx, *db)
	if err != nil {
		return fail(stderr, "status", err)
	}
	defer st.Close()
	rep, err := readStatus(ctx, st, *jobs)
	if err = readAsOpened(st, err); err != nil {
		return fail(stderr, "status", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		out := api.NewOverviewResponse(rep.Overview, rep.Lanes, rep.LastRecoveryRun)
		out.Jobs, out.SilentLanes = api.NewBoardJobs(rep.Jobs), rep.SilentLanes
		_ = enc.Encode(out)
		return 0
	}
	printStatus(stdout, rep, *jobs)
	return 0
}

func readStatus(ctx context.Context, st *store.Store, jobs int) (statusReport, error) {
	var rep statusReport
	var err error
	if rep.Overview, err = st.Overview(ctx); err != nil {
		return rep, err
	}
	if rep.Lanes, err = st.LiveLanes(ctx); err != nil {
		return rep, err
	}
	if rep.SilentLanes, err = silentLanes(ctx, st, rep.Lanes); err != nil {
		return rep, err
	}
	if rep.LastRecoveryRun, err = st.LastRecoveryRun(ctx); err != nil {
		return rep, err
	}
	rep.Jobs = []store.BoardRow{}
	if jobs != 0 {
		rep.Jobs, err = st.Board(ctx, jobs)
	}
	return rep, err
}

// shortReason is the longest stop reason the lanes table shows in its
// STATE column ("shutdown"); a longer one is a line of its own below it.
const shortReason = 24

// longStopped is how long ago a lane must have stopped for the text table
// to leave it out.
const longStopped = 7 * 24 * time.Hour

func printStatus(w io.Writer, rep statusReport, jobs int) {
	fmt.Fprintln(w, "JOBS (SELECT * FROM job_overview)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  STATUS\tJOBS\tOLDEST\tNEXT SAFE ACTION")
	for _, o := range rep.Overview {
		oldest := orDash(o.OldestAge)
		if o.OldestJobID != nil {
			oldest += fmt.Sprintf(" (job %d)", *o.OldestJobID)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", o.Status, o.Jobs, oldest, o.NextAction)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nLANES (alive: not stopped and a fresh heartbeat)")
	if len(rep.Lanes) == 0 {
		fmt.Fprintln(w, "  none has ever registered: nothing runs until 'inkwell serve' starts")
	} else {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  LANE\tSTATE\tHEARTBEAT\tRUNNING\tPROCESS\tSTARTED")
		var paused, whyStopped []string
		oldStops := 0
		for _, l := range rep.Lanes {
			if l.StoppedAt != nil && time.Since(*l.StoppedAt) > longStopped && l.RunningJobs == 0 {
				oldStops++ // history, not state: a lane retired long ago would crowd the table forever
				continue
			}
			state := l.State
			// A reason may be an error's text: on one line, its tabs and
			// newlines neither split the table nor start a line of their own.
			switch reason := strings.Join(strings.Fields(l.StopReason), " "); {
			case reason == "":
			case len(reason) <= shortReason:
				state += " (" + reason + ")"
			default: // a recovery's evidence, an error: too long for a column
				state += " (below)"
				whyStopped = append(whyStopped, fmt.Sprintf("  lane %s stopped at %s: %s", l.Lane, fmtTime(l.StoppedAt), reason))
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s ago\t%d of %d slots\tpid %d on %s\t%s\n", l.Lane, state, l.HeartbeatAge, l.RunningJobs, max(l.Slots, 1),
				l.PID, l.Host, fmtTime(&l.StartedAt))
			if l.PausedUntil != nil {
				paused = append(paused, fmt.Sprintf("  lane %s is paused by the provider's 429 until %s: its calls wait; nothing to do", l.Lane, fmtTime(l.PausedUntil)))
			}
		}
		tw.Flush()
		if oldStops > 0 {
			fmt.Fprintf(w, "  (and %d lane(s) stopped more than %d days ago, not shown: --json or SELECT * FROM lane_liveness lists every lane)\n", oldStops, int(longStopped.Hours()/24))
		}
		for _, line := range append(whyStopped, paused...) {
			fmt.Fprintln(w, line)
		}
		for _, l := range rep.Lanes {
			if advice, ok := rep.SilentLanes[l.Lane]; ok {
				fmt.Fprintf(w, "  lane %s is silent: %s\n", l.Lane, advice)
			}
		}
	}

	fmt.Fprintln(w, "\nLAST RECOVERY RUN")
	printRecoveryRun(w, rep.LastRecoveryRun)

	if jobs == 0 {
		return
	}
	fmt.Fprintln(w, "\nNOT DONE (SELECT * FROM job_board)")
	if len(rep.Jobs) == 0 {
		fmt.Fprintln(w, "  none")
		return
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tSTATUS\tLANE\tATTEMPT\tFOR\tCLASS\tERROR\tNEXT SAFE ACTION")
	for _, j := range rep.Jobs {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", j.ID, j.Status, orDash(j.Lane), j.Attempt, orDash(j.Age), orDash(j.ErrorClass),
			orDash(j.Error), j.NextAction)
	}
	tw.Flush()
	if jobs > 0 && len(rep.Jobs) == jobs {
		fmt.Fprintf(w, "  (first %d; --jobs -1 lists all)\n", jobs)
	}
}

func printRecoveryRun(w io.Writer, run *store.RecoveryRun) {
	if run == nil {
		fmt.Fprintln(w, "  none yet")
		return
	}
	fmt.Fprintf(w, "  run %d on lane %s at %s: closed %d attempt(s), back-filled %d, failed %d job(s)\n",
		run.ID, run.Lane, fmtTime(&run.StartedAt), run.AttemptsClosed, run.AttemptsBackfilled, run.JobsFailed)
	var ev store.Evidence
	if json.Unmarshal([]byte(run.Evidence), &ev) == nil && ev.Proof != "" {
		fmt.Fprintf(w, "  evidence (%s): %s\n", run.LockMethod, ev.Proof)
		if p := ev.LaneRow; p != nil {
			fmt.Fprintf(w, "  previous holder: pid %d on %s, last heartbeat %s\n", p.PID, p.Host, fmtTime(&p.HeartbeatAt))
		}
	}
	if run.Anomalies != "" {
		fmt.Fprintf(w, "  left unchanged (invariant breaks, need a person): %s\n", run.Anomalies)
	}
}

// silentLanes checks the process of each silent lane, from this host.
func silentLanes(ctx context.Context, st *store.Store, lanes []store.LaneState) (map[string]string, error) {
	silent := map[string]bool{}
	for _, l := range lanes {
		if l.State == "silent" {
			silent[l.Lane] = true
		}
	}
	if len(silent) == 0 {
		return nil, nil
	}
	rows, err := st.Lanes(ctx)
	if err != nil {
		return nil, err
	}
	advice := map[string]string{}
	for _, r := range rows {
		if silent[r.Name] {
			advice[r.Name] = r.SilentLaneAdvice()
		}
	}
	return advice, nil
}
