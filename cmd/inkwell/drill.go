package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/inkwell/inkwell/internal/drill"
)

func init() {
	register("drill", "crash serve at every named point (or at random), restart it, and check the invariants", runDrill)
}

const drillHelp = `
Drill proves, on real processes, that the database tells the truth
whatever instant serve dies at, and that a re-sent request never creates
money or text twice. It starts a provider simulator and, for each crash
point, 'inkwell serve' on a fresh database with INKWELL_CRASH_AT set; its
client submits a request and re-sends it whenever the connection breaks;
serve kills itself at the point; the drill reads the database, restarts
serve, reads it again after recovery, retries failed jobs, waits for done,
reads it a last time, and checks the invariants of docs/design.md §7.

Each serve runs with --config, a file the drill writes in its work dir:
the simulator as an openai provider that honours keys, serving the
unpriced model drill (the short-form requests), and as an anthropic
provider, which honours none, serving the priced model drill-claude (the
chat-form requests: the one job at every other point, every third job
otherwise). A job on drill-claude may be billed again only for an answer
lost when serve died or gave up; the drill counts those second bills.

Modes: the named points, once each with one job, then each again with 8
provider calls in flight (serve --concurrency 8), the in-flight family
(default; --in-flight runs that family alone); --sweep, each point at its
1st to 5th hit over five jobs; --random, concurrent clients while serve,
running several calls at once, is killed at random instants, from a seed
that replays the schedule.

The exit status is 1 when any invariant broke or a scenario could not
finish, 2 for bad flags. Children are real processes: every one is
killed before the drill returns.`

func runDrill(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("drill", "[flags]", drillHelp, stdout, stderr)
	db := fs.String("db", "", "where scenario databases go: empty for SQLite files in the work dir, a directory for SQLite files there, or a postgres:// URL (one new database per scenario)")
	points := fs.String("points", "", "comma-separated crash points (default: all)")
	sweep := fs.Bool("sweep", false, "run each point at hits 1..5 over five jobs")
	random := fs.Bool("random", false, "kill serve at random instants under concurrent clients")
	inFlight := fs.Bool("in-flight", false, "run only the in-flight family: each point with 8 provider calls in flight")
	runs := fs.Int("runs", 3, "with --random: how many runs, each on a fresh database")
	seed := fs.Int64("seed", 0, "with --random: the seed of the schedule (0 picks one and prints it)")
	report := fs.String("report", "", "also write the report as Markdown to this file")
	short := fs.Bool("short", false, "CI mode: fewer hits, kills and requests, shorter waits")
	keep := fs.Bool("keep", false, "keep the work dir (databases, ledgers, child logs) and print where it is")
	bin := fs.String("inkwell-bin", "", "the inkwell binary the children run (default: this executable)")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up (and fail) after this long in all; every wait inside is bounded too")
	logf := addLogFlags(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	cfg, code := drillConfig(fs.NArg(), *points, *sweep, *random, *bin, stderr)
	if code != 0 {
		return code
	}
	if *inFlight && cfg.Mode != drill.ModePoints {
		fmt.Fprintln(stderr, "inkwell drill: --in-flight runs the points with calls in flight; it does not combine with --sweep or --random")
		return 2
	}
	cfg.InFlight = *inFlight
	if *runs < 1 {
		fmt.Fprintln(stderr, "inkwell drill: --runs must be at least 1")
		return 2
	}
	log, err := logf.logger(stderr)
	if err != nil {
		return fail(stderr, "drill", err)
	}
	cfg.DB, cfg.Runs, cfg.Seed, cfg.Short, cfg.Keep = *db, *runs, *seed, *short, *keep
	cfg.Out, cfg.Logger = stdout, log
	cfg.Command = "inkwell drill " + strings.Join(args, " ")
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, *timeout, fmt.Errorf("--timeout %s reached", *timeout))
		defer cancel()
	}
	rep, err := drill.Run(ctx, cfg)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		fmt.Fprintf(stderr, "inkwell drill: %v: stopped early\n", cause)
	}
	if rep != nil {
		rep.WriteSummary(stdout)
		if *report != "" {
			if werr := writeReport(*report, rep); werr != nil {
				return fail(stderr, "drill", werr)
			}
			fmt.Fprintf(stdout, "report written to %s\n", *report)
		}
	}
	if err != nil {
		return fail(stderr, "drill", err)
	}
	if *keep {
		fmt.Fprintf(stdout, "work dir kept: %s\n", rep.WorkDir)
	}
	if rep.Failed() {
		if !*keep {
			fmt.Fprintln(stdout, "re-run with --keep to inspect the databases, ledgers and child logs")
		}
		return 1
	}
	return 0
}

// drillConfig checks the flags that shape the drill.
func drillConfig(nargs int, points string, sweep, random bool, bin string, stderr io.Writer) (drill.Config, int) {
	var cfg drill.Config
	if nargs > 0 {
		fmt.Fprintln(stderr, "inkwell drill: takes no arguments, only flags")
		return cfg, 2
	}
	switch {
	case sweep && random:
		fmt.Fprintln(stderr, "inkwell drill: --sweep and --random are separate drills; run them one at a time")
		return cfg, 2
	case sweep:
		cfg.Mode = drill.ModeSweep
	case random:
		cfg.Mode = drill.ModeRandom
	default:
		cfg.Mode = drill.ModePoints
	}
	for _, p := range strings.Split(points, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !slices.Contains(crashpoint.Names, p) {
			fmt.Fprintf(stderr, "inkwell drill: unknown crash point %q; known: %s\n", p, strings.Join(crashpoint.Names, ", "))
			return cfg, 2
		}
		cfg.Points = append(cfg.Points, p)
	}
	cfg.Bin = bin
	if cfg.Bin == "" {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "inkwell drill: cannot find this executable (%v); give --inkwell-bin\n", err)
			return cfg, 2
		}
		cfg.Bin = exe
	}
	return cfg, 0
}

// writeReport renders the whole report before touching the file, so a
// failure never leaves half a report behind.
func writeReport(path string, rep *drill.Report) error {
	var buf bytes.Buffer
	if err := rep.WriteMarkdown(&buf); err != nil {
		return fmt.Errorf("render report: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
