package main

// A reviewer's tests of the day's last changes (lastrev). Every bug they
// showed is fixed (see git log); where a comment below says what the code
// does wrong, it tells how it was when the test was written.

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestLastrev_RetryWarnsOfAnEarlierLegacyAttempt: mayHaveBilled
// (cmd/inkwell/retry.go) skips attempts whose class is "" (legacy: failed
// before failures had classes, in a database adopted from an older
// Inkwell), so a job whose attempt 1 is such a failure (nothing says it
// was not billed) and whose attempt 2, after the upgrade, met a 5xx is
// retried without a word, while failed_job_action (migration 0020) says of
// the same job "check the provider's usage first: an earlier attempt
// (attempt 1, legacy) may have billed it". Right behaviour: warn on any
// attempt the evidence does not show unbilled, a legacy one included, as
// the view does.
func TestLastrev_RetryWarnsOfAnEarlierLegacyAttempt(t *testing.T) {
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
