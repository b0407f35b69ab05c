package main

import (
	"context"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestOpsAdv_RetryWarnsOfAnEarlierBilledAttempt (found in review, fixed:
// mayHaveBilled reads every attempt): `inkwell retry` warned on stderr
// that the provider may bill again only when the job's LAST attempt may
// have been billed. A job whose attempt 1 timed out (sent; may have
// been billed), retried once, whose attempt 2 then failed provider_error
// (automatic retry off) is retried without a word, and `inkwell status`
// calls it "safe to retry … a retry cannot bill twice". A provider that
// ignores keys bills attempt 3 again on top of attempt 1. Right
// behaviour: warn when ANY attempt of the job failed with a class that is
// not NotBilled, as the budget's release rule and failed_job_action's
// cancelled branch already do.
func TestOpsAdv_RetryWarnsOfAnEarlierBilledAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.SQLitePath(t)
	st := storetest.MustOpen(t, db, store.Options{})
	payload := []byte(`{"prompt":"p","account":"default","max_words":50}`)
	j, _, err := st.Accept(ctx, store.AcceptParams{IdempotencyKey: "opsadv-retry", RequestHash: inkwell.RequestHash(payload), Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	l, err := st.LockLane(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	failAs := func(class inkwell.ErrorClass, msg string) {
		t.Helper()
		cs, err := st.ClaimUpTo(ctx, l, 1)
		if err != nil || len(cs) != 1 {
			t.Fatalf("claim: %v %v", cs, err)
		}
		if err := st.FailIfRunning(ctx, store.FailParams{JobID: j.ID, AttemptID: cs[0].Attempt.ID, Class: class, Error: msg}); err != nil {
			t.Fatal(err)
		}
	}
	failAs(inkwell.ClassTimeout, "provider: provider call: timeout: context deadline exceeded")
	if _, err := st.RetryIfFailed(ctx, j.ID, store.ActorCLI); err != nil {
		t.Fatal(err)
	}
	failAs(inkwell.ClassProviderError, "provider: provider call: server error: HTTP 500: oops")
	l.Release()
	st.Close()

	code, stdout, stderr := runCLI(t, "retry", "1", "--db", db)
	if code != 0 {
		t.Fatalf("retry: exit %d: %s %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "may have billed") {
		t.Errorf("inkwell retry of a job whose attempt 1 timed out (may have been billed) said nothing on stderr (%q); want the may-bill-again warning", stderr)
	}
}
