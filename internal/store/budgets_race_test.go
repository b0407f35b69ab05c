package store_test

import (
	"bytes"
	"log/slog"
	"strings"
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

// TestStore_BatchCancelsAtOnceDoNotStallThePool: a client's cancel of a
// batch re-sent many times at once (an SDK's retries, a script in a loop)
// on PostgreSQL. Each cancel waits for the account's row, holding one of
// the pool's connections; the one holding the row used to read the clock,
// a query on the pool, from inside its transaction, and waited for a
// connection the waiting cancels held, until the clock's time-out (5 s,
// then the local clock). Every cancel must answer with the database's
// clock read and no time-out.
func TestStore_BatchCancelsAtOnceDoNotStallThePool(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	var logged lockedBuffer
	s := storetest.MustOpen(t, dsn, store.Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	withBudget(t, s, ptr[int64](1_000_000_000))
	b := mustAcceptBatch(t, s, acmeBatch("cancel-storm", 1_000, "a", "b", "c"))
	const n = 30
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := s.CancelBatch(t.Context(), b.ID, store.ActorCLI)
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("cancel: %v", err)
		}
	}
	if strings.Contains(logged.String(), "clock unreadable") {
		t.Errorf("a cancel's clock read timed out, waiting for the pool its own transaction and the cancels behind it held:\n%s", logged.String())
	}
	if n := count(t, s, `SELECT COUNT(*) FROM jobs WHERE batch_id = `+itoa(int(b.ID))+` AND status = 'failed' AND error_class = 'cancelled'`); n != 3 {
		t.Errorf("%d of the batch's 3 jobs cancelled; want 3", n)
	}
	assertBooks(t, s)
}

// lockedBuffer is a bytes.Buffer a logger may write from many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
