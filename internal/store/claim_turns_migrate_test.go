package store_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestMigrate_ClaimTurnsForQueuedJobs: a database at schema version 12
// (claims walked across accounts) holding queued jobs of two accounts is
// migrated by 0013: each queued job gets its place in its account's
// queue, by id, so the first claims after the upgrade go round robin:
// each account's oldest, then each account's next.
func TestMigrate_ClaimTurnsForQueuedJobs(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		dsn, old := openAtVersion(t, b, 12)
		const at = `'2026-11-30T00:00:00.000000Z'`
		jobs := []struct {
			id      int64
			account string
			status  string
		}{{1, "flood", "queued"}, {2, "flood", "queued"}, {3, "flood", "done"}, {4, "flood", "queued"}, {5, "one", "queued"}, {6, "flood", "queued"}}
		for _, j := range jobs {
			finished := map[bool]string{true: "NULL", false: at}[j.status == "queued"]
			mustExecAll(t, old.DB(), fmt.Sprintf(`INSERT INTO jobs (id, account, idempotency_key, request_hash, payload, status, created_at, finished_at)
				VALUES (%d, '%s', 'key-%d', 'h', '{"prompt":"p","account":"%s"}', '%s', %s, %s)`, j.id, j.account, j.id, j.account, j.status, at, finished))
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
		st := storetest.MustOpen(t, dsn, store.Options{}) // applies 0013
		l := mustLockLane(t, st, "local")
		var got []int64
		for range 5 {
			for _, c := range mustClaimUpTo(t, st, l, 1) {
				got = append(got, c.Job.ID)
			}
		}
		// flood's 1, 2, 4, 6 are its turns 0-3; one's 5 is its turn 0.
		if diff := cmp.Diff([]int64{1, 5, 2, 4, 6}, got); diff != "" {
			t.Errorf("claims of one after 0013 (-want +got):\n%s", diff)
		}
	})
}
