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
	// The statement runs on the writer: SQLite's read pool is read-only.
	const sqlite = `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?1),
		base(t) AS (SELECT MAX(
			COALESCE((SELECT served FROM claim_clock), 0),
			COALESCE((SELECT MAX(claim_turn) + 1 FROM jobs WHERE account = ?3), 0)))
		INSERT INTO jobs (idempotency_key, request_hash, payload, status, created_at, account, claim_turn)
		SELECT ?2 || '-' || i, 'h', '{"account":"' || ?3 || '","max_words":5,"prompt":"job ' || i || '"}', 'queued', ?4, ?3, base.t + i - 1
		FROM c, base ORDER BY i`
	const postgres = `INSERT INTO jobs (idempotency_key, request_hash, payload, status, created_at, account, claim_turn)
		SELECT $2::text || '-' || i, 'h', '{"account":"' || $3::text || '","max_words":5,"prompt":"job ' || i || '"}', 'queued', $4, $3::text, base.t + i - 1
		FROM generate_series(1, $1::int) i, (SELECT GREATEST(
			COALESCE((SELECT served FROM claim_clock), 0),
			COALESCE((SELECT MAX(claim_turn) + 1 FROM jobs WHERE account = $3::text), 0)) AS t) base
		ORDER BY i`
	q, now := sqlite, any(st.Now().UTC().Format(store.TimeLayout))
	if st.Dialect() == "postgres" {
		q, now = postgres, st.Now()
	}
	if _, err := st.WriteDB().ExecContext(context.Background(), q, n, prefix, account, now); err != nil {
		t.Fatalf("queue %d jobs for account %s: %v", n, account, err)
	}
}
