package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/inkwell/inkwell/internal/store"
)

func init() {
	register("retry", "move failed jobs back to queued (their attempts stay as they are)", runRetry)
}

const retryHelp = `
Retry moves each named job from failed to queued. Its attempts are not
touched: the next claim opens a new attempt, so the history of what
happened stays. A job that is not failed is refused and left alone.
A running server picks the job up within its --poll interval.

The provider call of the new attempt carries the same job-scoped key as
before, so a provider that already billed the job answers from its record.`

func runRetry(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("retry", "ID... [--db PATH]", retryHelp, stdout, stderr)
	db := dbFlag(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "inkwell retry: give at least one job ID")
		return 2
	}
	ids := make([]int64, fs.NArg())
	for i, a := range fs.Args() {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id < 1 {
			fmt.Fprintf(stderr, "inkwell retry: job ID %q must be a positive whole number\n", a)
			return 2
		}
		ids[i] = id
	}
	if err := crashpoint.ArmFromEnv(); err != nil {
		return fail(stderr, "retry", err)
	}
	st, err := openExisting(ctx, *db)
	if err != nil {
		return fail(stderr, "retry", err)
	}
	defer st.Close()
	code := 0
	for _, id := range ids {
		if _, err := st.RetryIfFailed(ctx, id, store.ActorCLI); err != nil {
			fail(stderr, "retry", err)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "job %d: failed -> queued\n", id)
	}
	return code
}
