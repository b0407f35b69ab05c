package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
)

// BenchmarkPrune100k: retention's prune of 100,000 done jobs finished 60
// days ago, on a SQLite file at synchronous=FULL, while 4 HTTP clients keep
// accepting new jobs (each: POST, answer, 2ms pause). It reports the
// accepts' latency during the prune (max, p99) next to the same load with
// no prune, the prune's own figures, and the file's size before and after
// (WAL checkpointed), then after 100,000 more jobs and a second prune.
//
//	go test -run xxx -bench Prune100k -benchtime 1x -timeout 1h ./internal/bench
//
// batch=default is PruneOptions' default batch budget (20 ms); batch=10ms
// asks for batches half as long.
//
// Each job has a prompt of promptBytes and a text of textBytes (a 50-word
// answer is about 300 bytes).
func BenchmarkPrune100k(b *testing.B) {
	for _, shape := range []struct {
		name                   string
		promptBytes, textBytes int
	}{
		{"prompt=250B,text=350B", 250, 350},
		{"prompt=2KB,text=4KB", 2000, 4000},
	} {
		for _, batch := range []time.Duration{0, 10 * time.Millisecond} {
			name := shape.name + ",batch=default"
			if batch > 0 {
				name = shape.name + ",batch=" + batch.String()
			}
			b.Run(name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					prune100k(b, shape.promptBytes, shape.textBytes, store.PruneOptions{BatchTime: batch})
				}
			})
		}
	}
}

const prune100kJobs = 100_000

func prune100k(b *testing.B, promptBytes, textBytes int, opts store.PruneOptions) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "bench.db")
	st := mustStore(b, path)
	fillPrunable(b, st, 1, prune100kJobs, promptBytes, textBytes, "2026-01-01T00:00:00.000000Z")
	mustExec(b, st, `PRAGMA wal_checkpoint(TRUNCATE)`)
	before := fileBytes(b, path)

	srv := httptest.NewServer(api.New(api.Config{Store: st}))
	defer srv.Close()
	load := startAccepts(srv.URL, 4)
	time.Sleep(20 * time.Second)
	idle := load.cut()

	rep, err := st.Prune(ctx, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), opts)
	during := load.cut()
	load.stop()
	if err != nil || rep.Pruned != prune100kJobs {
		b.Fatalf("prune: %+v %v", rep, err)
	}
	mustExec(b, st, `PRAGMA wal_checkpoint(TRUNCATE)`)
	after := fileBytes(b, path)

	// 100,000 more jobs, pruned in their turn: the file is about what it
	// was after the first prune plus the new jobs' kept columns.
	var next int
	if err := st.DB().QueryRow(`SELECT MAX(id) + 1 FROM jobs`).Scan(&next); err != nil {
		b.Fatal(err)
	}
	fillPrunable(b, st, next, prune100kJobs, promptBytes, textBytes, "2026-01-02T00:00:00.000000Z")
	mustExec(b, st, `PRAGMA wal_checkpoint(TRUNCATE)`)
	grown := fileBytes(b, path)
	rep2, err := st.Prune(ctx, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), opts)
	if err != nil || rep2.Pruned != prune100kJobs {
		b.Fatalf("second prune: %+v %v", rep2, err)
	}
	mustExec(b, st, `PRAGMA wal_checkpoint(TRUNCATE)`)
	again := fileBytes(b, path)

	b.ReportMetric(idle.max, "idle-accept-max-ms")
	b.ReportMetric(idle.p99, "idle-accept-p99-ms")
	b.ReportMetric(during.max, "prune-accept-max-ms")
	b.ReportMetric(during.p99, "prune-accept-p99-ms")
	b.ReportMetric(rep.Elapsed.Seconds(), "prune-s")
	b.ReportMetric(ms(int64(rep.LongestBatch)), "longest-batch-ms")
	b.ReportMetric(float64(before)/1e6, "MB-before")
	b.ReportMetric(float64(after)/1e6, "MB-after")
	b.ReportMetric(float64(again)/1e6, "MB-after-2x")
	b.Logf("100,000 jobs (prompt %d B, text %d B), synchronous=FULL, 4 clients accepting:", promptBytes, textBytes)
	b.Logf("  accepts with no prune (20 s): %d, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d over 50 ms", idle.n, idle.p50, idle.p99, idle.max, idle.over50)
	b.Logf("  accepts during prune:         %d, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d over 50 ms", during.n, during.p50, during.p99, during.max, during.over50)
	b.Logf("  prune: %d jobs in %d batches, %.1f s, longest batch %.1f ms, %d batches or vacuum steps over 50 ms, %d pages vacuumed",
		rep.Pruned, rep.Batches, rep.Elapsed.Seconds(), ms(int64(rep.LongestBatch)), rep.SlowBatches, rep.PagesVacuumed)
	b.Logf("  file: %.1f MB before, %.1f MB after; +100,000 jobs: %.1f MB; pruned again: %.1f MB (%d pages vacuumed)",
		float64(before)/1e6, float64(after)/1e6, float64(grown)/1e6, float64(again)/1e6, rep2.PagesVacuumed)
}

// fillPrunable writes n done jobs (attempt, result, charge) finished at ts,
// ids from first, straight into the tables.
func fillPrunable(b *testing.B, st *store.Store, first, n, promptBytes, textBytes int, ts string) {
	b.Helper()
	rnd := func(bytes int) string { // random hex: nothing compresses or repeats
		return fmt.Sprintf(`substr(hex(randomblob(%d)), 1, %d)`, bytes/2+1, bytes)
	}
	last := first + n - 1
	mustExec(b, st, fmt.Sprintf(`WITH RECURSIVE c(x) AS (SELECT %d UNION ALL SELECT x + 1 FROM c WHERE x < %d)
		INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, lane, created_at, started_at, finished_at)
		SELECT x, 'key-' || x || '-' || hex(randomblob(8)), hex(randomblob(32)),
		       '{"prompt":"' || %s || '","account":"default","max_words":50}', 'done', 'local', '%s', '%s', '%s' FROM c`,
		first, last, rnd(promptBytes), ts, ts, ts))
	mustExec(b, st, fmt.Sprintf(`INSERT INTO job_attempts (id, job_id, attempt_number, status, lane, started_at, finished_at)
		SELECT id, id, 1, 'done', 'local', started_at, finished_at FROM jobs WHERE id BETWEEN %d AND %d`, first, last))
	mustExec(b, st, fmt.Sprintf(`INSERT INTO results (id, job_id, attempt_id, text, created_at)
		SELECT id, id, id, %s, finished_at FROM jobs WHERE id BETWEEN %d AND %d`, rnd(textBytes), first, last))
	mustExec(b, st, fmt.Sprintf(`INSERT INTO charges (id, job_id, attempt_id, account, amount_micros, provider_request_id, created_at)
		SELECT id, id, id, 'default', 1200, 'req-' || id, finished_at FROM jobs WHERE id BETWEEN %d AND %d`, first, last))
}

func fileBytes(b *testing.B, path string) int64 {
	b.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// acceptLoad is clients POSTing new jobs in a loop, each latency kept.
type acceptLoad struct {
	mu    sync.Mutex
	lat   []float64 // ms, since the last cut
	errs  int
	quit  chan struct{}
	wg    sync.WaitGroup
	round int
}

type latStats struct {
	n             int
	p50, p99, max float64
	over50        int // accepts slower than 50 ms
}

func startAccepts(url string, clients int) *acceptLoad {
	l := &acceptLoad{quit: make(chan struct{})}
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	client := &http.Client{Transport: tr}
	body := []byte(`{"prompt":"a haiku about ink","max_words":20}`)
	for c := 0; c < clients; c++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.quit:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodPost, url+"/v1/jobs", bytes.NewReader(body))
				req.Header.Set("Idempotency-Key", fmt.Sprintf("load-%d-%d-%d", time.Now().UnixNano(), c, i))
				t0 := time.Now()
				resp, err := client.Do(req)
				d := float64(time.Since(t0).Microseconds()) / 1000
				l.mu.Lock()
				if err != nil || resp.StatusCode != http.StatusCreated {
					l.errs++
				} else {
					l.lat = append(l.lat, d)
				}
				l.mu.Unlock()
				if resp != nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	return l
}

// cut returns the latencies since the last cut and starts anew.
func (l *acceptLoad) cut() latStats {
	l.mu.Lock()
	lat := l.lat
	l.lat = nil
	l.mu.Unlock()
	sort.Float64s(lat)
	if len(lat) == 0 {
		return latStats{}
	}
	st := latStats{n: len(lat), p50: percentile(lat, 0.50), p99: percentile(lat, 0.99), max: lat[len(lat)-1]}
	for _, v := range lat {
		if v > 50 {
			st.over50++
		}
	}
	return st
}

func (l *acceptLoad) stop() {
	close(l.quit)
	l.wg.Wait()
}

// BenchmarkPruneFileSize100k: the file's size alone, with no accepts
// around (their rows would count in it): 100,000 done jobs, pruned; then
// 100,000 more, pruned in their turn. synchronous=FULL, no rest between
// batches, the WAL checkpointed before each measure.
//
//	go test -run xxx -bench PruneFileSize100k -benchtime 1x ./internal/bench
func BenchmarkPruneFileSize100k(b *testing.B) {
	for i := 0; i < b.N; i++ {
		ctx := context.Background()
		path := filepath.Join(b.TempDir(), "bench.db")
		st := mustStore(b, path)
		sizes := []float64{}
		measure := func() {
			mustExec(b, st, `PRAGMA wal_checkpoint(TRUNCATE)`)
			sizes = append(sizes, float64(fileBytes(b, path))/1e6)
		}
		cut := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
		fillPrunable(b, st, 1, prune100kJobs, 250, 350, "2026-01-01T00:00:00.000000Z")
		measure()
		rep, err := st.Prune(ctx, cut, store.PruneOptions{Pause: -1})
		if err != nil || rep.Pruned != prune100kJobs {
			b.Fatalf("prune: %+v %v", rep, err)
		}
		measure()
		fillPrunable(b, st, prune100kJobs+1, prune100kJobs, 250, 350, "2026-01-02T00:00:00.000000Z")
		measure()
		rep2, err := st.Prune(ctx, cut, store.PruneOptions{Pause: -1})
		if err != nil || rep2.Pruned != prune100kJobs {
			b.Fatalf("second prune: %+v %v", rep2, err)
		}
		measure()
		b.ReportMetric(sizes[0], "MB-100k")
		b.ReportMetric(sizes[1], "MB-pruned")
		b.ReportMetric(sizes[3], "MB-200k-pruned")
		b.Logf("100,000 jobs (prompt 250 B, text 350 B): %.1f MB; pruned (%.1f s, %d pages vacuumed): %.1f MB; +100,000 jobs: %.1f MB; pruned (%d pages vacuumed): %.1f MB",
			sizes[0], rep.Elapsed.Seconds(), rep.PagesVacuumed, sizes[1], sizes[2], rep2.PagesVacuumed, sizes[3])
	}
}
