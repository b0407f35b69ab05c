package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestCLI_RetrySaysWhenTheLastCallMayHaveBeenBilled: inkwell retry of a
// job whose last attempt may have been billed (a timeout) still queues it,
// and says on stderr that a provider ignoring keys bills again; a job whose
// last call was not billed (a 503) is retried without a word.
func TestCLI_RetrySaysWhenTheLastCallMayHaveBeenBilled(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	failed := map[inkwell.ErrorClass]int64{}
	for _, class := range []inkwell.ErrorClass{inkwell.ClassTimeout, inkwell.ClassProviderError} {
		payload, _ := json.Marshal(inkwell.Request{Prompt: "p " + string(class), Account: inkwell.DefaultAccount, MaxWords: 10})
		job, _, err := st.Accept(t.Context(), store.AcceptParams{IdempotencyKey: string(class), RequestHash: inkwell.RequestHash(payload), Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		c := storetest.ClaimAs(t, st, "local")
		if err := st.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "it failed", Class: class}); err != nil {
			t.Fatal(err)
		}
		failed[class] = job.ID
	}
	for class, warned := range map[inkwell.ErrorClass]bool{inkwell.ClassTimeout: true, inkwell.ClassProviderError: false} {
		id := failed[class]
		code, stdout, stderr := runCLI(t, "retry", fmt.Sprint(id), "--db", db)
		if code != 0 || !strings.Contains(stdout, fmt.Sprintf("job %d: failed -> queued", id)) {
			t.Errorf("retry of a %s job: exit %d, stdout %q, stderr %q; want it queued", class, code, stdout, stderr)
		}
		says := strings.Contains(stderr, "may have billed that call") && strings.Contains(stderr, fmt.Sprintf("job %d: its attempt 1 failed as %s", id, class))
		if says != warned {
			t.Errorf("retry of a %s job: stderr %q; want a word of a possible second bill: %t", class, stderr, warned)
		}
		if j, err := st.Job(t.Context(), id); err != nil || j.Status != inkwell.StatusQueued {
			t.Errorf("job %d after retry: %+v, %v; want queued", id, j, err)
		}
	}
}

// TestCLI_RetryOfAnIDNamedTwiceRetriesItOnce: "inkwell retry 1 1" retries
// job 1 once and exits 0; it used to retry it and then fail on the second
// mention ("not failed": it was queued by the first).
func TestCLI_RetryOfAnIDNamedTwiceRetriesItOnce(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	payload, _ := json.Marshal(inkwell.Request{Prompt: "p", Account: inkwell.DefaultAccount, MaxWords: 10})
	job, _, err := st.Accept(t.Context(), store.AcceptParams{IdempotencyKey: "k", RequestHash: inkwell.RequestHash(payload), Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	c := storetest.ClaimAs(t, st, "local")
	if err := st.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "it failed", Class: inkwell.ClassProviderError}); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprint(job.ID)
	code, stdout, stderr := runCLI(t, "retry", id, id, "--db", db)
	if code != 0 || strings.Count(stdout, "failed -> queued") != 1 || stderr != "" {
		t.Errorf("retry %s %s: exit %d, stdout %q, stderr %q; want exit 0 and one retry", id, id, code, stdout, stderr)
	}
}

// TestCLI_RetrySaysWhenAnEarlierCallMayHaveBeenBilled: `inkwell retry`
// used to warn on stderr that the provider may bill again only when the
// job's LAST attempt may have been billed. A job whose attempt 1 timed out
// (sent; may have been billed), retried once, whose attempt 2 then failed
// provider_error (automatic retry off) was retried without a word, and
// `inkwell status` called it "safe to retry … a retry cannot bill twice".
// A provider that ignores keys bills attempt 3 again on top of attempt 1.
// Right behaviour (mayHaveBilled reads every attempt): warn when ANY
// attempt of the job failed with a class that is not NotBilled, as the
// budget's release rule and failed_job_action's cancelled branch do.
func TestCLI_RetrySaysWhenAnEarlierCallMayHaveBeenBilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.SQLitePath(t)
	st := storetest.MustOpen(t, db, store.Options{})
	payload := []byte(`{"prompt":"p","account":"default","max_words":50}`)
	j, _, err := st.Accept(ctx, store.AcceptParams{IdempotencyKey: "timeout-then-5xx", RequestHash: inkwell.RequestHash(payload), Payload: payload})
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

// TestCLI_RetrySaysWhenALegacyAttemptMayHaveBeenBilled: mayHaveBilled
// (cmd/inkwell/retry.go) used to skip attempts whose class is "" (legacy:
// failed before failures had classes, in a database adopted from an older
// Inkwell), so a job whose attempt 1 is such a failure (nothing says it
// was not billed) and whose attempt 2, after the upgrade, met a 5xx was
// retried without a word, while failed_job_action (migration 0020) says of
// the same job "check the provider's usage first: an earlier attempt
// (attempt 1, legacy) may have billed it". Right behaviour: warn on any
// attempt the evidence does not show unbilled, a legacy one included, as
// the view does.
func TestCLI_RetrySaysWhenALegacyAttemptMayHaveBeenBilled(t *testing.T) {
	t.Parallel()
	path := storetest.SQLitePath(t)
	st := storetest.MustOpen(t, path, store.Options{})
	st.Close()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	const at = `'2026-11-30T00:00:00.000000Z'`
	for _, q := range []string{
		`INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, error, error_class, lane, created_at, started_at, finished_at)
			VALUES (1, 'k1', 'h', '{"prompt":"p"}', 'failed', 'provider: provider call: server error: HTTP 500: x', 'provider_error', 'local', ` + at + `, ` + at + `, ` + at + `)`,
		`INSERT INTO job_attempts (job_id, attempt_number, status, error, error_class, lane, started_at, finished_at)
			VALUES (1, 1, 'failed', 'upstream went away', NULL, 'local', ` + at + `, ` + at + `),
			       (1, 2, 'failed', 'provider: provider call: server error: HTTP 500: x', 'provider_error', 'local', ` + at + `, ` + at + `)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var words string
	if err := db.QueryRow(`SELECT next_action FROM failed_job_action WHERE id = 1`).Scan(&words); err != nil {
		t.Fatal(err)
	}
	db.Close()
	t.Logf("failed_job_action: %s", words)
	code, stdout, stderr := runCLI(t, "retry", "1", "--db", path)
	if code != 0 {
		t.Fatalf("retry: exit %d: %s %s", code, stdout, stderr)
	}
	if strings.Contains(words, "may have billed") && !strings.Contains(stderr, "may have billed") {
		t.Errorf("inkwell retry said nothing on stderr (%q) of a job whose attempt 1 is a legacy failure, which inkwell status calls %q; want the may-bill-again warning", stderr, words)
	}
}
