package store_test

import (
	"strings"
	"testing"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_GroupPlansFindRowsByKey: the group pool (PostgreSQL) keeps the
// generic plan it makes at a statement's first run, usually on nearly
// empty tables, for as long as the connection lives. Made there, the
// completion found its attempts with a bitmap scan of every running
// attempt's index entries, each job with a scan of jobs_running_since
// (entries of finished jobs included, until a vacuum) and the accounts to
// lock with a scan of jobs_reservation_open (every open reservation):
// each group read more the longer the lane ran and the larger the queue.
// Written so that a table's size cannot change them, the plans look rows
// up by primary key, and no group statement scans a whole table or a
// whole partial index of jobs or attempts.
func TestStore_GroupPlansFindRowsByKey(t *testing.T) {
	t.Parallel()
	s := storetest.MustOpen(t, storetest.PostgresDSN(t), store.Options{})
	for name, want := range map[string][]string{
		"completion": {"Index Scan using job_attempts_pkey on job_attempts", "Index Scan using jobs_pkey on jobs"},
		"accept":     {"Conflict Arbiter Indexes: jobs_account_idempotency_key_key"},
	} {
		t.Run(name, func(t *testing.T) {
			plan, err := store.GroupPlan(t.Context(), s, name)
			if err != nil {
				t.Fatalf("plan of the %s: %v", name, err)
			}
			for _, w := range want {
				if !strings.Contains(plan, w) {
					t.Errorf("the %s's plan has no %q:\n%s", name, w, plan)
				}
			}
			for _, line := range strings.Split(plan, "\n") {
				for _, bad := range []string{"Seq Scan on jobs", "Seq Scan on job_attempts", "Bitmap", "jobs_running_since", "job_attempts_running_lane", "jobs_reservation_open"} {
					if strings.Contains(line, bad) {
						t.Errorf("the %s's plan reads %q: %s\n%s", name, bad, strings.TrimSpace(line), plan)
					}
				}
			}
			t.Logf("%s's plan:\n%s", name, plan)
		})
	}
}

// TestStore_AcceptGroupReadsEachAccountsTurnOnce: a group of 40 new jobs
// of one account reads the account's last turn once, before it writes:
// read per member as the rows went in, each probe stepped over the rows
// the statement had already written (n²/2 heap fetches for n members).
func TestStore_AcceptGroupReadsEachAccountsTurnOnce(t *testing.T) {
	t.Parallel()
	s := storetest.MustOpen(t, storetest.PostgresDSN(t), store.Options{})
	storetest.MustQueue(t, s, "flood", "before", 100)
	run, err := store.AcceptGroupRun(t.Context(), s, "flood", 40)
	if err != nil {
		t.Fatalf("run the accept group: %v", err)
	}
	if !strings.Contains(run, "Tuples Inserted: 40") {
		t.Fatalf("the group inserted other than 40 jobs:\n%s", run)
	}
	lines := strings.Split(run, "\n")
	probes := 0
	for i, line := range lines {
		if !strings.Contains(line, "jobs_account_turn") {
			continue
		}
		probes++
		if !strings.Contains(line, "loops=1)") {
			t.Errorf("the account's turn was read more than once: %s\n%s", strings.TrimSpace(line), run)
		}
		for _, next := range lines[i+1 : min(i+4, len(lines))] {
			if f := strings.TrimSpace(next); strings.HasPrefix(f, "Heap Fetches: ") && f != "Heap Fetches: 0" && f != "Heap Fetches: 1" {
				t.Errorf("the read of the account's turn fetched rows it had written itself: %s\n%s", f, run)
			}
		}
	}
	if probes != 1 {
		t.Errorf("the group read jobs_account_turn %d times in its plan, want once:\n%s", probes, run)
	}
	t.Logf("the accept group's run:\n%s", run)
}

// TestStore_KeptPlansFindRowsByKey: a statement that names its rows by id
// keeps, on PostgreSQL, a plan that looks them up by primary key, however
// empty the tables were when the plan was made. On the shared pool
// PostgreSQL keeps a generic plan after a statement's first few runs; in
// outcome groups it keeps one from the first (openGroupPool). Written
// with a bare guard ("status = 'running'", "reservation_state = 'open'",
// "delivered_at IS NULL AND gave_up_at IS NULL") or as "id = ANY(…)"
// beside it, such a plan read a whole partial index (every running job,
// every open reservation, every pending webhook delivery, every finished
// job not yet pruned) or all of a table, for each row it wrote: 131 ms
// for one cancel's account lock at 100,000 jobs, 47 ms every second for
// the wait on jobs' ends.
func TestStore_KeptPlansFindRowsByKey(t *testing.T) {
	t.Parallel()
	s := storetest.MustOpen(t, storetest.PostgresDSN(t), store.Options{})
	want := map[string]string{
		"doneJob":          "jobs_pkey",
		"failJob":          "jobs_pkey",
		"rescheduleJob":    "jobs_pkey",
		"closeReservation": "jobs_pkey",
		"lockBudgets":      "jobs_pkey",
		"endedAmong":       "jobs_pkey",
		"claimWebhooks":    "webhook_deliveries_pkey",
		"webhookFailed":    "webhook_deliveries_pkey",
		"prunedUpdate":     "jobs_pkey",
	}
	for name := range store.KeptStatements(s) {
		t.Run(name, func(t *testing.T) {
			plan, err := store.KeptPlan(t.Context(), s, name)
			if err != nil {
				t.Fatalf("plan of %s: %v", name, err)
			}
			if w, ok := want[name]; !ok || !strings.Contains(plan, w) {
				t.Errorf("%s's kept plan does not use %q:\n%s", name, w, plan)
			}
			for _, line := range strings.Split(plan, "\n") {
				for _, bad := range []string{"Seq Scan on jobs", "Seq Scan on webhook_deliveries", "Bitmap Heap Scan on jobs",
					"jobs_running_since", "jobs_reservation_open", "jobs_unpruned", "webhook_deliveries_due", "jobs_queued_turn"} {
					if strings.Contains(line, bad) && !(name == "claimWebhooks" && strings.Contains(line, "webhook_deliveries_due")) {
						t.Errorf("%s's kept plan reads %q: %s\n%s", name, bad, strings.TrimSpace(line), plan)
					}
				}
			}
		})
	}
}

// TestStore_GroupPoolSettings: the group pool's connections run with
// sequential and bitmap scans off, and with JIT off. With a disabled scan
// left in a plan (a table with no other path costs 10^10 more), a
// connection with JIT on would compile every run of the statement: the
// accept group took 170–480 ms a run that way in psql, against 0.4 ms.
func TestStore_GroupPoolSettings(t *testing.T) {
	t.Parallel()
	s := storetest.MustOpen(t, storetest.PostgresDSN(t), store.Options{})
	for name, want := range map[string]string{
		"jit": "off", "enable_seqscan": "off", "enable_bitmapscan": "off", "plan_cache_mode": "force_generic_plan",
	} {
		got, err := store.GroupSetting(t.Context(), s, name)
		if err != nil {
			t.Fatalf("SHOW %s: %v", name, err)
		}
		if got != want {
			t.Errorf("the group pool's %s = %q, want %q", name, got, want)
		}
	}
}
