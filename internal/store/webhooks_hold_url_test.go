package store_test

import (
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_WebhookHoldFollowsTheURLSentTo: acme's receiver at
// old-url is dead. A sender claims a1 (to old-url); while it waits for an
// answer the operator points acme at a working receiver (new-url). The
// send to old-url then fails with no answer. Its hold
// (webhookHoldAccountSQL) used to make every other delivery of acme wait
// until a1's next try, though they would go to new-url, which nobody has
// seen fail. The hold is evidence about the receiver the failed send
// reached: it holds only while the account still sends there.
func TestStore_WebhookHoldFollowsTheURLSentTo(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustWebhookAccount(t, s, "acme", "http://127.0.0.1:9/old")
		l := mustLockLane(t, s, "local")
		webhookJobs(t, s, l, "acme", "a1", "a2", "a3")
		claim, err := s.ClaimWebhooks(ctx, 1, time.Hour)
		if err != nil || len(claim) != 1 || claim[0].URL != "http://127.0.0.1:9/old" {
			t.Fatalf("claim: %+v, %v; want acme's a1 to the old URL", claim, err)
		}
		if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "acme", URL: "http://127.0.0.1:8/new"}); err != nil {
			t.Fatal(err)
		}
		held, err := s.WebhookFailed(ctx, store.WebhookFailParams{ID: claim[0].ID, Attempts: 1, Error: "no answer in 15s (old URL)",
			NextAt: time.Now().Add(time.Hour), ReceiverDown: true})
		if err != nil {
			t.Fatal(err)
		}
		due, err := s.ClaimWebhooks(ctx, 10, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if held != 0 || len(due) != 2 {
			t.Errorf("a send to the old URL failed after acme moved to a new URL: %d of acme's deliveries held for an hour, %d due now; "+
				"want none held and both due (they go to the new URL)", held, len(due))
		}
	})
}
