package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// A pending delivery of an account whose webhook URL was removed is parked
// by the first claim that meets it due (next_attempt_at WebhookParked), so
// no later poll of a sender (its read, then its claim under the write
// lock) reads it, however many wait. Before, they stayed due: 200,000 of
// them cost every poll 63 ms under SQLite's write lock to send none.

// unparkedCount is the pending deliveries not parked: due now or leased
// to a sender.
func unparkedCount(t *testing.T, s *store.Store) int {
	t.Helper()
	var n int
	if err := s.DB().QueryRow(`SELECT COUNT(*) FROM webhook_deliveries
		WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at < '9000-01-01T00:00:00Z'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// webhookJobs accepts and completes one job of account per key, so that
// each leaves a delivery.
func webhookJobs(t *testing.T, s *store.Store, l *store.LaneLock, account string, keys ...string) {
	t.Helper()
	for _, k := range keys {
		mustAccept(t, s, acceptKeyFor(account, k))
		if err := s.CompleteIfRunning(t.Context(), completeParams(claimOne(t, s, l))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStore_WebhookOrphansParkedByTheClaim: after acme's URL goes, a claim
// sends other's delivery and parks acme's due ones; the one acme had in
// flight keeps its lease and is parked only once its failed send makes it
// due; a URL set again makes the parked ones due at once but leaves a
// lease alone (no second sender takes a delivery being sent).
func TestStore_WebhookOrphansParkedByTheClaim(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustWebhookAccount(t, s, "acme", "http://127.0.0.1:9/hook")
		mustWebhookAccount(t, s, "other", "http://127.0.0.1:9/other")
		l := mustLockLane(t, s, "local")
		webhookJobs(t, s, l, "acme", "acme-1", "acme-2", "acme-3")
		inFlight, err := s.ClaimWebhooks(ctx, 1, time.Hour) // being sent as the URL goes
		if err != nil || len(inFlight) != 1 {
			t.Fatalf("ClaimWebhooks: %+v, %v; want one", inFlight, err)
		}
		webhookJobs(t, s, l, "other", "other-1")
		if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "acme", Remove: true}); err != nil {
			t.Fatal(err)
		}
		if n := unparkedCount(t, s); n != 4 {
			t.Fatalf("%d not parked after acme's URL went; want 4 (acme's 3, other's): the removal itself parks nothing", n)
		}

		claims, err := s.ClaimWebhooks(ctx, 10, time.Hour)
		if err != nil || len(claims) != 1 || claims[0].Account != "other" {
			t.Fatalf("claim with acme's URL removed: %+v, %v; want other's one", claims, err)
		}
		if n := unparkedCount(t, s); n != 2 {
			t.Errorf("%d not parked after the claim; want 2, both leased (acme's in flight, other's): acme's due ones parked", n)
		}
		acme, err := s.WebhookDeliveries(ctx, store.WebhookFilter{Account: "acme", Limit: 10})
		if err != nil || len(acme) != 3 {
			t.Fatalf("acme's deliveries: %d, %v; want 3", len(acme), err)
		}
		for _, d := range acme {
			if want := d.ID != inFlight[0].ID; d.Parked() != want || d.State() != "pending" {
				t.Errorf("delivery %d: state %s, parked %t (next %v); want pending, parked %t", d.ID, d.State(), d.Parked(), d.NextAttemptAt, want)
			}
		}
		if b, err := s.WebhookBacklog(ctx); err != nil || b.Pending != 2 || b.Parked != 2 {
			t.Errorf("backlog %+v, %v; want 2 pending (other's, acme's in flight) and 2 parked", b, err)
		}

		// acme's send in flight fails: due again, it is parked by the next claim.
		if _, err := s.WebhookFailed(ctx, store.WebhookFailParams{ID: inFlight[0].ID, Attempts: 1, Status: 500, Error: "HTTP 500", NextAt: time.Now().Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if claims, err := s.ClaimWebhooks(ctx, 10, time.Hour); err != nil || len(claims) != 0 {
			t.Fatalf("claim: %+v, %v; want none", claims, err)
		}
		if d, _ := s.WebhookDelivery(ctx, inFlight[0].ID); !d.Parked() || d.Attempts != 1 || d.LastError != "HTTP 500" {
			t.Errorf("the failed one after the next claim: %+v; want parked, its attempt and error kept", d)
		}

		if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "acme", URL: "http://127.0.0.1:9/back"}); err != nil {
			t.Fatal(err)
		}
		claims, err = s.ClaimWebhooks(ctx, 10, time.Hour)
		if err != nil || len(claims) != 3 {
			t.Fatalf("claim once acme has a URL again: %d claims, %v; want its 3", len(claims), err)
		}
		for _, c := range claims {
			if c.Account != "acme" || c.URL != "http://127.0.0.1:9/back" {
				t.Errorf("claim %+v; want acme's to the new URL", c)
			}
		}

		// Removed and set again while a send is in flight: its lease holds.
		if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "acme", Remove: true}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "acme", URL: "http://127.0.0.1:9/again"}); err != nil {
			t.Fatal(err)
		}
		if again, err := s.ClaimWebhooks(ctx, 10, time.Hour); err != nil || len(again) != 0 {
			t.Errorf("claim while acme's 3 are being sent, after its URL went and came back: %+v, %v; want none (their leases hold)", again, err)
		}
	})
}

// TestStore_WebhookParkWaitsForAURLBeingSet (PostgreSQL: SQLite has one
// writer): a URL set in a transaction that has written the account's row
// and made its parked deliveries due (none yet), not yet committed, when a
// sender's claim meets the account's due deliveries: the park waits for
// it, reads the URL, and leaves them due. Without the accounts' lock the
// park read the account as it was before and parked them, after the URL's
// transaction had looked for parked ones: they waited, parked, with a URL.
func TestStore_WebhookParkWaitsForAURLBeingSet(t *testing.T) {
	t.Parallel()
	s := storetest.MustOpen(t, storetest.PostgresDSN(t), store.Options{})
	ctx := t.Context()
	mustWebhookAccount(t, s, "acme", "http://127.0.0.1:9/hook")
	l := mustLockLane(t, s, "local")
	webhookJobs(t, s, l, "acme", "acme-1", "acme-2")
	if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "acme", Remove: true}); err != nil {
		t.Fatal(err)
	}

	// setWebhookTx's writes in its order, held open: the account's row,
	// then its parked deliveries made due.
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`UPDATE accounts SET webhook_url = 'http://127.0.0.1:9/back' WHERE name = 'acme'`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`UPDATE webhook_deliveries SET next_attempt_at = now() WHERE account = 'acme' AND next_attempt_at >= '9999-12-31'`); err != nil {
		t.Fatal(err)
	}
	claimed := make(chan error, 1)
	go func() {
		c, err := s.ClaimWebhooks(ctx, 10, time.Hour)
		if err == nil && len(c) != 0 {
			err = fmt.Errorf("claimed %d before the URL was committed", len(c))
		}
		claimed <- err
	}()
	waitForLockWaitOr(t, s, claimed)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-claimed; err != nil {
		t.Fatal(err)
	}
	if b, err := s.WebhookBacklog(ctx); err != nil || b.Parked != 0 || b.Pending != 2 {
		t.Errorf("backlog %+v, %v; want acme's 2 pending, none parked: acme has a URL", b, err)
	}
	if c, err := s.ClaimWebhooks(ctx, 10, time.Hour); err != nil || len(c) != 2 {
		t.Errorf("claim after the URL's commit: %d, %v; want acme's 2", len(c), err)
	}
}

// waitForLockWaitOr waits until a session of s's database waits for a
// lock, or for done to hold a value (put back for the caller): the claim
// ended without waiting.
func waitForLockWaitOr(t *testing.T, s *store.Store, done chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		var n int
		if err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case err := <-done:
			done <- err
			return
		case <-ctx.Done():
			t.Fatal("the claim neither waited for a lock nor ended within 10 s")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestStore_WebhookFullPollsParkOncePerMinute: a sender whose claims are
// all full (a backlog being sent; it polls again at once) still parks,
// once per minute of the store's clock: the first full poll parks gone's
// delivery; one of an account whose URL went since waits, due, until a
// minute has passed, and is parked then.
func TestStore_WebhookFullPollsParkOncePerMinute(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		clock := newClock()
		s := storetest.MustOpen(t, b.DSN, store.Options{NowFunc: clock.Now})
		ctx := t.Context()
		for _, a := range []string{"gone", "late", "later", "acme"} {
			mustWebhookAccount(t, s, a, "http://127.0.0.1:9/"+a)
		}
		l := mustLockLane(t, s, "local")
		webhookJobs(t, s, l, "gone", "g1")
		webhookJobs(t, s, l, "acme", "a1", "a2", "a3", "a4", "a5", "a6")
		fullPoll := func(when string) {
			t.Helper()
			if c, err := s.ClaimWebhooks(ctx, 2, time.Hour); err != nil || len(c) != 2 {
				t.Fatalf("%s: a poll of 2 claimed %d, %v; want a full one", when, len(c), err)
			}
		}
		parked := func(want int64, when string) {
			t.Helper()
			if b, err := s.WebhookBacklog(ctx); err != nil || b.Parked != want {
				t.Errorf("%s: backlog %+v, %v; want %d parked", when, b, err, want)
			}
		}
		if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "gone", Remove: true}); err != nil {
			t.Fatal(err)
		}
		fullPoll("first")
		parked(1, "after the first full poll")
		webhookJobs(t, s, l, "late", "l1") // due after acme's, by id
		if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "late", Remove: true}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(59 * time.Second)
		fullPoll("59 s later")
		parked(1, "59 s after the last park")
		clock.Advance(time.Second)
		fullPoll("a minute later")
		parked(2, "a minute after the last park")

		// The clock steps back (NTP, a failover to a database whose
		// clock is behind): the next full poll looks at once, rather
		// than an hour and a minute later.
		clock.Advance(-time.Hour)
		webhookJobs(t, s, l, "acme", "a7", "a8")
		webhookJobs(t, s, l, "later", "x1")
		if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "later", Remove: true}); err != nil {
			t.Fatal(err)
		}
		fullPoll("after the clock stepped back an hour")
		parked(3, "after the clock stepped back an hour")
	})
}

// TestStore_WebhookParkKeepsALeaseCommittedMeanwhile (PostgreSQL): a
// sender's claim leases a delivery (not yet committed) whose account's
// URL was removed; another sender's park, whose snapshot saw the delivery
// due, must not overwrite the lease: setting a URL would then make it due
// while it is being sent, and a third sender would send it too.
func TestStore_WebhookParkKeepsALeaseCommittedMeanwhile(t *testing.T) {
	t.Parallel()
	s, r := oneDeliveryWithoutURL(t)
	ctx := t.Context()
	leasing, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer leasing.Rollback()
	if _, err := leasing.Exec(leaseSQL, r); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.ClaimWebhooks(ctx, 10, time.Hour); done <- err }()
	waitForLockWaitOr(t, s, done)
	commitThenNotParked(t, s, leasing, done, r)
}

// oneDeliveryWithoutURL is a PostgreSQL store holding one due delivery,
// of account acme, whose URL was removed since; it returns the delivery's
// id.
func oneDeliveryWithoutURL(t *testing.T) (*store.Store, int64) {
	t.Helper()
	s := storetest.MustOpen(t, storetest.PostgresDSN(t), store.Options{})
	mustWebhookAccount(t, s, "acme", "http://127.0.0.1:9/hook")
	webhookJobs(t, s, mustLockLane(t, s, "local"), "acme", "acme-1")
	ds, err := s.WebhookDeliveries(t.Context(), store.WebhookFilter{Account: "acme", Limit: 10})
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries: %+v, %v; want one", ds, err)
	}
	if _, _, err := s.SetWebhook(t.Context(), store.SetWebhookParams{Account: "acme", Remove: true}); err != nil {
		t.Fatal(err)
	}
	return s, ds[0].ID
}

// leaseSQL leases delivery $1 as a sender's claim does, outside the store.
const leaseSQL = `UPDATE webhook_deliveries SET attempts = attempts + 1, next_attempt_at = now() + interval '1 hour' WHERE id = $1`

// TestStore_WebhookTwoSendersParkAtOnce (PostgreSQL): sender A's claim
// leased x (acme's URL still set in its snapshot) and A has not
// committed; acme's URL goes; sender B's poll parks gone's old y and meets
// x; then A parks too. Both polls succeed: the park takes its rows SKIP
// LOCKED, where waiting on x while holding y deadlocked with A wanting y.
func TestStore_WebhookTwoSendersParkAtOnce(t *testing.T) {
	t.Parallel()
	s := storetest.MustOpen(t, storetest.PostgresDSN(t), store.Options{})
	ctx := t.Context()
	mustWebhookAccount(t, s, "gone", "http://127.0.0.1:9/gone")
	mustWebhookAccount(t, s, "acme", "http://127.0.0.1:9/hook")
	l := mustLockLane(t, s, "local")
	webhookJobs(t, s, l, "gone", "gone-1")
	webhookJobs(t, s, l, "acme", "acme-1")
	if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "gone", Remove: true}); err != nil {
		t.Fatal(err)
	}
	var now time.Time // the database's clock, which the rows carry
	if err := s.DB().QueryRowContext(ctx, `SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	a, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Rollback()
	rows, err := a.Query(store.ClaimWebhooksSQL(s), now, 10, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Close(); err != nil || n != 1 {
		t.Fatalf("A claimed %d, %v; want acme's 1", n, err)
	}
	if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "acme", Remove: true}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.ClaimWebhooks(ctx, 10, time.Hour); done <- err }()
	waitForLockWaitOr(t, s, done)
	if _, err := a.Exec(store.ParkOrphanWebhooksSQL(s), now, store.WebhookParked, 10_000); err != nil {
		t.Errorf("sender A's park: %v", err)
	}
	if err := a.Commit(); err != nil {
		t.Errorf("sender A's commit: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("sender B's poll: %v", err)
	}
	if b, err := s.WebhookBacklog(ctx); err != nil || b.Parked != 1 || b.Pending != 1 {
		t.Errorf("backlog %+v, %v; want gone's parked and acme's leased one pending", b, err)
	}
}

// TestStore_WebhookParkLocksAccountsInNameOrder (PostgreSQL): the park
// locks the accounts it parks for in name order, as every transaction
// that locks several accounts does (lockBudgetsSQL). In the table's order
// it locked bb, then waited for aa, held by a transaction that locks aa
// then bb: a deadlock.
func TestStore_WebhookParkLocksAccountsInNameOrder(t *testing.T) {
	t.Parallel()
	s := storetest.MustOpen(t, storetest.PostgresDSN(t), store.Options{})
	ctx := t.Context()
	budget := int64(1_000_000_000)
	for _, name := range []string{"bb", "aa"} { // bb's row first in the table
		if _, err := s.CreateAccount(ctx, store.Account{Name: name, WebhookURL: "http://127.0.0.1:9/" + name, BudgetMicros: &budget}); err != nil {
			t.Fatal(err)
		}
	}
	l := mustLockLane(t, s, "local")
	webhookJobs(t, s, l, "aa", "a1")
	webhookJobs(t, s, l, "bb", "b1")
	for _, name := range []string{"bb", "aa"} {
		if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: name, Remove: true}); err != nil {
			t.Fatal(err)
		}
	}
	locker, err := s.DB().BeginTx(ctx, nil) // lockBudgetsSQL's order: aa, then bb
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Rollback()
	if _, err := locker.Exec(`SELECT name FROM accounts WHERE name = 'aa' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.ClaimWebhooks(ctx, 10, time.Hour); done <- err }()
	waitForLockWaitOr(t, s, done)
	if _, err := locker.Exec(`SELECT name FROM accounts WHERE name = 'bb' FOR UPDATE`); err != nil {
		t.Errorf("the name-order locker: %v", err)
	}
	if err := locker.Commit(); err != nil {
		t.Errorf("the name-order locker's commit: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("the sender's poll: %v", err)
	}
	if b, err := s.WebhookBacklog(ctx); err != nil || b.Parked != 2 {
		t.Errorf("backlog %+v, %v; want aa's and bb's parked", b, err)
	}
}

// TestStore_WebhookParkKeepsALeaseCommittedAfterItsSnapshot (PostgreSQL):
// the park waits on the account's row (another transaction holds it) while
// a lease of a delivery it saw due commits: once it goes on, its pick's
// lock reads the row again as it is now, no longer due, and leaves it.
func TestStore_WebhookParkKeepsALeaseCommittedAfterItsSnapshot(t *testing.T) {
	t.Parallel()
	s, r := oneDeliveryWithoutURL(t)
	ctx := t.Context()
	holder, err := s.DB().BeginTx(ctx, nil) // a budget change on acme, say
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.Exec(`UPDATE accounts SET rpm = rpm WHERE name = 'acme'`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.ClaimWebhooks(ctx, 10, time.Hour); done <- err }()
	waitForLockWaitOr(t, s, done)
	select {
	case err := <-done:
		t.Fatalf("the poll ended without waiting on acme's row: %v", err)
	default:
	}
	if _, err := s.DB().ExecContext(ctx, leaseSQL, r); err != nil {
		t.Fatal(err)
	}
	commitThenNotParked(t, s, holder, done, r)
}

// commitThenNotParked commits tx, which the poll (its result on done) was
// waiting on, and checks that delivery r, leased meanwhile, was not parked.
func commitThenNotParked(t *testing.T, s *store.Store, tx *sql.Tx, done chan error, r int64) {
	t.Helper()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d, _ := s.WebhookDelivery(t.Context(), r); d.Parked() {
		t.Errorf("delivery %d parked while leased (next %v)", r, d.NextAttemptAt)
	}
}
