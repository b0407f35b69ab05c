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
//	go test -run xxx -bench 'Startup1M' -benchtime 10x -count 3 ./internal/bench
//
// PostgreSQL cases run when INKWELL_TEST_POSTGRES_URL is set. A 1 M-job
// database takes a minute or two to build, so each is built once per test
// process and shared by every -count round (TestMain drops them).

// viewShape is what the million jobs are: all done, or a backlog.
type viewShape struct {
	name           string
	queued, failed int
}

var viewShapes = []viewShape{
	{"done=1M", 0, 0},
	{"queued=50k,failed=5k", 50_000, 5_000},
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
					for b.Loop() {
						readAllRows(b, st.DB(), `SELECT * FROM job_overview`, 4)
					}
				})
				for _, page := range []struct{ name, path string }{
					{"metrics", "/metrics"}, {"v1_overview", "/v1/overview"}, {"dashboard", "/"},
				} {
					b.Run(page.name, func(b *testing.B) {
						for b.Loop() {
							getOK(b, srv, page.path)
						}
					})
				}
				b.Run("status", func(b *testing.B) {
					for b.Loop() {
						readStatus1M(b, dsn)
					}
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
// third before the call), the rest done with attempt, result and charge.
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
	stmts := []string{
		`INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, error, lane, created_at, started_at, finished_at)
		 SELECT i, 'bench-' || i, 'h', '{"prompt":"a haiku about ink","account":"default","max_words":50}', st,
		   CASE WHEN st = 'failed' THEN CASE i % 3 WHEN 0 THEN 'provider: provider call: client error: HTTP 401: invalid key'
		                                      WHEN 1 THEN 'worker restarted' ELSE 'payload unreadable: x' END END,
		   CASE WHEN st = 'queued' THEN NULL ELSE 'local' END,
		   t, CASE WHEN st = 'queued' THEN NULL ELSE t END, CASE WHEN st = 'queued' THEN NULL ELSE t END
		 FROM (SELECT i, ` + status + ` AS st, ` + at + ` AS t FROM (` + series + `) s) x`,
		`INSERT INTO job_attempts (job_id, attempt_number, status, error, lane, started_at, finished_at)
		 SELECT id, 1, status, error, lane, started_at, finished_at FROM jobs WHERE status <> 'queued'`,
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
	os.Exit(code)
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
