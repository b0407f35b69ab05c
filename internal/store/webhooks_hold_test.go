package store_test

import (
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_WebhookReceiverDownHoldsTheAccount: a send to acme's receiver
// that got no answer (or 429, 5xx) makes acme's other due deliveries wait
// until the failed one's next try, without counting an attempt for them,
// so the next claim goes to other's delivery, not to acme's backlog one
// time-out after another. other's deliveries are untouched; a 4xx (the
// receiver answered, about that delivery) holds nothing; a give-up holds
// nothing.
func TestStore_WebhookReceiverDownHoldsTheAccount(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustWebhookAccount(t, s, "acme", "http://127.0.0.1:9/hook")
		mustWebhookAccount(t, s, "other", "http://127.0.0.1:9/other")
		l := mustLockLane(t, s, "local")
		webhookJobs(t, s, l, "acme", "a1", "a2", "a3", "a4", "a5")
		webhookJobs(t, s, l, "other", "o1")
		first, err := s.ClaimWebhooks(ctx, 1, time.Hour) // the oldest: acme's a1
		if err != nil || len(first) != 1 || first[0].Account != "acme" {
			t.Fatalf("first claim: %+v, %v; want one of acme's", first, err)
		}
		// A 4xx holds nothing: the receiver is up and refused this one.
		held, err := s.WebhookFailed(ctx, store.WebhookFailParams{ID: first[0].ID, Attempts: 1, Status: 400, Error: "HTTP 400",
			NextAt: time.Now().Add(time.Hour), ReceiverDown: false})
		if err != nil || held != 0 {
			t.Fatalf("a 4xx: held %d, %v; want 0", held, err)
		}
		second, err := s.ClaimWebhooks(ctx, 1, time.Hour)
		if err != nil || len(second) != 1 || second[0].Account != "acme" {
			t.Fatalf("second claim: %+v, %v; want acme's next", second, err)
		}
		next := time.Now().Add(10 * time.Minute)
		held, err = s.WebhookFailed(ctx, store.WebhookFailParams{ID: second[0].ID, Attempts: 1, Error: "no answer in 15s",
			NextAt: next, ReceiverDown: true, URL: second[0].URL})
		if err != nil || held != 3 {
			t.Fatalf("no answer: held %d, %v; want acme's 3 other due deliveries", held, err)
		}
		claims, err := s.ClaimWebhooks(ctx, 10, time.Hour)
		if err != nil || len(claims) != 1 || claims[0].Account != "other" {
			t.Fatalf("claim after acme's receiver failed: %+v, %v; want only other's delivery", claims, err)
		}
		var heldRows, counted int
		if err := s.DB().QueryRow(s.Rebind(`SELECT COUNT(*), COALESCE(SUM(attempts), 0) FROM webhook_deliveries
			WHERE account = 'acme' AND delivered_at IS NULL AND next_attempt_at = $1`), s.TimeArg(next)).Scan(&heldRows, &counted); err != nil {
			t.Fatal(err)
		}
		if heldRows != 4 || counted != 1 {
			t.Errorf("%d of acme's deliveries wait until the failed one's next try, with %d attempts among them; want 4 (the failed one and the 3 held) and 1 (only the one sent)", heldRows, counted)
		}
		// A give-up holds nothing more.
		held, err = s.WebhookFailed(ctx, store.WebhookFailParams{ID: claims[0].ID, Attempts: 1, Error: "no answer", NextAt: time.Now(), GiveUp: true, ReceiverDown: true, URL: claims[0].URL})
		if err != nil || held != 0 {
			t.Errorf("a give-up: held %d, %v; want 0", held, err)
		}
	})
}
