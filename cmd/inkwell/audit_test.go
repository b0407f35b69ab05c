package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestCLI_Audit: a cancel, a retry and a prune from the command line are
// written to audit_log as "cli", and `inkwell audit` prints them (as a
// table and as JSON, all rows or one job's); bad input exits 2.
func TestCLI_Audit(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		st := storetest.MustOpen(t, b.DSN, store.Options{})
		one, two := cancelJob(t, st, "one"), cancelJob(t, st, "two")
		for _, j := range []inkwell.Job{one, two} {
			if code, _, stderr := runCLI(t, "cancel", "--db", b.DSN, strconv.FormatInt(j.ID, 10)); code != 0 {
				t.Fatalf("cancel %d: exit %d: %s", j.ID, code, stderr)
			}
		}

		code, stdout, stderr := runCLI(t, "audit", "--db", b.DSN)
		if code != 0 || !strings.Contains(stdout, "ACTOR") || strings.Count(stdout, "cli") != 2 || strings.Count(stdout, "cancel") != 2 {
			t.Errorf("audit: exit %d, stdout %q, stderr %q; want two cli cancel rows", code, stdout, stderr)
		}
		code, stdout, _ = runCLI(t, "audit", "--db", b.DSN, "--job", strconv.FormatInt(one.ID, 10), "--json")
		var rows []store.AuditEntry
		if err := json.Unmarshal([]byte(stdout), &rows); code != 0 || err != nil || len(rows) != 1 ||
			rows[0].JobID != one.ID || rows[0].Actor != store.ActorCLI || rows[0].Action != store.AuditCancel || rows[0].Detail != "was queued" {
			t.Errorf("audit --job %d --json: exit %d, %+v (%v); want its one cli cancel", one.ID, code, rows, err)
		}
		code, stdout, _ = runCLI(t, "audit", "--db", b.DSN, "--limit", "1")
		if code != 0 || !strings.Contains(stdout, fmt.Sprintf("cancel  %d", two.ID)) || strings.Count(stdout, "cancel") != 1 {
			t.Errorf("audit --limit 1: exit %d, %q; want the newest row only (job %d)", code, stdout, two.ID)
		}

		// retry and prune through the command line are written as cli too:
		// job one (cancelled, so failed) back to queued, then prune takes
		// job two (finished) and leaves the queued one alone.
		if code, _, stderr := runCLI(t, "retry", "--db", b.DSN, strconv.FormatInt(one.ID, 10)); code != 0 {
			t.Fatalf("retry %d: exit %d: %s", one.ID, code, stderr)
		}
		if code, _, stderr := runCLI(t, "prune", "--db", b.DSN, "--older-than", "0s"); code != 0 {
			t.Fatalf("prune: exit %d: %s", code, stderr)
		}
		code, stdout, _ = runCLI(t, "audit", "--db", b.DSN, "--json")
		rows = nil
		if err := json.Unmarshal([]byte(stdout), &rows); code != 0 || err != nil {
			t.Fatalf("audit --json: exit %d, %v\n%s", code, err, stdout)
		}
		var got []string
		for _, e := range rows {
			got = append(got, fmt.Sprintf("%s %s %d", e.Actor, e.Action, e.JobID))
		}
		want := []string{ // newest first
			fmt.Sprintf("%s %s %d", store.ActorCLI, store.AuditPrune, two.ID),
			fmt.Sprintf("%s %s %d", store.ActorCLI, store.AuditRetry, one.ID),
			fmt.Sprintf("%s %s %d", store.ActorCLI, store.AuditCancel, two.ID),
			fmt.Sprintf("%s %s %d", store.ActorCLI, store.AuditCancel, one.ID),
		}
		if !slices.Equal(got, want) {
			t.Errorf("audit --json after cli cancel, retry and prune: %q; want %q", got, want)
		}
		code, stdout, _ = runCLI(t, "audit", "--db", b.DSN)
		got = nil
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n")[1:] { // ID AT ACTOR ACTION JOB DETAIL
			if f := strings.Fields(line); len(f) >= 5 {
				got = append(got, strings.Join(f[2:5], " "))
			}
		}
		if code != 0 || !slices.Equal(got, want) {
			t.Errorf("audit: exit %d, rows %q; want %q\n%s", code, got, want, stdout)
		}

		for _, args := range [][]string{{"--job", "-1"}, {"--limit", "-2"}, {"7"}, {"--no-such-flag"}} {
			if code, stdout, stderr := runCLI(t, append([]string{"audit", "--db", b.DSN}, args...)...); code != 2 || stdout != "" || stderr == "" {
				t.Errorf("audit %q: exit %d, stdout %q, stderr %q; want 2 and why", args, code, stdout, stderr)
			}
		}
	})
}
