package store_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Webhooks (docs/design.md §11): the delivery row written by the trigger in the
// transaction that ends a job, and the sender's claims and outcomes, on
// both dialects.

// webhookTables extends dumpTables for the refusal checks of this file.
var webhookTables = append(append([]string{}, dumpTables...), "accounts", "webhook_deliveries")

func acceptKeyFor(account, key string) store.AcceptParams {
	payload, _ := json.Marshal(inkwell.Request{Prompt: "p " + key, Account: account, MaxWords: inkwell.DefaultMaxWords})
	return store.AcceptParams{Account: account, IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload}
}

// deliveryEvents lists job_id:event of every delivery row, oldest first.
func deliveryEvents(t *testing.T, s *store.Store) []string {
	t.Helper()
	ds, err := s.WebhookDeliveries(t.Context(), store.WebhookFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(ds) - 1; i >= 0; i-- {
		out = append(out, ds[i].IdempotencyKey+":"+ds[i].Event)
	}
	return out
}

func mustWebhookAccount(t *testing.T, s *store.Store, name, url string) store.Account {
	t.Helper()
	a, err := s.CreateAccount(t.Context(), store.Account{Name: name, WebhookURL: url})
	if err != nil {
		t.Fatalf("CreateAccount %s: %v", name, err)
	}
	if !strings.HasPrefix(a.WebhookSecret, store.WebhookSecretPrefix) || a.WebhookURL != url {
		t.Fatalf("created %+v; want the URL and a whsec_ secret", a)
	}
	return a
}

// TestStore_WebhookDeliveryOnJobEnd: every way a job ends (complete,
// fail, cancel, recovery) writes one delivery row for an account with a
// webhook, in the ending transaction; a reschedule, a retry and prune write
// none; an account without a webhook gets none; prune keeps the rows (and
// its delete and insert of job rows on SQLite do not trip the foreign key).
func TestStore_WebhookDeliveryOnJobEnd(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustWebhookAccount(t, s, "acme", "http://127.0.0.1:9/hook")
		// A job that ends before the webhook exists has no delivery: a
		// dead lane leaves one running, recovered below.
		mustAccept(t, s, acceptKeyFor("acme", "recovered"))
		mustClaim(t, s, "gone")

		l := mustLockLane(t, s, "local")
		mustAccept(t, s, acceptKeyFor("acme", "done"))
		mustAccept(t, s, acceptKeyFor(inkwell.DefaultAccount, "other-account"))
		mustAccept(t, s, acceptKeyFor("acme", "failed"))
		mustAccept(t, s, acceptKeyFor("acme", "rescheduled"))
		mustAccept(t, s, acceptKeyFor("acme", "cancelled"))
		byKey := map[string]*store.Claimed{}
		for _, c := range claimAll(t, s, l) {
			byKey[c.Job.IdempotencyKey] = c
		}
		if err := s.CompleteIfRunning(ctx, completeParams(byKey["done"])); err != nil {
			t.Fatal(err)
		}
		if err := s.CompleteIfRunning(ctx, completeParams(byKey["other-account"])); err != nil {
			t.Fatal(err)
		}
		mustFailClass(t, s, byKey["failed"], "rejected", inkwell.ClassRejected)
		retryAt := time.Now().Add(time.Hour)
		c := byKey["rescheduled"]
		if err := s.FailIfRunning(ctx, store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "502", Class: inkwell.ClassProviderError, RetryAt: &retryAt}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Cancel(ctx, byKey["cancelled"].Job.ID, "test"); err != nil {
			t.Fatal(err)
		}
		want := []string{"done:job.done", "failed:job.failed", "cancelled:job.failed"}
		if got := deliveryEvents(t, s); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("deliveries %v, want %v", got, want)
		}

		gl := mustLockLane(t, s, "gone")
		if _, err := s.Recover(ctx, gl, false); err != nil {
			t.Fatal(err)
		}
		want = append(want, "recovered:job.failed")
		// A failed job retried and done again ends a second time: a second row.
		mustRetry(t, s, byKey["failed"].Job.ID)
		again := claimOne(t, s, l)
		if err := s.CompleteIfRunning(ctx, completeParams(again)); err != nil {
			t.Fatal(err)
		}
		want = append(want, "failed:job.done")
		if got := deliveryEvents(t, s); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("after recovery and a retry: deliveries %v, want %v", got, want)
		}
		ds, _ := s.WebhookDeliveries(ctx, store.WebhookFilter{Account: "acme", Limit: 1000})
		for _, d := range ds {
			if d.Attempts != 0 || d.State() != "pending" || d.OccurredAt.IsZero() || !d.NextAttemptAt.Equal(d.OccurredAt) {
				t.Errorf("delivery %+v; want pending, no attempts, due when the job ended", d)
			}
			if d.Event == "job.failed" && (d.JobErrorClass == "" || d.JobError == "") {
				t.Errorf("failed delivery %+v lacks the job's error and class", d)
			}
		}

		// Prune rewrites the finished job rows (SQLite: delete and insert):
		// no delivery is written, none is lost.
		before := dumpOf(t, s.DB(), "webhook_deliveries")
		rep, err := s.Prune(ctx, time.Now().Add(time.Hour), store.PruneOptions{Pause: -1})
		if err != nil || rep.Pruned == 0 {
			t.Fatalf("Prune: %+v, %v", rep, err)
		}
		assertSameDump(t, before, dumpOf(t, s.DB(), "webhook_deliveries"))
		if fk := foreignKeyProblems(t, s); fk != "" {
			t.Errorf("after prune: %s", fk)
		}
	})
}

// foreignKeyProblems runs SQLite's foreign key check ("" on PostgreSQL,
// which checks at each statement).
func foreignKeyProblems(t *testing.T, s *store.Store) string {
	t.Helper()
	if s.Dialect() != "sqlite" {
		return ""
	}
	rows, err := s.DB().QueryContext(t.Context(), `PRAGMA foreign_key_check`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var table, parent string
		var rowid, fkid any
		if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
			t.Fatal(err)
		}
		out = append(out, table+"->"+parent)
	}
	return strings.Join(out, ", ")
}

// TestStore_WebhookSettingsRefuseBadInput: a bad URL or name, or a
// contradictory change, is EINVALID and writes nothing.
func TestStore_WebhookSettingsRefuseBadInput(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustWebhookAccount(t, s, "acme", "https://example.com/hook")
		before := dumpOf(t, s.DB(), webhookTables...)
		for _, u := range []string{"ftp://x/y", "example.com/hook", "http://", "http://u:p@example.com/", "https://example.com/#frag",
			"http://exa mple.com/", "https://example.com/" + strings.Repeat("a", store.MaxWebhookURLBytes)} {
			if _, err := s.CreateAccount(ctx, store.Account{Name: "new", WebhookURL: u}); inkwell.ErrorCode(err) != inkwell.EINVALID {
				t.Errorf("CreateAccount with webhook %q: %v, want EINVALID", u, err)
			}
			if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "acme", URL: u}); inkwell.ErrorCode(err) != inkwell.EINVALID {
				t.Errorf("SetWebhook %q: %v, want EINVALID", u, err)
			}
		}
		for _, p := range []store.SetWebhookParams{
			{Account: "acme"},
			{Account: "acme", URL: "https://example.com/x", Remove: true},
			{Account: "acme", Remove: true, RotateSecret: true},
			{Account: "bad name", URL: "https://example.com/x"},
		} {
			if _, _, err := s.SetWebhook(ctx, p); inkwell.ErrorCode(err) != inkwell.EINVALID {
				t.Errorf("SetWebhook %+v: %v, want EINVALID", p, err)
			}
		}
		if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "nobody", URL: "https://example.com/x"}); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("SetWebhook of an unknown account: %v, want ENOTFOUND", err)
		}
		if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: inkwell.DefaultAccount, RotateSecret: true}); inkwell.ErrorCode(err) != inkwell.EINVALID {
			t.Errorf("rotating the secret of an account without a webhook: %v, want EINVALID", err)
		}
		if _, _, err := s.ReplayWebhook(ctx, 42); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("replay of no delivery: %v, want ENOTFOUND", err)
		}
		assertSameDump(t, before, dumpOf(t, s.DB(), webhookTables...))

		// Changing the URL keeps the secret; rotating makes a new one.
		old, err := s.WebhookSecret(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		a, secret, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "acme", URL: "https://example.com/new"})
		if err != nil || secret != "" || a.WebhookURL != "https://example.com/new" {
			t.Errorf("change URL: %+v %q %v; want the new URL, the secret kept", a, secret, err)
		}
		_, secret, err = s.SetWebhook(ctx, store.SetWebhookParams{Account: "acme", RotateSecret: true})
		if now, _ := s.WebhookSecret(ctx, "acme"); err != nil || secret == "" || secret == old || now != secret {
			t.Errorf("rotate: %q (stored %q, was %q), %v", secret, now, old, err)
		}
		if a, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "acme", Remove: true}); err != nil || a.WebhookURL != "" {
			t.Errorf("remove: %+v, %v", a, err)
		}
	})
}

// TestStore_WebhookClaimAndOutcomes: a claim leases a due delivery (a
// second claim finds nothing), a failure's late word after another claim
// is fenced out, delivered is idempotent, and a replay keeps the
// webhook-id.
func TestStore_WebhookClaimAndOutcomes(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		a := mustWebhookAccount(t, s, "acme", "http://127.0.0.1:9/hook")
		l := mustLockLane(t, s, "local")
		mustAccept(t, s, acceptKeyFor("acme", "k1"))
		if err := s.CompleteIfRunning(ctx, completeParams(claimOne(t, s, l))); err != nil {
			t.Fatal(err)
		}
		claims, err := s.ClaimWebhooks(ctx, 10, time.Hour)
		if err != nil || len(claims) != 1 {
			t.Fatalf("ClaimWebhooks: %+v, %v; want one", claims, err)
		}
		c := claims[0]
		if c.URL != a.WebhookURL || c.Secret != a.WebhookSecret || c.Attempts != 1 || c.IdempotencyKey != "k1" || c.Event != "job.done" {
			t.Errorf("claim %+v", c)
		}
		if more, err := s.ClaimWebhooks(ctx, 10, time.Hour); err != nil || len(more) != 0 {
			t.Errorf("second claim inside the lease: %+v, %v; want none", more, err)
		}
		// The lease ends (a claim with a lease in the past stands in for a
		// sender that died): another claim takes it as attempt 2.
		if _, err := s.WebhookFailed(ctx, store.WebhookFailParams{ID: c.ID, Attempts: 1, Status: 500, Error: "HTTP 500", NextAt: time.Now().Add(-time.Second)}); err != nil {
			t.Fatal(err)
		}
		claims, err = s.ClaimWebhooks(ctx, 10, -time.Minute)
		if err != nil || len(claims) != 1 || claims[0].Attempts != 2 {
			t.Fatalf("claim after a failure: %+v, %v; want attempt 2", claims, err)
		}
		// The first sender's late failure is fenced out by the attempts count.
		if _, err := s.WebhookFailed(ctx, store.WebhookFailParams{ID: c.ID, Attempts: 1, Error: "late", NextAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if d, _ := s.WebhookDelivery(ctx, c.ID); d.LastError != "HTTP 500" || d.LastStatus != 500 {
			t.Errorf("a fenced-out failure wrote: %+v", d)
		}
		for range 2 { // idempotent
			if err := s.WebhookDelivered(ctx, c.ID, 204); err != nil {
				t.Fatal(err)
			}
		}
		d, _ := s.WebhookDelivery(ctx, c.ID)
		if d.State() != "delivered" || d.LastStatus != 204 || d.LastError != "" {
			t.Errorf("delivered: %+v", d)
		}
		if pending, _ := s.WebhookDeliveries(ctx, store.WebhookFilter{Pending: true}); len(pending) != 0 {
			t.Errorf("pending after delivery: %+v", pending)
		}
		r, created, err := s.ReplayWebhook(ctx, c.ID)
		if err != nil || !created || r.ReplayOf != c.ID || r.State() != "pending" || r.Attempts != 0 || r.MessageID("inst") != d.MessageID("inst") {
			t.Errorf("replay: %+v, %t, %v; want a new pending row with the same webhook-id", r, created, err)
		}
		// A replay of a pending one makes it due now, no new row.
		if r2, created, err := s.ReplayWebhook(ctx, r.ID); err != nil || created || r2.ID != r.ID {
			t.Errorf("replay of a pending delivery: %+v, %t, %v", r2, created, err)
		}
		// Without a URL the account's deliveries wait; replay refuses.
		if _, _, err := s.SetWebhook(ctx, store.SetWebhookParams{Account: "acme", Remove: true}); err != nil {
			t.Fatal(err)
		}
		if claims, err := s.ClaimWebhooks(ctx, 10, time.Hour); err != nil || len(claims) != 0 {
			t.Errorf("claim without a URL: %+v, %v; want none", claims, err)
		}
		if _, _, err := s.ReplayWebhook(ctx, c.ID); inkwell.ErrorCode(err) != inkwell.EINVALID {
			t.Errorf("replay without a URL: %v, want EINVALID", err)
		}
		if b, err := s.WebhookBacklog(ctx); err != nil || b.Pending != 0 || b.Parked != 1 || b.Oldest != nil {
			t.Errorf("backlog %+v, %v; want the replay parked (the claim met it due), none pending", b, err)
		}
	})
}
