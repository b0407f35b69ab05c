package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx", for the databases built here
)

// The operator's reads at 1,000,000 jobs (issue #8, items 5-6), measured as
// users run them: the database is built with raw SQL (fast), then the
// product does what it does and nothing more (no ANALYZE: SQLite keeps its
// statistics by PRAGMA optimize when serve opens it, PostgreSQL's
// autovacuum analyzes when it gets to it).
//
//	go test -run xxx -bench 'Views1M' -benchtime 20x -count 3 ./internal/bench
//	go test -run xxx -bench 'Views1M/.*/queued=50k\(5k' -benchtime 20x ./internal/bench   (the job-life shape only)
//	go test -run xxx -bench 'Startup1M' -benchtime 10x -count 3 ./internal/bench
//
// PostgreSQL cases run when INKWELL_TEST_POSTGRES_URL is set. A 1 M-job
// database takes a minute or two to build, so each is built once per test
// process and shared by every -count round (TestMain drops them).

// viewShape is what the million jobs are: all done, or a backlog. The
// job-life shape is a busy day after automatic retry: one queued
// job in ten waits out a back-off (rescheduled after a 5xx or a 429, each
// with its failed attempt), the failed jobs spread over every kind the
// views tell apart (each class, given up, cancelled in flight, possible
// poison jobs), and retention has pruned the oldest half of the done jobs.
// With accounts, the queue is that many accounts' floods, one after the
// other (each a run of ids), each job in the turn of its place in its
// account's run (claim_fair.go): claim order, (claim_turn, id), takes one
// job of each account in turn, across the whole id range.
type viewShape struct {
	name           string
	queued, failed int
	jobLife        bool
	accounts       int
}

var viewShapes = []viewShape{
	{"done=1M", 0, 0, false, 0},
	{"queued=50k,failed=5k", 50_000, 5_000, false, 0},
	{"queued=50k(5k back-off),failed=5k(by class),pruned=500k", 50_000, 5_000, true, 0},
	{"queued=50k(100 accounts by turn),failed=5k", 50_000, 5_000, false, 100},
}

// BenchmarkViews1M: SELECT * FROM job_overview, one /metrics scrape, GET
// /v1/overview, the dashboard (GET /) and inkwell status (what its
// readStatus does: open without migrating, job_overview, lane_liveness,
// the last recovery run, the first 10 rows of job_board, close), on 1 M
// jobs, with one live lane; in the backlog shape it runs one job.
func BenchmarkViews1M(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		for _, shape := range viewShapes {
			b.Run(db+"/"+shape.name, func(b *testing.B) {
				dsn := built1M(b, db, "views/"+shape.name, func(st *store.Store) { fillViews(b, st, shape) })
				// The server's store: serve opens (and on SQLite optimizes)
				// its database, then answers from it.
				st := benchOpen(b, dsn, nil)
				srv := api.New(api.Config{Store: st})
				srv.SetReady(true)
				b.Run("job_overview", func(b *testing.B) {
					cpuLoop(b, func() { readAllRows(b, st.DB(), `SELECT * FROM job_overview`, 4) })
				})
				for _, page := range []struct{ name, path string }{
					{"metrics", "/metrics"}, {"v1_overview", "/v1/overview"}, {"dashboard", "/"},
				} {
					b.Run(page.name, func(b *testing.B) {
						cpuLoop(b, func() { getOK(b, srv, page.path) })
					})
				}
				b.Run("status", func(b *testing.B) {
					cpuLoop(b, func() { readStatus1M(b, dsn) })
				})
			})
		}
	}
}

// BenchmarkStartup1M: what serve does before it is ready, on 1,000,000
// done jobs (each with its attempt, result and charge) and one orphan
// (a job left running by a lane that died): open the store (migrations
// checked, statistics kept), take the lane's lock, run startup recovery.
// Each round makes a fresh orphan first, untimed.
func BenchmarkStartup1M(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		b.Run(db, func(b *testing.B) {
			dsn := built1M(b, db, "startup", func(st *store.Store) { fillViews(b, st, viewShape{name: "done=1M"}) })
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				makeOrphan(b, dsn, i)
				b.StartTimer()
				st, err := store.Open(ctx, dsn, store.Options{Synchronous: "FULL"})
				if err != nil {
					b.Fatal(err)
				}
				lock, err := st.LockLane(ctx, "local")
				if err != nil {
					b.Fatal(err)
				}
				rep, err := st.Recover(ctx, lock, false)
				b.StopTimer()
				lock.Release()
				st.Close()
				if err != nil || rep.JobsFailed != 1 || rep.AttemptsClosed != 1 {
					b.Fatalf("recover: %+v %v", rep, err)
				}
				b.StartTimer()
			}
		})
	}
}

// makeOrphan leaves one job running on lane local with its lane gone: it is
// accepted and claimed under the lane's lock, which is then released, as
// when the process dies mid-call.
func makeOrphan(b *testing.B, dsn string, i int) {
	b.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, store.Options{Synchronous: "FULL"})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, _, err := st.Accept(ctx, store.AcceptParams{IdempotencyKey: fmt.Sprintf("orphan-%d-%d", time.Now().UnixNano(), i),
		RequestHash: "h", Payload: []byte(`{"prompt":"x"}`)}); err != nil {
		b.Fatal(err)
	}
	lock, err := st.LockLane(ctx, "local")
	if err != nil {
		b.Fatal(err)
	}
	defer lock.Release()
	if err := st.RegisterLane(ctx, lock); err != nil {
		b.Fatal(err)
	}
	if cs, err := st.ClaimUpTo(ctx, lock, 1); err != nil || len(cs) != 1 {
		b.Fatalf("claim: %v %v", cs, err)
	}
}

// cpuLoop runs fn b.N times and reports, beside the wall time, this
// process's CPU time per op (user + system, getrusage): on a machine shared
// with other test runs the wall time measures the load as much as the
// reads, the CPU time much less. On SQLite the reads run in this process,
// so it is their cost; on PostgreSQL it is only the client's part.
func cpuLoop(b *testing.B, fn func()) {
	b.Helper()
	start := cpuTime()
	n := 0
	for b.Loop() {
		fn()
		n++
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(max(n, 1))/float64(time.Millisecond), "cpu-ms/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readStatus1M is inkwell status with its defaults (cmd/inkwell/status.go):
// openExisting, then readStatus with --jobs 10, then close.
func readStatus1M(b *testing.B, dsn string) {
	b.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, store.Options{NoMigrate: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if v, err := st.SchemaVersion(ctx); err != nil || v == 0 {
		b.Fatalf("schema version %d: %v", v, err)
	}
	if _, err := st.Overview(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := st.LiveLanes(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := st.LastRecoveryRun(ctx); err != nil {
		b.Fatal(err)
	}
	if rows, err := st.Board(ctx, 10); err != nil || len(rows) == 0 {
		b.Fatalf("board: %d rows, %v", len(rows), err)
	}
}

func getOK(b *testing.B, h http.Handler, path string) {
	b.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		b.Fatalf("GET %s = %d: %.300s", path, rec.Code, rec.Body.String())
	}
}

func readAllRows(b *testing.B, db *sql.DB, q string, want int) {
	b.Helper()
	rows, err := db.Query(q)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]any, len(cols))
	for i := range vals {
		vals[i] = new(any)
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(vals...); err != nil {
			b.Fatal(err)
		}
		n++
	}
	if err := rows.Err(); err != nil || n != want {
		b.Fatalf("%s: %d rows, %v; want %d", q, n, err, want)
	}
}

// fillViews writes a million jobs straight into the tables, in one
// statement per table (the triggers keep their counts as for any write):
// the newest shape.queued queued, shape.failed failed among the rest (each
// with its failed attempt: a third refused, a third by a worker restart, a
// third before the call, classified as migration 0005 does; or, in the
// job-life shape, twelve kinds in turn), the rest done with attempt, result
// and charge. The job-life shape adds the back-off, the second
// worker_restarted attempt of one in five restarted jobs (possible
// poison jobs) and the pruned half of the done jobs (see viewShape).
// Then lane local registers (its heartbeat dated a day ahead, so it stays
// alive however long the benchmark runs) and, with a backlog, claims one.
func fillViews(b *testing.B, st *store.Store, shape viewShape) {
	b.Helper()
	const n = 1_000_000
	ctx := context.Background()
	series := fmt.Sprintf(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < %d) SELECT i FROM c`, n)
	at := `strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', '-' || (` + fmt.Sprint(n) + ` - i) || ' seconds')`
	ahead := `strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', '+1 day')`
	if st.Dialect() == "postgres" {
		series = fmt.Sprintf(`SELECT i FROM generate_series(1, %d) AS i`, n)
		at = fmt.Sprintf(`statement_timestamp() - make_interval(secs => %d - i)`, n)
		ahead = `statement_timestamp() + interval '1 day'`
	}
	every := n // failed: one in every `every` of the jobs that are not queued
	if shape.failed > 0 {
		every = (n - shape.queued) / shape.failed
	}
	status := fmt.Sprintf(`CASE WHEN i > %d THEN 'queued' WHEN i %% %d = 0 THEN 'failed' ELSE 'done' END`, n-shape.queued, every)
	class := `CASE i % 3 WHEN 0 THEN 'rejected' WHEN 1 THEN 'worker_restarted' ELSE 'rejected' END`
	errText := `CASE i % 3 WHEN 0 THEN 'provider: provider call: client error: HTTP 401: invalid key'
		WHEN 1 THEN 'worker restarted' ELSE 'payload unreadable: x' END`
	// Queued jobs waiting out a back-off, pruned done jobs, given-up jobs.
	waiting, pruned, gaveUp := `false`, `false`, `false`
	notBefore := at
	// A rescheduled job waits out a 429 or a 5xx: the classes automatic
	// retry puts back.
	const waitClass = `CASE i % 20 WHEN 0 THEN 'rate_limited' ELSE 'provider_error' END`
	if shape.jobLife {
		class = `CASE (i / ` + fmt.Sprint(every) + `) % 12 WHEN 0 THEN 'not_sent' WHEN 1 THEN 'rate_limited' WHEN 2 THEN 'provider_error' WHEN 3 THEN 'rejected'
			WHEN 4 THEN 'malformed' WHEN 5 THEN 'unstorable' WHEN 6 THEN 'timeout' WHEN 7 THEN 'worker_restarted' WHEN 8 THEN 'shutdown'
			WHEN 9 THEN 'cancelled' WHEN 10 THEN 'legacy' ELSE 'provider_error' END`
		errText = `'failed: ' || ` + class
		waiting = `st = 'queued' AND i % 10 = 0`
		pruned = fmt.Sprintf(`st = 'done' AND i <= %d`, n/2)
		gaveUp = `(i / ` + fmt.Sprint(every) + `) % 12 = 11`
		notBefore = strings.ReplaceAll(strings.ReplaceAll(ahead, "'+1 day'", "'+' || (i % 3600) || ' seconds'"), "interval '1 day'", "make_interval(secs => i % 3600)")
	}
	account, turn := `'default'`, `0`
	if shape.accounts > 0 {
		run := shape.queued / shape.accounts // each account's queued jobs
		place := fmt.Sprintf(`(i - %d)`, n-shape.queued+1)
		account = fmt.Sprintf(`CASE WHEN st = 'queued' THEN 'acct-' || (%s / %d) ELSE 'default' END`, place, run)
		turn = fmt.Sprintf(`CASE WHEN st = 'queued' THEN %s %% %d ELSE 0 END`, place, run)
	}
	stmts := []string{
		`INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, error, error_class, not_before, gave_up_after, pruned_at,
		   lane, created_at, started_at, finished_at, account, claim_turn)
		 SELECT i, 'bench-' || i, 'h', '{"prompt":"a haiku about ink","account":"default","max_words":50}', st,
		   CASE WHEN w THEN 'failed: ' || ` + waitClass + ` WHEN st = 'failed' THEN ` + errText + ` END,
		   CASE WHEN w THEN ` + waitClass + ` WHEN st = 'failed' THEN ` + class + ` END,
		   CASE WHEN w THEN ` + notBefore + ` END,
		   CASE WHEN st = 'failed' AND ` + gaveUp + ` THEN 5 END,
		   CASE WHEN ` + pruned + ` THEN t END,
		   CASE WHEN st = 'queued' THEN NULL ELSE 'local' END,
		   t, CASE WHEN st = 'queued' THEN NULL ELSE t END, CASE WHEN st = 'queued' THEN NULL ELSE t END,
		   ` + account + `, ` + turn + `
		 FROM (SELECT i, st, t, ` + waiting + ` AS w FROM (SELECT i, ` + status + ` AS st, ` + at + ` AS t FROM (` + series + `) s) x) y`,
		`INSERT INTO job_attempts (job_id, attempt_number, status, error, error_class, lane, started_at, finished_at)
		 SELECT id, 1, status, error, error_class, lane, started_at, finished_at FROM jobs WHERE status <> 'queued'`,
		// A rescheduled job's failed attempt, and the second restart of one
		// in five worker_restarted jobs (possible poison jobs).
		`INSERT INTO job_attempts (job_id, attempt_number, status, error, error_class, lane, started_at, finished_at)
		 SELECT id, 1, 'failed', error, error_class, 'local', created_at, created_at FROM jobs WHERE status = 'queued' AND not_before IS NOT NULL`,
		`INSERT INTO job_attempts (job_id, attempt_number, status, error, error_class, lane, started_at, finished_at)
		 SELECT id, 2, 'failed', error, error_class, lane, started_at, finished_at FROM jobs
		 WHERE status = 'failed' AND error_class = 'worker_restarted' AND (id / ` + fmt.Sprint(every) + `) % 5 = 0`,
		`INSERT INTO results (job_id, attempt_id, text, created_at)
		 SELECT job_id, id, 'ink', finished_at FROM job_attempts WHERE status = 'done'`,
		`INSERT INTO charges (job_id, attempt_id, account, amount_micros, provider_request_id, created_at)
		 SELECT job_id, id, 'default', 10, 'req-' || job_id, finished_at FROM job_attempts WHERE status = 'done'`,
	}
	if st.Dialect() == "postgres" {
		stmts = append(stmts, `SELECT setval(pg_get_serial_sequence('jobs', 'id'), 1000000)`)
	}
	for _, q := range stmts {
		if _, err := st.WriteDB().ExecContext(ctx, q); err != nil {
			b.Fatalf("fill: %v\n%s", err, q)
		}
	}
	lock, err := st.LockLane(ctx, "local")
	if err != nil {
		b.Fatal(err)
	}
	defer lock.Release()
	if err := st.RegisterLane(ctx, lock); err != nil {
		b.Fatal(err)
	}
	if shape.queued > 0 {
		if cs, err := st.ClaimUpTo(ctx, lock, 1); err != nil || len(cs) != 1 {
			b.Fatalf("claim: %v %v", cs, err)
		}
	}
	if _, err := st.WriteDB().ExecContext(ctx, `UPDATE lanes SET heartbeat_at = `+ahead); err != nil {
		b.Fatal(err)
	}
}

// built1M returns the DSN of a database built by fill, once per test
// process for each key: a SQLite file, or a PostgreSQL database (skipped
// without INKWELL_TEST_POSTGRES_URL). TestMain removes them.
func built1M(b *testing.B, db, key string, fill func(*store.Store)) string {
	b.Helper()
	key = db + "/" + key
	if db == "postgres" && os.Getenv(storetest.PostgresEnv) == "" {
		b.Skip("PostgreSQL benchmarks skipped: set " + storetest.PostgresEnv)
	}
	built1MCache.Lock()
	defer built1MCache.Unlock()
	if dsn, ok := built1MCache.dsn[key]; ok {
		return dsn
	}
	var dsn string
	if db == "postgres" {
		url := os.Getenv(storetest.PostgresEnv)
		name := fmt.Sprintf("inkwell_bench_%d_%d", os.Getpid(), len(built1MCache.dsn))
		if err := pgAdminExec(url, `CREATE DATABASE `+name); err != nil {
			b.Fatal(err)
		}
		built1MCache.drop = append(built1MCache.drop, func() { _ = pgAdminExec(url, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`) })
		dsn = pgWithDatabase(b, url, name)
	} else {
		dir, err := os.MkdirTemp("", "inkwell-bench-1m-")
		if err != nil {
			b.Fatal(err)
		}
		built1MCache.drop = append(built1MCache.drop, func() { os.RemoveAll(dir) })
		dsn = filepath.Join(dir, "bench.db")
	}
	start := time.Now()
	st, err := store.Open(context.Background(), dsn, store.Options{Synchronous: "FULL"})
	if err != nil {
		b.Fatal(err)
	}
	fill(st)
	st.Close()
	b.Logf("built %s in %v", key, time.Since(start).Round(time.Second))
	if built1MCache.dsn == nil {
		built1MCache.dsn = map[string]string{}
	}
	built1MCache.dsn[key] = dsn
	return dsn
}

var built1MCache struct {
	sync.Mutex
	dsn  map[string]string
	drop []func()
}

// TestMain drops the databases built1M made once the benchmarks are done.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, drop := range built1MCache.drop {
		drop()
	}
	storetest.Exit(code) // a line when PostgreSQL benchmarks and tests were skipped
}

func pgAdminExec(url, q string) error {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(q)
	return err
}

// pgWithDatabase is url with its database name replaced.
func pgWithDatabase(b *testing.B, url, name string) string {
	b.Helper()
	base, query, _ := strings.Cut(url, "?")
	i := strings.LastIndex(base, "/")
	if i < len("postgres://") {
		b.Fatalf("cannot name a database in %s", url)
	}
	out := base[:i+1] + name
	if query != "" {
		out += "?" + query
	}
	return out
}
