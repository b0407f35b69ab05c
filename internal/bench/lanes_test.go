package bench

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// Lanes and dialects: jobs/s drained by 1, 2 and 4 lanes, each with a store
// of its own as a separate process would have, each running 1 or 16 calls
// at once (--concurrency), with a zero-latency and a 200 ms provider; and
// accepts/s over HTTP; on SQLite and on PostgreSQL
// (INKWELL_TEST_POSTGRES_URL; the postgres cases skip when it is unset).
// A 200 ms call caps a lane at
// concurrency × 5 jobs/s, so pick -benchtime per concurrency:
//
//	go test -run xxx -bench 'BenchmarkLanes/.*/latency=0s/.*/concurrency=1$' -benchtime 2000x ./internal/bench
//	go test -run xxx -bench 'BenchmarkLanes/.*/latency=0s/.*/concurrency=16$' -benchtime 10000x ./internal/bench
//	go test -run xxx -bench 'BenchmarkLanes/.*/latency=200ms/.*/concurrency=1$' -benchtime 40x ./internal/bench
//	go test -run xxx -bench 'BenchmarkLanes/.*/latency=200ms/.*/concurrency=16$' -benchtime 1600x ./internal/bench
//	go test -run xxx -bench BenchmarkDialectAcceptHTTP -benchtime 10000x ./internal/bench

// BenchmarkLanes drains b.N queued jobs with n lanes of c slots each.
func BenchmarkLanes(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		for _, latency := range []time.Duration{0, 200 * time.Millisecond} {
			for _, n := range []int{1, 2, 4, 8} {
				for _, c := range []int{1, 16} {
					b.Run(fmt.Sprintf("%s/latency=%v/lanes=%d/concurrency=%d", db, latency, n, c), func(b *testing.B) {
						drainLanes(b, benchDSN(b, db), latency, n, c, nil)
					})
				}
			}
		}
	}
	// The cost of the database clock (one SELECT clock_timestamp() per
	// transition): the same drain with the local clock injected.
	b.Run("postgres-localclock/latency=0s/lanes=1/concurrency=1", func(b *testing.B) {
		drainLanes(b, benchDSN(b, "postgres"), 0, 1, 1, time.Now)
	})
}

func drainLanes(b *testing.B, dsn string, latency time.Duration, n, slots int, now func() time.Time) {
	ctx := context.Background()
	st := benchOpen(b, dsn, now)
	queue(b, st, b.N)
	obs := newCounter(b.N)
	lanes := make([]*worker.Lane, n)
	for i := range lanes {
		lanes[i] = worker.New(benchOpen(b, dsn, now), worker.Config{
			Name: fmt.Sprintf("lane-%d", i), Provider: provider.NewSim(latency), Poll: time.Millisecond,
			Concurrency: slots, Observer: obs,
		})
		if _, err := lanes[i].Open(ctx); err != nil {
			b.Fatal(err)
		}
		defer lanes[i].Close()
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var waits *lockWaits
	if st.Dialect() == "postgres" {
		waits = sampleLockWaits(b, dsn)
	}
	b.ResetTimer()
	start := time.Now()
	for _, l := range lanes {
		wg.Go(func() {
			if err := l.Run(runCtx); err != nil {
				b.Error(err)
			}
		})
	}
	obs.wait(b)
	elapsed := time.Since(start)
	b.StopTimer()
	stop()
	wg.Wait()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	if waits != nil {
		b.ReportMetric(waits.stop().Seconds()*1e6/float64(b.N), "lockwait-µs/job")
	}
	reportCommits(b, st)
}

// lockWaits samples pg_stat_activity every 10 ms for the store's
// sessions waiting on a heavyweight lock (a row, a tuple, a transaction:
// what a hot row makes lanes do), and sums the time they were seen
// waiting.
type lockWaits struct {
	quit chan struct{}
	done chan time.Duration
}

func sampleLockWaits(b *testing.B, dsn string) *lockWaits {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	w := &lockWaits{quit: make(chan struct{}), done: make(chan time.Duration, 1)}
	go func() {
		defer db.Close()
		const q = `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
			AND wait_event_type = 'Lock' AND application_name LIKE 'inkwell%'`
		var waited time.Duration
		last := time.Now()
		for {
			select {
			case <-w.quit:
				w.done <- waited
				return
			default:
			}
			var n int
			if err := db.QueryRow(q).Scan(&n); err == nil {
				now := time.Now()
				waited += time.Duration(n) * now.Sub(last)
				last = now
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return w
}

func (w *lockWaits) stop() time.Duration {
	close(w.quit)
	return <-w.done
}

// reportCommits reports how many jobs each durable commit carried, over
// every lane: one claim's attempts share their started_at, one outcome
// group's their finished_at (each read once per transaction).
func reportCommits(b *testing.B, st *store.Store) {
	b.Helper()
	var claims, groups float64
	if err := st.DB().QueryRowContext(context.Background(), `SELECT COUNT(DISTINCT started_at), COUNT(DISTINCT finished_at) FROM job_attempts`).Scan(&claims, &groups); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/claims, "jobs/claim")
	b.ReportMetric(float64(b.N)/groups, "jobs/outcome-commit")
}

// BenchmarkDialectAcceptHTTP: accepted requests per second over real HTTP,
// from 1 and 16 concurrent clients, one key each, on each dialect.
func BenchmarkDialectAcceptHTTP(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		for _, clients := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/clients=%d", db, clients), func(b *testing.B) { dialectAcceptHTTP(b, db, clients) })
		}
	}
}

func dialectAcceptHTTP(b *testing.B, db string, clients int) {
	st := benchOpen(b, benchDSN(b, db), nil)
	srv := httptest.NewServer(api.New(api.Config{Store: st}))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	body := []byte(`{"prompt":"a haiku about ink","max_words":20}`)
	var next, errs atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/jobs", bytes.NewReader(body))
				req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-%d", i))
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != http.StatusCreated {
					errs.Add(1)
				}
				if resp != nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := errs.Load(); n > 0 {
		b.Fatalf("%d requests failed", n)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "accepts/s")
}

// benchDSN is a fresh database of the dialect: a file in b.TempDir(), or a
// PostgreSQL database cloned from the migrated template.
func benchDSN(b *testing.B, db string) string {
	if db == "postgres" {
		return storetest.PostgresDSN(b)
	}
	return filepath.Join(b.TempDir(), "bench.db")
}

func benchOpen(b *testing.B, dsn string, now func() time.Time) *store.Store {
	b.Helper()
	st, err := store.Open(context.Background(), dsn, store.Options{Synchronous: "FULL", NowFunc: now})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}
