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

// TestMigrate_ClaimClock: a database at schema version 14 (the turn the
// claims had reached read from the jobs not queued) is migrated by 0015:
// the clock starts at the highest turn of a job that left the queue by a
// claim, and a job cancelled while queued gives its turn back, so neither
// it nor its account's next job sits behind the cancelled turns.
func TestMigrate_ClaimClock(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		dsn, old := openAtVersion(t, b, 14)
		const at = `'2026-11-30T00:00:00.000000Z'`
		jobs := []struct {
			id            int64
			account       string
			status, class string
			started       bool
			turn          int
		}{
			{1, "a", "done", "", true, 3},                  // served: turn 3
			{2, "a", "failed", "cancelled", true, 4},       // cancelled while running: served
			{3, "flood", "failed", "cancelled", false, 90}, // cancelled while queued
			{4, "b", "queued", "", false, 5},
		}
		for _, j := range jobs {
			finished := map[bool]string{true: "NULL", false: at}[j.status == "queued"]
			started := map[bool]string{true: at, false: "NULL"}[j.started]
			class := map[bool]string{true: "NULL", false: "'" + j.class + "'"}[j.class == ""]
			mustExecAll(t, old.DB(), fmt.Sprintf(`INSERT INTO jobs (id, account, idempotency_key, request_hash, payload, status, error_class, created_at, started_at, finished_at, claim_turn)
				VALUES (%d, '%s', 'key-%d', 'h', '{"prompt":"p","account":"%s"}', '%s', %s, %s, %s, %s, %d)`,
				j.id, j.account, j.id, j.account, j.status, class, at, started, finished, j.turn))
		}
		if b.Name == "postgres" { // the ids above were given, not drawn
			mustExecAll(t, old.DB(), `SELECT setval(pg_get_serial_sequence('jobs', 'id'), 100)`)
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
		st := storetest.MustOpen(t, dsn, store.Options{}) // applies 0015
		var served, cancelled int64
		if err := st.WriteDB().QueryRowContext(t.Context(), `SELECT served FROM claim_clock`).Scan(&served); err != nil {
			t.Fatal(err)
		}
		if err := st.WriteDB().QueryRowContext(t.Context(), `SELECT claim_turn FROM jobs WHERE id = 3`).Scan(&cancelled); err != nil {
			t.Fatal(err)
		}
		if served != 4 || cancelled != 0 {
			t.Errorf("after 0015: clock at %d, job cancelled while queued at turn %d; want 4 and 0", served, cancelled)
		}
		// flood's next job takes turn 4 (the clock), before b's job in turn 5.
		newer := mustAccept(t, st, acceptFor("flood", "next"))
		l := mustLockLane(t, st, "local")
		if c := mustClaimUpTo(t, st, l, 1); len(c) != 1 || c[0].Job.ID != newer.ID {
			t.Errorf("first claim after 0015 took %v, want flood's new job %d", c, newer.ID)
		}
	})
}
