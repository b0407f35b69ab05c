package store_test

import (
	"sync"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_RetryRacingReleaseKeepsTheReservation: on PostgreSQL,
// 'inkwell retry J' and 'inkwell accounts release J' run at the same
// moment on a failed job whose reservation is open (a timeout: it may have
// been billed). Either order alone is right: release then retry reserves
// again; retry then release is refused (a queued job may still spend).
// Interleaved, the retry used to read the reservation as open (so it did
// not reserve again), the release committed, and the retry's UPDATE
// re-queued the job holding no reservation, which the budget no longer
// saw. RetryIfFailed now takes the account's row first, as a release does.
func TestStore_RetryRacingReleaseKeepsTheReservation(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	s := storetest.MustOpen(t, dsn, store.Options{})
	s2 := storetest.MustOpen(t, dsn, store.Options{NoMigrate: true}) // a second process: the other CLI command
	withBudget(t, s, ptr[int64](1_000_000_000))
	const n = 40
	var ids []int64
	for i := range n {
		j := mustAccept(t, s, budgetParams("race-"+string(rune('a'+i%26))+"-"+itoa(i), 1_000))
		ids = append(ids, j.ID)
	}
	for range n {
		failAs(t, s, mustClaim(t, s, "lane-a"), inkwell.ClassTimeout, nil) // may have been billed: keeps its reservation
	}
	for _, id := range ids {
		wantReservation(t, s, id, store.ReservationOpen, 1_000)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(2)
		go func() { defer wg.Done(); _, _ = s.RetryIfFailed(t.Context(), id, store.ActorCLI) }()
		go func() { defer wg.Done(); _, _ = s2.ReleaseReservation(t.Context(), id) }()
	}
	wg.Wait()
	bad := count(t, s, `SELECT COUNT(*) FROM jobs WHERE status = 'queued' AND reservation_state <> 'open'`)
	if bad > 0 {
		t.Errorf("%d of %d jobs are queued again with no open reservation (retry and release interleaved): they run and are charged outside the budget", bad, n)
	}
	assertBooks(t, s)
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
