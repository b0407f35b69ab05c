package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// BenchmarkRecovery1M: startup recovery on a database holding 1,000,000
// finished jobs (each with a done attempt) and one orphan. Only Recover is
// timed; each iteration makes a fresh orphan first. Nothing analyzes the
// tables first: Inkwell itself does not, right after a bulk load, so
// recovery must not need statistics (see BenchmarkStartup1M for the whole
// start: open, lock, recover).
func BenchmarkRecovery1M(b *testing.B) {
	ctx := context.Background()
	st := mustStore(b, filepath.Join(b.TempDir(), "bench.db"))
	const history = 1_000_000
	mustExec(b, st, fmt.Sprintf(`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d)
		INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, lane, created_at, started_at, finished_at)
		SELECT x, 'hist-' || x, 'h', '{"prompt":"p"}', 'done', 'local',
		       '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:01.000000Z', '2026-01-01T00:00:02.000000Z' FROM c`, history))
	mustExec(b, st, `INSERT INTO job_attempts (job_id, attempt_number, status, lane, started_at, finished_at)
		SELECT id, 1, 'done', 'local', started_at, finished_at FROM jobs`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, _, err := st.Accept(ctx, store.AcceptParams{IdempotencyKey: fmt.Sprintf("orphan-%d", i), RequestHash: "h", Payload: []byte(`{"prompt":"x"}`)}); err != nil {
			b.Fatal(err)
		}
		if c := storetest.ClaimAs(b, st, "local"); c == nil {
			b.Fatal("claim: nothing queued")
		}
		lock, err := st.LockLane(ctx, "local")
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		rep, err := st.Recover(ctx, lock, false)
		b.StopTimer()
		lock.Release()
		if err != nil || rep.JobsFailed != 1 || rep.AttemptsClosed != 1 {
			b.Fatalf("recover: %+v %v", rep, err)
		}
		b.StartTimer()
	}
}

func mustExec(b *testing.B, st *store.Store, q string) {
	b.Helper()
	// The benchmark builds history through the write pool's own connection
	// rules: one statement, autocommit.
	if _, err := st.WriteDB().Exec(q); err != nil {
		b.Fatalf("%v\n%s", err, q)
	}
}
