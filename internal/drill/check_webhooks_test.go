package drill

import (
	"context"
	"testing"

	"github.com/inkwell/inkwell/internal/store"
)

// webhookWorld is a world whose account "acct" has a webhook, with one
// done job (key "k1", job 1) and its delivery, pending.
func webhookWorld(t *testing.T) *world {
	t.Helper()
	w := emptyWorld(t)
	st := w.open()
	if _, err := st.CreateAccount(context.Background(), store.Account{Name: "acct", WebhookURL: "http://127.0.0.1:9/hook"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	w.mustRun("k1", true)
	return w
}

// deliverAll marks every delivery delivered, as the sender does after a
// 2xx, and returns the webhook-ids a receiver would have got.
func (w *world) deliverAll() map[string]int {
	w.t.Helper()
	st := w.open()
	defer st.Close()
	ctx := context.Background()
	in, err := st.Installation(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	ds, err := st.WebhookDeliveries(ctx, store.WebhookFilter{})
	if err != nil {
		w.t.Fatal(err)
	}
	ids := map[string]int{}
	for _, d := range ds {
		if err := st.WebhookDelivered(ctx, d.ID, 204); err != nil {
			w.t.Fatal(err)
		}
		ids[d.MessageID(in.ID)]++
	}
	return ids
}

func TestCheck_WebhookHealthyWorldPasses(t *testing.T) {
	t.Parallel()
	w := webhookWorld(t)
	mid := w.mustSnap(KindCrash, "after crash")
	if len(mid.Deliveries) != 1 || len(mid.WebhookAccounts) != 1 {
		t.Fatalf("world has %d deliveries and %d webhook accounts; want 1 each", len(mid.Deliveries), len(mid.WebhookAccounts))
	}
	ids := w.deliverAll()
	e := w.evidence(mid, w.mustSnap(KindFinal, "final"))
	e.WebhookIDs = ids
	if vs := Check(e); len(vs) != 0 {
		t.Errorf("healthy webhook world: %d violations:\n%s", len(vs), joinViolations(vs))
	}
}

// TestCheck_WebhookBrokenWorlds: a job ended without its delivery row, a
// delivery left pending at the end, and one marked delivered that the
// receiver never got are each caught, naming the job and the invariant.
func TestCheck_WebhookBrokenWorlds(t *testing.T) {
	t.Parallel()
	t.Run("EndedJobWithoutDelivery", func(t *testing.T) {
		t.Parallel()
		w := webhookWorld(t)
		w.mustExec(`DELETE FROM webhook_deliveries`)
		wantViolation(t, Check(w.evidence(w.mustSnap(KindCrash, "after crash"))), 1, InvWebhookRow)
	})
	t.Run("DeliveryForAnotherEnd", func(t *testing.T) {
		t.Parallel()
		w := webhookWorld(t)
		w.mustExec(`UPDATE webhook_deliveries SET event = 'job.failed'`)
		wantViolation(t, Check(w.evidence(w.mustSnap(KindCrash, "after crash"))), 1, InvWebhookRow)
	})
	t.Run("PendingAtTheEnd", func(t *testing.T) {
		t.Parallel()
		w := webhookWorld(t)
		e := w.evidence(w.mustSnap(KindFinal, "final"))
		e.WebhookIDs = map[string]int{}
		wantViolation(t, Check(e), 1, InvWebhookDelivered)
	})
	t.Run("MarkedDeliveredNeverReceived", func(t *testing.T) {
		t.Parallel()
		w := webhookWorld(t)
		w.deliverAll()
		e := w.evidence(w.mustSnap(KindFinal, "final"))
		e.WebhookIDs = map[string]int{"msg_other_1": 1}
		wantViolation(t, Check(e), 1, InvWebhookDelivered)
	})
}
