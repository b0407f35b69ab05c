package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/inkwell/inkwell/internal/store"
)

func init() {
	register("audit", "print audit_log: who retried, cancelled or pruned which job", runAudit)
}

const auditHelp = `
Audit prints audit_log, newest first: every retry, cancel and prune of a
job, who asked for it and when. Each row was written in the same
transaction as the action itself. Who:

  token <id>   an HTTP request with that API token (a dashboard session
               names the token it signed in with)
  cli          a local command with access to the database (inkwell
               retry, cancel, prune)
  api          an HTTP request without a token, while tokens were not in
               force (no token existed yet, or --auth off; loopback only)
  retention    serve's own retention loop (serve --retention)

It reads the database directly, whether or not a server is running.`

func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("audit", "[--job ID] [--limit N] [--json] [--db PATH]", auditHelp, stdout, stderr)
	db := dbFlag(fs)
	job := fs.Int64("job", 0, "only this job's rows")
	limit := fs.Int("limit", 50, "at most this many rows, newest first (0: all)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	switch {
	case fs.NArg() != 0:
		fmt.Fprintf(stderr, "inkwell audit: unexpected argument %q (a job is --job ID)\n", fs.Arg(0))
		return 2
	case *job < 0:
		fmt.Fprintf(stderr, "inkwell audit: --job %d must be a positive job id\n", *job)
		return 2
	case *limit < 0:
		fmt.Fprintf(stderr, "inkwell audit: --limit %d must be 0 (all) or more\n", *limit)
		return 2
	}
	st, err := openForReading(ctx, *db)
	if err != nil {
		return fail(stderr, "audit", err)
	}
	defer st.Close()
	rows, err := st.AuditLog(ctx, *job, *limit)
	if err = readAsOpened(st, err); err != nil {
		return fail(stderr, "audit", err)
	}
	if *asJSON {
		if rows == nil {
			rows = []store.AuditEntry{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rows)
		return 0
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "no audit rows")
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAT\tACTOR\tACTION\tJOB\tDETAIL")
	for _, e := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\n", e.ID, e.At.UTC().Format(time.RFC3339), e.Actor, e.Action, e.JobID, e.Detail)
	}
	_ = tw.Flush()
	return 0
}
