package bench

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
)

// BenchmarkPruneBatch50k: retention's prune of one batch of 50,000 done
// lines (the most a batch may hold) finished 60 days ago, on a SQLite file
// at synchronous=FULL, while 4 HTTP clients keep accepting new jobs. Each
// transaction that prunes a batch's lines first asks whether the batch has
// ended (a line retried since re-opens it: dropKept), so what that
// question costs is paid once per transaction, inside the writer.
//
//	go test -run xxx -bench PruneBatch50k -benchtime 1x -timeout 1h ./internal/bench
func BenchmarkPruneBatch50k(b *testing.B) {
	for _, batches := range []int{1, 10} {
		b.Run(fmt.Sprintf("batches=%d", batches), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				pruneBatches(b, batches, 50_000/batches)
			}
		})
	}
}

func pruneBatches(b *testing.B, batches, lines int) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "bench.db")
	st := mustStore(b, path)
	const finished = "2026-01-01T00:00:00.000000Z"
	fillPrunable(b, st, 1, batches*lines, 250, 350, finished)
	for k := 0; k < batches; k++ {
		mustExec(b, st, fmt.Sprintf(`INSERT INTO batches (id, account, idempotency_key, request_hash, lines, created_at)
			VALUES (%d, 'default', 'batch-%d', 'h', %d, '%s')`, k+1, k, lines, finished))
		mustExec(b, st, fmt.Sprintf(`UPDATE jobs SET batch_id = %d, batch_custom_id = 'line-' || id WHERE id BETWEEN %d AND %d`,
			k+1, k*lines+1, (k+1)*lines))
	}
	mustExec(b, st, `PRAGMA wal_checkpoint(TRUNCATE)`)

	srv := httptest.NewServer(api.New(api.Config{Store: st}))
	defer srv.Close()
	load := startAccepts(srv.URL, 4)
	time.Sleep(5 * time.Second)
	idle := load.cut()
	rep, err := st.Prune(ctx, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), store.PruneOptions{})
	during := load.cut()
	load.stop()
	if err != nil || rep.Pruned != int64(batches*lines) || rep.HeldByBatch != 0 {
		b.Fatalf("prune: %+v %v", rep, err)
	}
	b.ReportMetric(rep.Elapsed.Seconds(), "prune-s")
	b.ReportMetric(float64(rep.Batches), "txs")
	b.ReportMetric(ms(int64(rep.LongestBatch)), "longest-batch-ms")
	b.ReportMetric(float64(rep.SlowBatches), "txs-over-50ms")
	b.ReportMetric(during.p99, "prune-accept-p99-ms")
	b.ReportMetric(during.max, "prune-accept-max-ms")
	b.Logf("%d batches of %d done lines, synchronous=FULL, 4 clients accepting:", batches, lines)
	b.Logf("  accepts with no prune (5 s): %d, p50 %.1f ms, p99 %.1f ms, max %.1f ms", idle.n, idle.p50, idle.p99, idle.max)
	b.Logf("  accepts during prune:        %d, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d over 50 ms", during.n, during.p50, during.p99, during.max, during.over50)
	b.Logf("  prune: %d jobs in %d transactions, %.1f s, longest %.1f ms, %d over 50 ms",
		rep.Pruned, rep.Batches, rep.Elapsed.Seconds(), ms(int64(rep.LongestBatch)), rep.SlowBatches)
}

// BenchmarkLaneConcurrencyBatchLines is BenchmarkLaneConcurrency's
// zero-latency drain at 16 slots of jobs that are all lines of one batch,
// with migration 0021's batches_reopened trigger as it is and dropped
// before the drain: what the trigger's WHEN, tested on each claim and each
// completion, costs a batch's lines.
//
//	go test -run xxx -bench BenchmarkLaneConcurrencyBatchLines -benchtime 20000x -count 3 ./internal/bench
func BenchmarkLaneConcurrencyBatchLines(b *testing.B) {
	for _, trigger := range []string{"kept", "dropped"} {
		b.Run("batches_reopened="+trigger, func(b *testing.B) {
			st := mustStore(b, filepath.Join(b.TempDir(), "bench.db"))
			queue(b, st, b.N)
			mustExec(b, st, fmt.Sprintf(`INSERT INTO batches (id, account, idempotency_key, request_hash, lines, created_at)
				VALUES (1, 'default', 'batch', 'h', %d, '2026-01-01T00:00:00.000000Z')`, b.N))
			mustExec(b, st, `UPDATE jobs SET batch_id = 1, batch_custom_id = 'line-' || id`)
			if trigger == "dropped" {
				mustExec(b, st, `DROP TRIGGER batches_reopened`)
			}
			mustExec(b, st, `PRAGMA wal_checkpoint(TRUNCATE)`)
			drainQueued(b, st, 0, 16)
		})
	}
}
