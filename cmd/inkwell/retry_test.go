package main

import (
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
