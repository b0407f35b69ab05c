package bench

// River (github.com/riverqueue/river v0.51.2, driver riverpgxv5) measured on
// this machine and this PostgreSQL server, so Inkwell's PostgreSQL figures
// can be set beside River's from the same run. River is a test-only
// dependency, imported here and nowhere else, only for this comparison.
// Each benchmark makes a database of its own (inkwell_river_<random>),
// migrates it with rivermigrate up, and drops it WITH (FORCE) at the end.
// River's client settings are its defaults (FetchCooldown 100 ms,
// FetchPollInterval 1 s, LISTEN/NOTIFY on, leader election and maintenance
// services on), the pool is pgxpool's default (max(4, NumCPU) connections):
// what a user who follows River's documentation runs; the fetch=fast cases
// tune River for throughput and latency (FetchCooldown 1 ms,
// FetchPollInterval 20 ms), and are the figures Inkwell is held to.
//
//	export INKWELL_TEST_POSTGRES_URL='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'
//	go test -run xxx -bench BenchmarkRiverDrain -benchtime 5000x -count 3 ./internal/bench
//	go test -run xxx -bench 'BenchmarkRiverInsert$' -benchtime 10000x -count 3 ./internal/bench
//	go test -run xxx -bench BenchmarkRiverInsertToStart -benchtime 2000x -count 3 ./internal/bench
//
// (Without the '$', -bench BenchmarkRiverInsert also runs
// BenchmarkRiverInsertToStart, at 10000x: about a minute per count.)

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverArgs is the one job kind of these benchmarks. SendNS is the wall
// clock (Unix ns) just before Insert, for BenchmarkRiverInsertToStart.
type riverArgs struct {
	Seq    int   `json:"seq"`
	Warm   bool  `json:"warm,omitempty"`
	SendNS int64 `json:"send_ns,omitempty"`
}

func (riverArgs) Kind() string { return "inkwell_bench_noop" }

// riverWorker does nothing; start, when set, is called first in Work.
type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	start func(job *river.Job[riverArgs])
}

func (w *riverWorker) Work(ctx context.Context, job *river.Job[riverArgs]) error {
	if w.start != nil {
		w.start(job)
	}
	return nil
}

// riverPool creates a database of its own on the server of
// INKWELL_TEST_POSTGRES_URL (skipping when that is unset), migrates River's
// schema into it, and returns a pgx pool on it. The pool is closed and the
// database dropped when b ends.
func riverPool(b *testing.B) *pgxpool.Pool {
	b.Helper()
	url := os.Getenv(storetest.PostgresEnv)
	if url == "" {
		b.Skip("River benchmarks skipped: they need PostgreSQL; set " + storetest.PostgresEnv + "=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	}
	rnd := make([]byte, 6)
	_, _ = rand.Read(rnd)
	name := "inkwell_river_" + hex.EncodeToString(rnd)
	if err := pgAdminExec(url, `CREATE DATABASE `+name); err != nil {
		b.Fatalf("create database %s: %v", name, err)
	}
	b.Cleanup(func() {
		if err := pgAdminExec(url, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			b.Errorf("drop database %s: %v", name, err)
		}
	})
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgWithDatabase(b, url, name))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close) // before the drop: cleanups run last in, first out
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		b.Fatalf("rivermigrate up: %v", err)
	}
	return pool
}

// riverClient is a River client on pool with River's defaults. With
// maxWorkers > 0 it has one queue, default, of that many workers (started
// by the caller, stopped when b ends); with 0 it has no queues: an
// insert-only client, never started.
func riverClient(b *testing.B, pool *pgxpool.Pool, maxWorkers int, w *riverWorker, fetch string) *river.Client[pgx.Tx] {
	b.Helper()
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	cfg := &river.Config{
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Workers: workers,
	}
	if fetch == "fast" { // River tuned: fetch again 1 ms after a fetch, poll every 20 ms
		cfg.FetchCooldown, cfg.FetchPollInterval = time.Millisecond, 20*time.Millisecond
	}
	if maxWorkers > 0 {
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if maxWorkers > 0 {
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := client.Stop(ctx); err != nil {
				b.Errorf("stop River client: %v", err)
			}
		})
	}
	return client
}

// BenchmarkRiverDrain: jobs per second River drains with no-op workers.
// b.N jobs are inserted first (InsertMany, 1000 per call, not timed); the
// time runs from Start until the b.N-th EventKindJobCompleted, which River
// sends once the completion is committed (its completer writes completions
// in batches, at least every 250 ms). River's defaults otherwise: a fetch
// takes at most MaxWorkers minus the jobs running, and fetches are at least
// FetchCooldown (100 ms) apart, so the queue's MaxWorkers per 100 ms is a
// ceiling on this rate.
func BenchmarkRiverDrain(b *testing.B) {
	for _, fetch := range []string{"fast", "default"} {
		for _, workers := range []int{10, 16} {
			b.Run(fmt.Sprintf("fetch=%s/workers=%d", fetch, workers), func(b *testing.B) { riverDrain(b, workers, fetch) })
		}
	}
}

func riverDrain(b *testing.B, workers int, fetch string) {
	ctx := context.Background()
	pool := riverPool(b)
	client := riverClient(b, pool, workers, &riverWorker{}, fetch)
	const chunk = 1000
	for i := 0; i < b.N; i += chunk {
		params := make([]river.InsertManyParams, 0, chunk)
		for j := i; j < min(i+chunk, b.N); j++ {
			params = append(params, river.InsertManyParams{Args: riverArgs{Seq: j}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
	// River drops events a subscriber has not taken when the channel is
	// full: room for every one.
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: b.N + 100,
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
	})
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	for done := 0; done < b.N; {
		select {
		case ev, ok := <-events:
			if !ok {
				b.Fatalf("subscription closed after %d of %d completions", done, b.N)
			}
			if ev.Job != nil && ev.Job.Kind == (riverArgs{}).Kind() {
				done++
			}
		case <-time.After(2 * time.Minute):
			b.Fatalf("%d of %d jobs completed; no completion for 2 minutes", done, b.N)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
}

// BenchmarkRiverInsert: jobs inserted per second by an insert-only client
// (no Queues, never started), from clients goroutines each calling
// client.Insert(ctx, args, nil) one job at a time (each its own
// transaction, with River's insert NOTIFY at most once per FetchCooldown).
// b.N inserts in all, shared among the goroutines; 2 per goroutine first,
// not timed, open the pool's connections.
func BenchmarkRiverInsert(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { riverInsert(b, clients) })
	}
}

func riverInsert(b *testing.B, clients int) {
	ctx := context.Background()
	pool := riverPool(b)
	client := riverClient(b, pool, 0, &riverWorker{}, "default")
	var errs atomic.Int64
	run := func(n int64) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				for {
					i := next.Add(1)
					if i > n {
						return
					}
					if _, err := client.Insert(ctx, riverArgs{Seq: int(i)}, nil); err != nil {
						if errs.Add(1) == 1 {
							b.Error(err)
						}
					}
				}
			})
		}
		wg.Wait()
	}
	run(int64(2 * clients)) // warm-up
	b.ResetTimer()
	start := time.Now()
	run(int64(b.N))
	elapsed := time.Since(start)
	b.StopTimer()
	if n := errs.Load(); n > 0 {
		b.Fatalf("%d inserts failed", n)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "inserts/s")
}

// BenchmarkRiverInsertToStart: River's insert-to-start latency, measured as
// BenchmarkAcceptToStart measures Inkwell's: a running client with queue
// default of 16 workers; jobs inserted open-loop at 200/s (one every 5 ms,
// each Insert on its own goroutine) by the same client, after 200 warm-up
// jobs that are not counted. Each job's args carry the wall clock just
// before its Insert; the worker reads the clock first thing in Work.
// Reported: p50, p99 and max of that difference in ms. fetch=fast is the
// comparison; with River's defaults fetches are at least FetchCooldown
// (100 ms) apart, so the queue starts at most 160 jobs/s, less than the
// 200/s sent: the backlog grows for the whole run, and those figures show
// that ceiling, not the delay of a wake-up.
func BenchmarkRiverInsertToStart(b *testing.B) {
	for _, fetch := range []string{"fast", "default"} {
		b.Run("fetch="+fetch, func(b *testing.B) { riverInsertToStart(b, fetch) })
	}
}

func riverInsertToStart(b *testing.B, fetch string) {
	ctx := context.Background()
	pool := riverPool(b)
	start := make([]int64, b.N) // ns from send to Work, by Seq
	type phase struct {
		left atomic.Int64
		done chan struct{}
	}
	var current atomic.Pointer[phase]
	w := &riverWorker{start: func(job *river.Job[riverArgs]) {
		now := time.Now().UnixNano()
		if i := job.Args.Seq; !job.Args.Warm && i >= 0 && i < len(start) {
			atomic.StoreInt64(&start[i], now-job.Args.SendNS)
		}
		if p := current.Load(); p != nil && p.left.Add(-1) == 0 {
			close(p.done)
		}
	}}
	client := riverClient(b, pool, 16, w, fetch)
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	paced := func(warm bool, n int) {
		p := &phase{done: make(chan struct{})}
		p.left.Store(int64(n))
		current.Store(p)
		tick := time.NewTicker(5 * time.Millisecond) // 200 inserts per second
		defer tick.Stop()
		var wg sync.WaitGroup
		for i := range n {
			<-tick.C
			wg.Go(func() {
				args := riverArgs{Seq: i, Warm: warm}
				args.SendNS = time.Now().UnixNano()
				if _, err := client.Insert(ctx, args, nil); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		select {
		case <-p.done:
		case <-time.After(2 * time.Minute):
			b.Fatalf("warm=%v: %d of %d jobs not started in time", warm, p.left.Load(), n)
		}
	}
	paced(true, 200)
	b.ResetTimer()
	paced(false, b.N)
	b.StopTimer()
	total := make([]float64, b.N)
	for i := range total {
		total[i] = ms(atomic.LoadInt64(&start[i]))
	}
	sort.Float64s(total)
	b.ReportMetric(percentile(total, 0.50), "p50-ms")
	b.ReportMetric(percentile(total, 0.99), "p99-ms")
	b.ReportMetric(total[len(total)-1], "max-ms")
}
