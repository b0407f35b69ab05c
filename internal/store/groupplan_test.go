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
// attempt's index entries and each job with a scan of jobs_running_since,
// entries of finished jobs included until a vacuum: each group read more
// the longer the lane ran (one lane drained 5,000 queued jobs at about
// 3,200 jobs/s, 40,000 at 3,000; with the plans checked here, 3,300-3,900
// for either). Written so that a table's size cannot change them, the
// plans look rows up by primary key, and no group statement scans a
// whole table or a whole partial index of jobs or attempts.
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
				for _, bad := range []string{"Seq Scan on jobs", "Seq Scan on job_attempts", "Bitmap", "jobs_running_since", "job_attempts_running_lane"} {
					if strings.Contains(line, bad) {
						t.Errorf("the %s's plan reads %q: %s\n%s", name, bad, strings.TrimSpace(line), plan)
					}
				}
			}
			t.Logf("%s's plan:\n%s", name, plan)
		})
	}
}
