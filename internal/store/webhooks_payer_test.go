package store_test

import (
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_WebhookRowFollowsJobsAccount: the delivery row of a job that
// ends goes to the account in jobs.account, where accept stored who pays,
// whatever the payload holds: a chat payload whose account member was left
// out, or one naming another account, changes nothing (the trigger read
// the payload's JSON before migration 0018).
func TestStore_WebhookRowFollowsJobsAccount(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustWebhookAccount(t, s, "hooked", "http://127.0.0.1:9/hook")
		mustWebhookAccount(t, s, "bystander", "http://127.0.0.1:9/other")
		for key, payload := range map[string]string{
			"no-account":    `{"messages":[{"role":"user","content":"x"}]}`,
			"other-account": `{"account":"bystander","messages":[{"role":"user","content":"y"}]}`,
		} {
			mustAccept(t, s, store.AcceptParams{Account: "hooked", IdempotencyKey: key, RequestHash: inkwell.RequestHash([]byte(payload)), Payload: []byte(payload)})
		}
		l := mustLockLane(t, s, "local")
		for _, c := range claimAll(t, s, l) {
			if err := s.CompleteIfRunning(ctx, completeParams(c)); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			account string
			want    int
		}{{"hooked", 2}, {"bystander", 0}} {
			ds, err := s.WebhookDeliveries(ctx, store.WebhookFilter{Account: tc.account, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != tc.want {
				t.Errorf("account %s has %d deliveries, want %d", tc.account, len(ds), tc.want)
			}
		}
	})
}
