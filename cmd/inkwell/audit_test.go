package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestCLI_Audit: a cancel from the command line is written to audit_log
// as "cli", and `inkwell audit` prints it (as a table and as JSON, all
// rows or one job's); bad input exits 2.
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
		for _, args := range [][]string{{"--job", "-1"}, {"--limit", "-2"}, {"7"}, {"--no-such-flag"}} {
			if code, stdout, stderr := runCLI(t, append([]string{"audit", "--db", b.DSN}, args...)...); code != 2 || stdout != "" || stderr == "" {
				t.Errorf("audit %q: exit %d, stdout %q, stderr %q; want 2 and why", args, code, stdout, stderr)
			}
		}
	})
}
