package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/inkwell/inkwell"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/inkwell/inkwell/internal/store"
)

func init() {
	register("prune", "remove the prompt and text of jobs finished long ago (their key, attempts and charge stay)", runPrune)
}

const pruneHelp = `
Prune is retention run by hand ('serve --retention' runs it hourly): every
job that finished (done or failed) longer ago than --older-than loses its
prompt and its generated text, and is marked pruned (pruned_at). Its status
does not change, and everything else stays: the job row, its idempotency
key and request hash, its attempts, its charge, and the request's other
fields (account, max_words). A re-send of a pruned job's key is answered 200
with the pruned job and never runs it again; a pruned failed job cannot be
retried (its prompt is gone: submit it anew under a new key). Jobs already
pruned are skipped, so running prune again is harmless.

Prune also deletes the uploads (POST /v1/files) whose expires_after has
passed, whatever --older-than says: their content goes, and their row is
kept, marked deleted, for the batches made of them (which keep their
lines). The API has answered such a file 404 since its expiry.

Prune works in small transactions at low priority, resting between them,
so a running server's accepts and completions do not wait long behind it;
a stop (Ctrl-C) keeps what was pruned and leaves the rest for next time.

SQLite: a file Inkwell created has incremental auto-vacuum, and prune gives
the pages it frees back to the file system: the file shrinks. A file
created by an older Inkwell keeps the freed pages, which new jobs reuse (it
stops growing), but it shrinks only after --vacuum, which rebuilds the
whole file with VACUUM and turns auto-vacuum on for good. VACUUM holds the
write lock until it is done (seconds per GB) and needs free disk space
about the file's size: stop serve first, or its writes wait and may fail.

Examples:
  inkwell prune --older-than 30d --dry-run    count what would go
  inkwell prune --older-than 720h             prune jobs finished over 30 days ago
  inkwell prune --vacuum                      rebuild an old SQLite file once`

func runPrune(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("prune", "--older-than DURATION [--dry-run] [--vacuum] [--db PATH]", pruneHelp, stdout, stderr)
	db := dbFlag(fs)
	olderThan := fs.String("older-than", "", "prune jobs finished longer ago than this: a duration (720h, 90m) or whole days (30d); 0s takes every finished job")
	dryRun := fs.Bool("dry-run", false, "count the jobs that would be pruned, by status, and write nothing")
	vacuum := fs.Bool("vacuum", false, "SQLite: then rebuild the file with VACUUM so it shrinks and gets incremental auto-vacuum (holds the write lock throughout: refused while a lane is alive, stop serve first)")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "inkwell prune: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() > 0 {
		return usage("unexpected argument %q: prune takes flags only (--older-than DURATION)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["older-than"] && !*vacuum {
		return usage("say how old a finished job must be: --older-than DURATION (e.g. 720h or 30d); see inkwell prune --help")
	}
	var age time.Duration
	if set["older-than"] {
		if strings.TrimSpace(*olderThan) == "0" {
			// serve --retention 0 keeps everything; here 0 would take
			// every finished job's prompt and text. One keystroke should
			// not mean the opposite of what it means to serve.
			return usage("--older-than 0 is ambiguous: serve --retention 0 keeps every job, and here it would prune every finished one; to prune every finished job say --older-than 0s, to prune none do not run prune")
		}
		var err error
		if age, err = parseAge(*olderThan); err != nil {
			return usage("--older-than: %v", err)
		}
	}
	if *dryRun && *vacuum {
		return usage("--vacuum rewrites the file; it cannot be part of a --dry-run")
	}
	st, err := openExisting(ctx, *db)
	if err != nil {
		return fail(stderr, "prune", err)
	}
	defer st.Close()
	if *vacuum && st.Path() == "" {
		// Refused before anything is pruned: the command as given cannot
		// be done, so none of it is.
		return usage("--vacuum is for a SQLite file; on PostgreSQL autovacuum makes the space prune frees reusable (run prune without --vacuum)")
	}
	if *vacuum {
		if code := refuseVacuumBesideALiveLane(ctx, st, stderr); code != 0 {
			return code // before anything is pruned, as above
		}
	}
	if set["older-than"] {
		if code := pruneOlderThan(ctx, st, age, *dryRun, stdout, stderr, *vacuum); code != 0 {
			return code
		}
	}
	if *vacuum {
		return vacuumFile(ctx, st, stdout, stderr)
	}
	return 0
}

// parseAge reads --older-than: a Go duration, or whole days ("30d").
func parseAge(v string) (time.Duration, error) {
	d, err := parseDurationOrDays(v)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative: say how long ago a job must have finished (0s: every finished job)", v)
	}
	return d, nil
}

// parseDurationOrDays reads a Go duration ("720h", "90m") or whole days
// ("30d"): the two ways an age is written to prune --older-than and serve
// --retention alike.
func parseDurationOrDays(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, errors.New("empty; give a duration such as 720h or 30d")
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n > 100000 || n < -100000 {
			return 0, fmt.Errorf("%q: days must be a whole number, such as 30d", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (say 720h, 90m or 30d)", v)
	}
	return d, nil
}

// ageFlag is a duration flag that takes whole days too (parseDurationOrDays).
func ageFlag(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	d := def
	fs.Var((*ageValue)(&d), name, usage)
	return &d
}

type ageValue time.Duration

func (a *ageValue) String() string {
	if a == nil {
		return "0s"
	}
	return time.Duration(*a).String()
}

func (a *ageValue) Set(v string) error {
	d, err := parseDurationOrDays(v)
	if err != nil {
		return err
	}
	*a = ageValue(d)
	return nil
}

func pruneOlderThan(ctx context.Context, st *store.Store, age time.Duration, dryRun bool, stdout, stderr io.Writer, vacuumNext bool) int {
	opts := store.PruneOptions{DryRun: dryRun, By: store.ActorCLI, Progress: func(p store.PruneProgress) {
		pct := 100.0
		if p.Matched > 0 {
			pct = 100 * float64(p.Pruned) / float64(p.Matched)
		}
		fmt.Fprintf(stdout, "  %d of %s pruned (%.0f%%), %s\n", p.Pruned, counted(p.Matched, "job"), pct, p.Elapsed.Round(time.Millisecond))
	}}
	rep, err := st.PruneOlderThan(ctx, age, opts)
	when := inkwell.FormatTime(rep.Before)
	if dryRun {
		if err != nil {
			return fail(stderr, "prune", err)
		}
		fmt.Fprintf(stdout, "dry run: %s finished before %s (older than %s) would be pruned (%d done, %d failed); nothing was written\n",
			counted(rep.Matched, "job"), when, age, rep.MatchedDone, rep.MatchedFailed)
		heldByBatch(stdout, rep)
		if rep.Expired.Files > 0 {
			fmt.Fprintf(stdout, "dry run: %s whose expiry has passed (%s) would be deleted\n", counted(int64(rep.Expired.Files), "upload"), mb(rep.Expired.Bytes))
		}
		return 0
	}
	if err != nil && rep.Pruned == 0 && rep.Matched == 0 && rep.Expired.Files == 0 {
		return fail(stderr, "prune", err)
	}
	fmt.Fprintf(stdout, "pruned %s finished before %s (older than %s): %d done, %d failed, in %s, %s; the longest batch held the writer %s (%d over 50ms)\n",
		counted(rep.Pruned, "job"), when, age, rep.PrunedDone, rep.PrunedFailed, counted(rep.Batches, "batch"), rep.Elapsed.Round(time.Millisecond), rep.LongestBatch.Round(100*time.Microsecond), rep.SlowBatches)
	heldByBatch(stdout, rep)
	if rep.Expired.Files > 0 {
		fmt.Fprintf(stdout, "deleted %s whose expiry had passed (%s)\n", counted(int64(rep.Expired.Files), "upload"), mb(rep.Expired.Bytes))
	}
	if st.Path() != "" && (rep.Pruned > 0 || rep.Expired.Files > 0) {
		fmt.Fprintf(stdout, "file %s: %s before, %s after", st.Path(), mb(rep.FileBefore), mb(rep.FileAfter))
		if rep.PagesVacuumed > 0 {
			fmt.Fprintf(stdout, " (incremental vacuum gave back %d pages)", rep.PagesVacuumed)
		}
		fmt.Fprintln(stdout)
		if rep.AutoVacuum != "incremental" && rep.FreePages > 0 && !vacuumNext {
			fmt.Fprintf(stdout, "note: this file was created without incremental auto-vacuum (by an older Inkwell): its %d free pages (%s) stay in it and new jobs reuse them, "+
				"so it stops growing, but it does not shrink until 'inkwell prune --vacuum' rebuilds it (VACUUM holds the write lock throughout: stop serve first)\n",
				rep.FreePages, mb(rep.FreePages*rep.PageSize))
		}
	}
	if err != nil {
		fail(stderr, "prune", fmt.Errorf("stopped after %d of %s (what was pruned stays pruned; run prune again for the rest): %w", rep.Pruned, counted(rep.Matched, "job"), err))
		return 1
	}
	return 0
}

// heldByBatch says how many jobs old enough were kept for their batch.
func heldByBatch(stdout io.Writer, rep store.PruneReport) {
	if rep.HeldByBatch > 0 {
		fmt.Fprintf(stdout, "kept %s finished before then: their batch has a job that had not (its output is still to be read); a later prune takes them once the whole batch is older\n", counted(rep.HeldByBatch, "job"))
	}
}

// refuseVacuumBesideALiveLane refuses --vacuum while a lane of this file
// may be running: VACUUM holds the write lock for the whole rebuild
// (minutes on a large file), and serve's accepts would fail as busy all
// along. A lane that is not stopped counts as running unless it is
// silent and its process is proven gone: a heartbeat can be late (a long
// --heartbeat, a stopped process) while its serve still holds the file.
func refuseVacuumBesideALiveLane(ctx context.Context, st *store.Store, stderr io.Writer) int {
	lanes, err := st.LiveLanes(ctx)
	if err != nil {
		return fail(stderr, "prune", err)
	}
	var rows map[string]store.LaneRow // read only when a lane is silent
	for _, l := range lanes {
		why := ""
		switch {
		case l.Alive:
			why = fmt.Sprintf("lane %s is alive (pid %d on %s, heartbeat %s ago)", l.Lane, l.PID, l.Host, l.HeartbeatAge)
		case l.State != "stopped":
			if rows == nil {
				all, err := st.Lanes(ctx)
				if err != nil {
					return fail(stderr, "prune", err)
				}
				rows = make(map[string]store.LaneRow, len(all))
				for _, r := range all {
					rows[r.Name] = r
				}
			}
			if gone, what := rows[l.Lane].ProcessGone(); !gone {
				why = fmt.Sprintf("lane %s is not stopped (its heartbeat is %s old, and %s)", l.Lane, l.HeartbeatAge, what)
			}
		}
		if why != "" {
			fmt.Fprintf(stderr, "inkwell prune: --vacuum refused: %s, and VACUUM holds the write lock for the whole rebuild, "+
				"so its accepts would fail as busy until it is done; stop serve first (SIGTERM), or if its process is gone, "+
				"'inkwell recover --lane %s' proves it, then run this again. Nothing was pruned or rebuilt.\n", why, l.Lane)
			return 1
		}
	}
	return 0
}

func vacuumFile(ctx context.Context, st *store.Store, stdout, stderr io.Writer) int {
	if st.Path() == "" {
		return fail(stderr, "prune", errors.New("--vacuum is for a SQLite file; on PostgreSQL autovacuum makes the space prune frees reusable"))
	}
	fmt.Fprintf(stdout, "vacuum: rebuilding %s; this holds the write lock until it is done (other writers wait)\n", st.Path())
	vr, err := st.Vacuum(ctx)
	if err != nil {
		return fail(stderr, "prune", fmt.Errorf("vacuum: %w", err))
	}
	fmt.Fprintf(stdout, "vacuum: file %s before, %s after; auto_vacuum %s (was %s)\n", mb(vr.FileBefore), mb(vr.FileAfter), vr.AutoVacuum, vr.AutoVacuumBefore)
	return 0
}

func mb(bytes int64) string { return fmt.Sprintf("%.1f MB", float64(bytes)/1e6) }

// counted writes n and its noun, plural unless n is one: "1 job",
// "2 jobs", "1 batch", "3 batches".
func counted[N int | int64](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	if strings.HasSuffix(noun, "ch") || strings.HasSuffix(noun, "s") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
