package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestCLI_AccountsSetAndRelease: `inkwell accounts set` changes a budget
// and rpm; `inkwell accounts release` closes a failed job's kept
// reservation, and nothing else. Bad input exits 2, an unknown account or
// a job that may still spend exits 1, and neither writes anything.
func TestCLI_AccountsSetAndRelease(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		st := storetest.MustOpen(t, b.DSN, store.Options{})
		if code, out, errOut := runCLI(t, "accounts", "add", "acme", "--budget", "1", "--db", b.DSN); code != 0 {
			t.Fatalf("accounts add = %d\n%s%s", code, out, errOut)
		}
		code, out, errOut := runCLI(t, "accounts", "set", "acme", "--budget", "2.50", "--rpm", "30", "--db", b.DSN)
		if code != 0 || !strings.Contains(out, "account acme: budget 2.50") || !strings.Contains(out, "rpm 30") {
			t.Fatalf("accounts set = %d\n%s%s", code, out, errOut)
		}
		if a, err := st.Account(t.Context(), "acme"); err != nil || a.BudgetMicros == nil || *a.BudgetMicros != 2_500_000 || a.RPM != 30 {
			t.Fatalf("stored %+v, %v", a, err)
		}

		// Job 1 reserves, is claimed and times out: it may have been
		// billed, so it keeps its reservation. Job 2 is queued.
		for _, key := range []string{"k1", "k2"} {
			payload, _ := json.Marshal(inkwell.Request{Prompt: "p " + key, Account: "acme", MaxWords: 10})
			if _, _, err := st.Accept(t.Context(), store.AcceptParams{IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload),
				Payload: payload, Account: "acme", ReserveMicros: 20_000}); err != nil {
				t.Fatal(err)
			}
		}
		c := storetest.ClaimAs(t, st, "lane-a")
		if err := st.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "timed out", Class: inkwell.ClassTimeout}); err != nil {
			t.Fatal(err)
		}

		before := authRows(t, st)
		jobsBefore := jobRows(t, st)
		for _, args := range [][]string{
			{"set"}, {"set", "acme"}, {"set", "bad name", "--rpm", "1"}, {"set", "acme", "--budget", "-1"}, {"set", "acme", "--budget", "lots"},
			{"set", "acme", "--rpm", "-1"}, {"set", "acme", "--rpm", "x"}, {"release"}, {"release", "0"}, {"release", "abc"},
		} {
			all := append(append([]string{"accounts"}, args...), "--db", b.DSN)
			if code, out, errOut := runCLI(t, all...); code != 2 || errOut == "" {
				t.Errorf("inkwell %q = %d, want 2 with a reason on stderr\n%s%s", all, code, out, errOut)
			}
		}
		if code, _, errOut := runCLI(t, "accounts", "set", "nobody", "--rpm", "1", "--db", b.DSN); code != 1 || !strings.Contains(errOut, `no account "nobody"`) {
			t.Errorf("set an unknown account = %d %s, want 1", code, errOut)
		}
		if code, _, errOut := runCLI(t, "accounts", "release", "2", "--db", b.DSN); code != 1 || !strings.Contains(errOut, "only a failed job") {
			t.Errorf("release a queued job = %d %s, want 1", code, errOut)
		}
		if diff := cmp.Diff(before, authRows(t, st)); diff != "" {
			t.Errorf("refused input changed accounts (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(jobsBefore, jobRows(t, st)); diff != "" {
			t.Errorf("refused input changed jobs (-before +after):\n%s", diff)
		}

		if code, out, _ := runCLI(t, "show", "1", "--db", b.DSN); code != 0 || !strings.Contains(out, "open on account acme (kept: the provider may have billed") {
			t.Errorf("show 1 before the release = %d\n%s", code, out)
		}
		code, out, errOut = runCLI(t, "accounts", "release", "1", "--db", b.DSN)
		if code != 0 || !strings.Contains(out, "job 1: released 0.02 reserved on account acme") {
			t.Fatalf("accounts release = %d\n%s%s", code, out, errOut)
		}
		if a, _ := st.Account(t.Context(), "acme"); a.ReservedMicros != 20_000 {
			t.Errorf("reserved %d after the release, want 20000 (job 2's)", a.ReservedMicros)
		}
		if code, out, _ := runCLI(t, "show", "1", "--db", b.DSN); code != 0 || !strings.Contains(out, "released on account acme\n") {
			t.Errorf("show 1 after the release = %d\n%s", code, out)
		}
		if code, out, _ := runCLI(t, "accounts", "release", "1", "--db", b.DSN); code != 0 || !strings.Contains(out, "was released already") {
			t.Errorf("release again = %d %s", code, out)
		}
		code, out, _ = runCLI(t, "accounts", "set", "acme", "--budget", "none", "--db", b.DSN)
		if code != 0 || !strings.Contains(out, "budget none") || !strings.Contains(out, "reserved 0.02") {
			t.Errorf("remove the budget = %d %s", code, out)
		}
	})
}

// jobRows is every row of jobs, as text.
func jobRows(t *testing.T, st *store.Store) []string {
	t.Helper()
	rows, err := st.DB().QueryContext(t.Context(), `SELECT id, status, reservation_micros, reservation_account, reservation_state FROM jobs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, micros int64
		var status string
		var account, state sql.NullString
		if err := rows.Scan(&id, &status, &micros, &account, &state); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join([]string{status, fmt.Sprint(micros), account.String, state.String}, " "))
	}
	return out
}
