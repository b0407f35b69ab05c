package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// A pending delivery of an account whose webhook URL was removed waits,
// parked past any due time (store.WebhookParked, migration 0019), so the
// sender's look for due deliveries (its read, then its claim under the
// write lock) never reads it, however many wait. Before, they stayed due:
// 200,000 of them cost every poll 63 ms under SQLite's write lock to send
// none.

// dueCount is what the sender's idle check counts: pending deliveries due
// before the far future.
func dueCount(t *testing.T, s *store.Store) int {
	t.Helper()
	var n int
	if err := s.DB().QueryRow(`SELECT COUNT(*) FROM webhook_deliveries
		WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at < '9000-01-01T00:00:00Z'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStore_WebhookRemovedURLParksPending: removing a URL parks the
// account's pending deliveries (the one being sent too, and a failure
// reported for it afterwards keeps it parked), leaves another account's
// alone, and setting a URL again makes all of them due at once.
func TestStore_WebhookRemovedURLParksPending(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustWebhookAccount(t, s, "acme", "http://127.0.0.1:9/hook")
		mustWebhookAccount(t, s, "other", "http://127.0.0.1:9/other")
		l := mustLockLane(t, s, "local")
		for _, k := range []string{"acme-1", "acme-2", "acme-3"} {
			mustAccept(t, s, acceptKeyFor("acme", k))
			if err := s.CompleteIfRunning(ctx, completeParams(claimOne(t, s, l))); err != nil {
				t.Fatal(err)
			}
		}
		inFlight, err := s.ClaimWebhooks(ctx, 1, time.Hour) // being sent as the URL goes
		if err != nil || len(inFlight) != 1 {
			t.Fatalf("ClaimWebhooks: %+v, %v; want one", inFlight, err)
		}
		mustAccept(t, s, acceptKeyFor("other", "other-1"))
		if err := s.CompleteIfRunning(ctx, completeParams(claimOne(t, s, l))); err != nil {
			t.Fatal(err)
		}

		if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "acme", Remove: true}); err != nil {
			t.Fatal(err)
		}
		if err := s.WebhookFailed(ctx, store.WebhookFailParams{ID: inFlight[0].ID, Attempts: 1, Status: 500, Error: "HTTP 500", NextAt: time.Now().Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
		acme, err := s.WebhookDeliveries(ctx, store.WebhookFilter{Account: "acme", Limit: 10})
		if err != nil || len(acme) != 3 {
			t.Fatalf("acme's deliveries: %d, %v; want 3", len(acme), err)
		}
		for _, d := range acme {
			if !d.Parked() || d.State() != "pending" {
				t.Errorf("delivery %d after the URL's removal: state %s, next %v; want pending and parked", d.ID, d.State(), d.NextAttemptAt)
			}
		}
		if n := dueCount(t, s); n != 1 {
			t.Errorf("%d deliveries due after acme's URL went; want 1, other's", n)
		}
		claims, err := s.ClaimWebhooks(ctx, 10, time.Hour)
		if err != nil || len(claims) != 1 || claims[0].Account != "other" {
			t.Fatalf("claim with acme's URL removed: %+v, %v; want other's one", claims, err)
		}
		if b, err := s.WebhookBacklog(ctx); err != nil || b.Pending != 4 {
			t.Errorf("backlog %+v, %v; want 4 pending (parked ones count)", b, err)
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
		// A URL changed (not removed) parks nothing.
		if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "other", URL: "http://127.0.0.1:9/other2"}); err != nil {
			t.Fatal(err)
		}
		ds, _ := s.WebhookDeliveries(ctx, store.WebhookFilter{Account: "other", Limit: 10})
		for _, d := range ds {
			if d.Parked() {
				t.Errorf("other's delivery %d parked by a change of URL", d.ID)
			}
		}
	})
}

// TestMigrate_WebhooksParked: a database at schema version 18 holding
// pending deliveries of an account whose URL was removed (and of one with
// a URL, and a delivered one) is migrated by 0019: the waiting ones are
// parked, nothing else changes, and a URL set again makes them due.
func TestMigrate_WebhooksParked(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		dsn, old := openAtVersion(t, b, 18)
		const at = `'2026-11-30T00:00:00.000000Z'`
		mustExecAll(t, old.DB(), `INSERT INTO accounts (name, created_at, webhook_url, webhook_secret) VALUES ('gone', `+at+`, NULL, 'whsec_x'), ('kept', `+at+`, 'http://127.0.0.1:9/h', 'whsec_y')`)
		rows := []struct {
			id        int64
			account   string
			delivered bool
		}{{1, "gone", false}, {2, "gone", false}, {3, "gone", true}, {4, "kept", false}}
		for _, r := range rows {
			delivered := map[bool]string{true: at, false: "NULL"}[r.delivered]
			mustExecAll(t, old.DB(), fmt.Sprintf(`INSERT INTO jobs (id, account, idempotency_key, request_hash, payload, status, created_at, finished_at)
				VALUES (%d, '%s', 'key-%d', 'h', '{"prompt":"p"}', 'done', %s, %s)`, r.id, r.account, r.id, at, at))
			mustExecAll(t, old.DB(), fmt.Sprintf(`INSERT INTO webhook_deliveries (id, job_id, account, event, occurred_at, created_at, next_attempt_at, delivered_at)
				VALUES (%d, %d, '%s', 'job.done', %s, %s, %s, %s)`, r.id, r.id, r.account, at, at, at, delivered))
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
		st := storetest.MustOpen(t, dsn, store.Options{}) // applies 0019
		want := map[int64]bool{1: true, 2: true, 3: false, 4: false}
		for id, parked := range want {
			d, err := st.WebhookDelivery(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if d.Parked() != parked {
				t.Errorf("delivery %d (account %s, %s) after 0019: parked %t, want %t (next %v)", id, d.Account, d.State(), d.Parked(), parked, d.NextAttemptAt)
			}
		}
		if _, _, err := st.SetWebhook(t.Context(), store.SetWebhookParams{Account: "gone", URL: "http://127.0.0.1:9/again"}); err != nil {
			t.Fatal(err)
		}
		if n := dueCount(t, st); n != 3 {
			t.Errorf("%d deliveries due once gone has a URL again; want 3 (its two and kept's)", n)
		}
	})
}
