package storetest

import (
	"context"
	"testing"

	"github.com/inkwell/inkwell/internal/store"
)

// MustQueue inserts n queued jobs for account in one statement, keys
// prefix-1 … prefix-n, ids in that order, each payload naming the account
// as accept writes it, and each the turn accept would give it (the
// account's next: store/claim_fair.go). It is for floods
// (tests and benchmarks of the claim at 10,000 or 100,000 queued jobs)
// that Accept one by one would take too long to build; the job_counts
// triggers run as for any insert.
func MustQueue(t testing.TB, st *store.Store, account, prefix string, n int) {
	t.Helper()
	// The statements run on the writer: SQLite's read pool is read-only.
	// One text serves both dialects (Rebind, TimeArg).
	const next = `SELECT COALESCE((SELECT served FROM claim_clock), 0), COALESCE((SELECT MAX(claim_turn) + 1 FROM jobs WHERE account = $1), 0)`
	const insert = `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < CAST($1 AS INTEGER))
		INSERT INTO jobs (idempotency_key, request_hash, payload, status, created_at, account, claim_turn)
		SELECT CAST($2 AS TEXT) || '-' || i, 'h', '{"account":"' || CAST($3 AS TEXT) || '","max_words":5,"prompt":"job ' || i || '"}', 'queued', $4, CAST($3 AS TEXT), CAST($5 AS BIGINT) + i - 1
		FROM c ORDER BY i`
	var served, turn int64
	if err := st.WriteDB().QueryRowContext(context.Background(), st.Rebind(next), account).Scan(&served, &turn); err != nil {
		t.Fatalf("queue %d jobs for account %s: read the turns: %v", n, account, err)
	}
	q, now, base := st.Rebind(insert), st.TimeArg(st.Now()), max(served, turn)
	if _, err := st.WriteDB().ExecContext(context.Background(), q, n, prefix, account, now, base); err != nil {
		t.Fatalf("queue %d jobs for account %s: %v", n, account, err)
	}
}
