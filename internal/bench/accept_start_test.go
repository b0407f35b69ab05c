package bench

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/limiter"
	"github.com/inkwell/inkwell/internal/metrics"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/worker"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkAcceptToStart: accept-to-start latency as a client sees it, on
// SQLite and on PostgreSQL: from the moment the client sends POST /v1/jobs
// until the lane's claim has committed and the job's provider call begins.
// The wiring is serve's: the API over real HTTP on loopback, metrics as the
// lane's observer, a text logger (to io.Discard), one lane with serve's
// defaults (16 calls in flight, a limiter without limits, heartbeat 2 s,
// poll 1 s, rescue interval 2 s), woken on accept; a zero-latency
// provider. Requests are sent open-loop at 200/s (one every 5 ms, each on
// its own goroutine, so a slow answer does not hold back the next
// request), after 200 warm-up requests that are not counted.
//
//	export INKWELL_TEST_POSTGRES_URL='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'
//	go test -run xxx -bench BenchmarkAcceptToStart -benchtime 2000x -count 5 ./internal/bench
//
// Reported: p50, p99 and max of send-to-start in ms, the p99 of the HTTP
// answer (send to response: the accept's group commit), the p99 of the
// claim call that took the job (ClaimUpTo: clock read to commit), and the
// claims that found nothing per job. With INKWELL_BENCH_BREAKDOWN=1 each
// run also prints, on stderr, each stage's percentiles and the slowest
// samples split into stages (see startSample), the CPU per job of this
// process and of the store's PostgreSQL sessions, what those sessions were
// doing (pg_stat_activity sampled every 5 ms), how long all the lane's
// slots were in use, and the lane's time per claim and per completion.
// INKWELL_BENCH_CONCURRENCY sets the lane's slots instead of serve's 16.
func BenchmarkAcceptToStart(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		b.Run(db, func(b *testing.B) { acceptToStart(b, benchDSN(b, db)) })
	}
	// The floor: the same arrivals on the same server with the fewest
	// round trips: accept, claim and completion each one autocommit
	// statement (one round trip and one WAL flush each), one job at a
	// time, no HTTP, no clock reads, no BEGIN, no attempt row, no fence. It
	// shows what the machine and the server allow at that moment (CPU, and
	// WAL flushes shared with every other database on the server); with one
	// job at a time it saturates sooner than a lane with 16 slots.
	b.Run("postgres-floor", func(b *testing.B) { acceptToStartFloor(b, benchDSN(b, "postgres")) })
}

// startSample is one job's timeline, in Unix nanoseconds on this host's
// wall clock (PostgreSQL runs on the same host, so its clock_timestamp()
// is the same clock).
type startSample struct {
	send     int64 // client: just before the request is written
	enter    int64 // server: the handler is entered
	created  int64 // jobs.created_at: the accept group's clock read, before its BEGIN
	answered int64 // server: the handler has written its answer (commit done, lane woken)
	response int64 // client: the response has been read
	claim    int64 // lane: the ClaimUpTo call that took the job began (clock read, BEGIN, UPDATE, INSERTs, COMMIT)
	started  int64 // jobs.started_at: the claim's clock read
	claimed  int64 // lane: that ClaimUpTo call returned, committed
	start    int64 // lane: the provider call began
}

// startLog holds the samples of one run, by request number.
type startLog struct {
	samples []startSample
	mu      sync.Mutex
	empty   int // claims that found nothing queued (a wake or poll with no job left)
	// The lane's time in the store, in ns: claims that took jobs, claims
	// that found none, completions (each a member of an outcome group).
	claimNS, emptyNS, completeNS atomic.Int64
	claims, completes            atomic.Int64
	// Jobs claimed and not yet completed (the lane's slots in use), and
	// how long all serveConcurrency slots were in use (no claim possible).
	slots     sync.Mutex
	inFlight  int
	fullSince time.Time
	fullNS    int64
	cpu       cpuUse // during the measured requests
	waits     string // PostgreSQL: what the store's sessions were doing
}

// index is the request number in a key or prompt "lat-N"; -1 for others
// (the warm-up's "warm-N").
func index(s string) int {
	n, ok := strings.CutPrefix(s, "lat-")
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(n)
	if err != nil {
		return -1
	}
	return i
}

// load reads every sample with atomic loads: the server's handlers write
// theirs on goroutines of their own.
func (l *startLog) load() {
	for i := range l.samples {
		s := &l.samples[i]
		for _, f := range []*int64{&s.send, &s.enter, &s.answered, &s.response, &s.claim, &s.claimed, &s.start} {
			*f = atomic.LoadInt64(f)
		}
	}
}

// inUse adds d to the slots in use and keeps the time all were in use.
func (l *startLog) inUse(d int) {
	l.slots.Lock()
	defer l.slots.Unlock()
	was := l.inFlight
	l.inFlight += d
	switch {
	case was < serveConcurrency && l.inFlight >= serveConcurrency:
		l.fullSince = time.Now()
	case was >= serveConcurrency && l.inFlight < serveConcurrency:
		l.fullNS += int64(time.Since(l.fullSince))
	}
}

func (l *startLog) at(key string) *startSample {
	i := index(key)
	if i < 0 || i >= len(l.samples) {
		return nil
	}
	return &l.samples[i]
}

// stampProvider records when the provider call of each measured job begins.
type stampProvider struct {
	inner inkwell.Provider
	log   *startLog
}

func (p stampProvider) Generate(ctx context.Context, req inkwell.ProviderRequest) (inkwell.ProviderResponse, error) {
	now := time.Now().UnixNano()
	if s := p.log.at(req.Prompt); s != nil {
		atomic.StoreInt64(&s.start, now)
	}
	return p.inner.Generate(ctx, req)
}

// stampStore is the store as the lane sees it, timing each claim and each
// completion, and counting the lane's slots in use.
type stampStore struct {
	*store.Store
	log *startLog
}

func (s stampStore) ClaimUpTo(ctx context.Context, l *store.LaneLock, n int) ([]*store.Claimed, error) {
	begin := time.Now().UnixNano()
	claimed, err := s.Store.ClaimUpTo(ctx, l, n)
	end := time.Now().UnixNano()
	s.log.claims.Add(1)
	if len(claimed) == 0 {
		s.log.mu.Lock()
		s.log.empty++
		s.log.mu.Unlock()
		s.log.emptyNS.Add(end - begin)
		return claimed, err
	}
	s.log.claimNS.Add(end - begin)
	s.log.inUse(len(claimed))
	for _, c := range claimed {
		if smp := s.log.at(c.Job.IdempotencyKey); smp != nil {
			atomic.StoreInt64(&smp.claim, begin)
			atomic.StoreInt64(&smp.claimed, end)
		}
	}
	return claimed, err
}

func (s stampStore) CompleteIfRunning(ctx context.Context, p store.CompleteParams) error {
	begin := time.Now()
	err := s.Store.CompleteIfRunning(ctx, p)
	s.log.inUse(-1)
	s.log.completeNS.Add(int64(time.Since(begin)))
	s.log.completes.Add(1)
	return err
}

// startObserver is serve's observer (the API's metrics) plus a count of
// finished jobs, by prefix of their key.
type startObserver struct {
	*metrics.Metrics
	mu      sync.Mutex
	want    map[string]int
	reached map[string]chan struct{}
}

func (o *startObserver) expect(prefix string, n int) chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	ch := make(chan struct{})
	o.want[prefix], o.reached[prefix] = n, ch
	return ch
}

func (o *startObserver) Finished(lane, outcome string, secs float64, job inkwell.Job) {
	o.Metrics.Finished(lane, outcome, secs, job)
	prefix, _, _ := strings.Cut(job.IdempotencyKey, "-")
	o.mu.Lock()
	defer o.mu.Unlock()
	if n, ok := o.want[prefix]; ok {
		o.want[prefix] = n - 1
		if n == 1 {
			close(o.reached[prefix])
		}
	}
}

// serveConcurrency is serve's default --concurrency: provider calls in
// flight at once on the lane. INKWELL_BENCH_CONCURRENCY overrides it (a
// diagnosis: how much of the tail is waiting for a free slot).
var serveConcurrency = func() int {
	if n, err := strconv.Atoi(os.Getenv("INKWELL_BENCH_CONCURRENCY")); err == nil && n > 0 {
		return n
	}
	return 16
}()

func acceptToStart(b *testing.B, dsn string) {
	ctx := context.Background()
	log := &startLog{samples: make([]startSample, b.N)}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, dsn, store.Options{Synchronous: "FULL", Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	metrics := metrics.New(reg, st)
	obs := &startObserver{Metrics: metrics, want: map[string]int{}, reached: map[string]chan struct{}{}}
	lane := worker.New(stampStore{Store: st, log: log}, worker.Config{
		Provider: stampProvider{inner: provider.NewSim(0), log: log}, Logger: logger, Observer: obs,
		Concurrency: serveConcurrency, Limiter: limiter.New(limiter.Config{}),
	})
	if _, err := lane.Open(ctx); err != nil {
		b.Fatal(err)
	}
	defer lane.Close()
	srv := api.New(api.Config{Store: st, Logger: logger, OnAccepted: lane.Wake, Metrics: metrics, Gatherer: reg, LoopbackOnly: true})
	srv.SetReady(true)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := log.at(r.Header.Get("Idempotency-Key"))
		if s != nil {
			atomic.StoreInt64(&s.enter, time.Now().UnixNano())
		}
		srv.ServeHTTP(w, r)
		if s != nil {
			atomic.StoreInt64(&s.answered, time.Now().UnixNano())
		}
	}))
	defer hs.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- lane.Run(runCtx) }()
	var stopOnce sync.Once
	stopLane := func() { stopOnce.Do(func() { stop(); <-done }) }
	defer stopLane()

	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var errs atomic.Int64
	send := func(prefix string, i int, s *startSample) {
		key := fmt.Sprintf("%s-%d", prefix, i)
		body := []byte(`{"prompt":"` + key + `","max_words":5}`)
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1/jobs", bytes.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		if s != nil {
			atomic.StoreInt64(&s.send, time.Now().UnixNano())
		}
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			errs.Add(1)
		}
		if resp != nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if s != nil {
			atomic.StoreInt64(&s.response, time.Now().UnixNano())
		}
	}
	paced := func(prefix string, n int, samples []startSample) {
		reached := obs.expect(prefix, n)
		tick := time.NewTicker(5 * time.Millisecond) // 200 requests per second
		defer tick.Stop()
		var wg sync.WaitGroup
		for i := range n {
			<-tick.C
			var s *startSample
			if samples != nil {
				s = &samples[i]
			}
			wg.Go(func() { send(prefix, i, s) })
		}
		wg.Wait()
		select {
		case <-reached:
		case <-time.After(2 * time.Minute):
			b.Fatalf("%s: jobs not finished in time", prefix)
		}
	}
	paced("warm", 200, nil) // connections opened, statements prepared
	log.mu.Lock()
	log.empty = 0
	log.mu.Unlock()
	log.claimNS.Store(0)
	log.emptyNS.Store(0)
	log.completeNS.Store(0)
	log.completes.Store(0)
	log.claims.Store(0)
	log.slots.Lock()
	log.fullNS = 0
	log.slots.Unlock()
	before := takeCPU(st)
	var waits *waitSampler
	if os.Getenv("INKWELL_BENCH_BREAKDOWN") != "" && st.Dialect() == "postgres" {
		waits = sampleWaits(b, dsn)
	}
	b.ResetTimer()
	paced("lat", b.N, log.samples)
	b.StopTimer()
	log.cpu = takeCPU(st).since(before)
	if waits != nil {
		log.waits = waits.stop()
	}
	stopLane()
	if n := errs.Load(); n > 0 {
		b.Fatalf("%d requests failed", n)
	}
	log.load()
	dbTimes(b, st, log)

	var total, accept, claim []float64
	for _, s := range log.samples {
		total = append(total, ms(s.start-s.send))
		accept = append(accept, ms(s.response-s.send))
		claim = append(claim, ms(s.claimed-s.claim))
	}
	for _, v := range [][]float64{total, accept, claim} {
		sort.Float64s(v)
	}
	b.ReportMetric(percentile(total, 0.50), "p50-ms")
	b.ReportMetric(percentile(total, 0.99), "p99-ms")
	b.ReportMetric(total[len(total)-1], "max-ms")
	b.ReportMetric(percentile(accept, 0.99), "accept-p99-ms")
	b.ReportMetric(percentile(claim, 0.99), "claim-p99-ms")
	b.ReportMetric(float64(log.empty)/float64(b.N), "empty-claims/job")
	if os.Getenv("INKWELL_BENCH_BREAKDOWN") != "" && b.N > 1 {
		breakdown(b, log)
	}
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// dbTimes reads each measured job's created_at and started_at.
func dbTimes(b *testing.B, st *store.Store, log *startLog) {
	rows, err := st.DB().Query(`SELECT idempotency_key, created_at, started_at FROM jobs WHERE idempotency_key LIKE 'lat-%'`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var key string
		var created, started any
		if err := rows.Scan(&key, &created, &started); err != nil {
			b.Fatal(err)
		}
		s := log.at(key)
		if s == nil {
			b.Fatalf("unexpected key %q", key)
		}
		s.created, s.started = unixNano(b, created), unixNano(b, started)
		n++
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	if n != len(log.samples) {
		b.Fatalf("%d measured jobs in the database, want %d", n, len(log.samples))
	}
}

// unixNano reads a time column: time.Time on PostgreSQL, TEXT on SQLite.
func unixNano(b *testing.B, v any) int64 {
	switch t := v.(type) {
	case time.Time:
		return t.UnixNano()
	case string:
		p, err := time.Parse(store.TimeLayout, t)
		if err != nil {
			b.Fatal(err)
		}
		return p.UnixNano()
	}
	b.Fatalf("time column of type %T", v)
	return 0
}

// breakdown prints each stage's percentiles, the run's CPU, wait and lane
// figures, and the slowest 1% of samples (at least 5) stage by stage:
//
//	http    send -> handler entered (client, loopback, server's read)
//	queue   entered -> created_at (parse, batcher hand-over, the group's clock read)
//	commit  created_at -> answered (BEGIN, INSERT, COMMIT of the group; metrics, log, wake, JSON)
//	wait    answered -> the claim that took it began (the wake; or a claim already running; or no free slot)
//	clock   claim began -> started_at (the claim's clock read)
//	claimtx started_at -> claim returned (BEGIN, UPDATE with the fence, INSERTs, COMMIT)
//	run     claim returned -> provider called
func breakdown(b *testing.B, log *startLog) {
	samples := log.samples
	idx := make([]int, len(samples))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(x, y int) bool {
		return samples[idx[x]].start-samples[idx[x]].send > samples[idx[y]].start-samples[idx[y]].send
	})
	n := min(len(samples), max(5, len(samples)/100))
	var sb strings.Builder
	stages := []struct {
		name     string
		from, to func(s startSample) int64
	}{
		{"total", func(s startSample) int64 { return s.send }, func(s startSample) int64 { return s.start }},
		{"http", func(s startSample) int64 { return s.send }, func(s startSample) int64 { return s.enter }},
		{"queue", func(s startSample) int64 { return s.enter }, func(s startSample) int64 { return s.created }},
		{"commit", func(s startSample) int64 { return s.created }, func(s startSample) int64 { return s.answered }},
		{"wait", func(s startSample) int64 { return s.answered }, func(s startSample) int64 { return s.claim }},
		{"clock", func(s startSample) int64 { return s.claim }, func(s startSample) int64 { return s.started }},
		{"claimtx", func(s startSample) int64 { return s.started }, func(s startSample) int64 { return s.claimed }},
		{"run", func(s startSample) int64 { return s.claimed }, func(s startSample) int64 { return s.start }},
	}
	fmt.Fprintf(&sb, "stages (ms): %-8s %7s %7s %7s %7s\n", "", "p50", "p90", "p99", "max")
	for _, st := range stages {
		v := make([]float64, len(samples))
		for i, s := range samples {
			v[i] = ms(st.to(s) - st.from(s))
		}
		sort.Float64s(v)
		fmt.Fprintf(&sb, "             %-8s %7.2f %7.2f %7.2f %7.2f\n", st.name, percentile(v, 0.5), percentile(v, 0.9), percentile(v, 0.99), v[len(v)-1])
	}
	jobs := int64(len(samples))
	if c := log.cpu; c.ok {
		fmt.Fprintf(&sb, "cpu, per job: this process %.3f ms; the store's database sessions %.3f ms\n", ms(c.self/jobs), ms(c.db/jobs))
	}
	sb.WriteString(log.waits)
	log.slots.Lock()
	full := log.fullNS
	log.slots.Unlock()
	fmt.Fprintf(&sb, "all %d slots in use (no claim possible) for %.0f ms of the run\n", serveConcurrency, ms(full))
	claims := max(1, log.claims.Load()-int64(log.empty))
	fmt.Fprintf(&sb, "lane: %d claims took jobs (%.2f jobs each, %.3f ms each), %d found none (%.3f ms each); completion %.3f ms per job\n",
		claims, float64(jobs)/float64(claims), ms(log.claimNS.Load()/claims), log.empty, ms(log.emptyNS.Load()/max(1, int64(log.empty))),
		ms(log.completeNS.Load()/max(1, log.completes.Load())))
	fmt.Fprintf(&sb, "slowest %d of %d (ms):\n  %6s %8s | %6s %6s %6s %6s %6s %7s %6s | prev job: %s\n",
		n, len(samples), "req", "total", "http", "queue", "commit", "wait", "clock", "claimtx", "run", "claim..start")
	for _, i := range idx[:n] {
		s := samples[i]
		prev := "-"
		if i > 0 {
			p := samples[i-1]
			prev = fmt.Sprintf("%.2f..%.2f", ms(p.claim-s.send), ms(p.start-s.send))
		}
		fmt.Fprintf(&sb, "  %6d %8.2f | %6.2f %6.2f %6.2f %6.2f %6.2f %7.2f %6.2f | %s\n", i, ms(s.start-s.send),
			ms(s.enter-s.send), ms(s.created-s.enter), ms(s.answered-s.created), ms(s.claim-s.answered),
			ms(s.started-s.claim), ms(s.claimed-s.started), ms(s.start-s.claimed), prev)
	}
	// Not b.Log: the testing package cuts a benchmark's log to ten lines.
	fmt.Fprintf(os.Stderr, "--- %s, %d requests:\n%s", b.Name(), len(samples), sb.String())
}

func acceptToStartFloor(b *testing.B, dsn string) {
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	db := st.WriteDB()
	const (
		insert = `INSERT INTO jobs (idempotency_key, request_hash, payload, status, created_at) VALUES ($1, 'h', '{}', 'queued', clock_timestamp())`
		claim  = `UPDATE jobs SET status = 'running', lane = 'floor', started_at = clock_timestamp()
			WHERE id = (SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id, idempotency_key`
		complete = `UPDATE jobs SET status = 'done', finished_at = clock_timestamp() WHERE id = $1 AND status = 'running'`
	)
	wake := make(chan struct{}, 1)
	send, start := make([]int64, b.N), make([]int64, b.N)
	type phase struct {
		left atomic.Int64
		done chan struct{}
	}
	var current atomic.Pointer[phase]
	runCtx, stop := context.WithCancel(ctx)
	laneDone := make(chan struct{})
	go func() { // the lane: claim, record, complete; drain, then wait for a wake
		defer close(laneDone)
		for runCtx.Err() == nil {
			var id int64
			var key string
			err := db.QueryRowContext(runCtx, claim).Scan(&id, &key)
			if err == nil {
				if i := index(key); i >= 0 && i < len(start) {
					start[i] = time.Now().UnixNano()
				}
				if _, err := db.ExecContext(runCtx, complete, id); err != nil && runCtx.Err() == nil {
					b.Error(err)
				}
				if p := current.Load(); p.left.Add(-1) == 0 {
					close(p.done)
				}
				continue
			}
			if runCtx.Err() == nil && !errors.Is(err, sql.ErrNoRows) {
				b.Error(err)
			}
			select {
			case <-runCtx.Done():
			case <-wake:
			case <-time.After(time.Second):
			}
		}
	}()
	defer func() { stop(); <-laneDone }()
	paced := func(prefix string, n int) {
		p := &phase{done: make(chan struct{})}
		p.left.Store(int64(n))
		current.Store(p)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		var wg sync.WaitGroup
		for i := range n {
			<-tick.C
			wg.Go(func() {
				if prefix == "lat" {
					send[i] = time.Now().UnixNano()
				}
				if _, err := db.ExecContext(ctx, insert, fmt.Sprintf("%s-%d", prefix, i)); err != nil {
					b.Error(err)
				}
				select {
				case wake <- struct{}{}:
				default:
				}
			})
		}
		wg.Wait()
		select {
		case <-p.done:
		case <-time.After(2 * time.Minute):
			b.Fatalf("%s: jobs not finished in time", prefix)
		}
	}
	paced("warm", 200)
	b.ResetTimer()
	paced("lat", b.N)
	b.StopTimer()
	total := make([]float64, b.N)
	for i := range total {
		total[i] = ms(start[i] - send[i])
	}
	sort.Float64s(total)
	b.ReportMetric(percentile(total, 0.50), "p50-ms")
	b.ReportMetric(percentile(total, 0.99), "p99-ms")
	b.ReportMetric(total[len(total)-1], "max-ms")
}

// cpuUse is CPU time (ns) spent by this process and by the server sessions
// of the store's database (PostgreSQL on this host; Linux /proc).
type cpuUse struct {
	ok       bool
	self, db int64
	sessions map[int]int64
}

func takeCPU(st *store.Store) cpuUse {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuUse{}
	}
	c := cpuUse{ok: true, self: ru.Utime.Nano() + ru.Stime.Nano(), sessions: map[int]int64{}}
	if st.Dialect() != "postgres" {
		return c
	}
	rows, err := st.DB().Query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return cpuUse{}
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) != nil {
			return cpuUse{}
		}
		if t, ok := procCPU(pid); ok {
			c.sessions[pid] = t
		}
	}
	return c
}

// procCPU reads a process's CPU time (utime+stime) in ns.
func procCPU(pid int) (int64, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	_, after, ok := strings.Cut(string(stat), ") ")
	f := strings.Fields(after)
	if !ok || len(f) < 13 {
		return 0, false
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stt, _ := strconv.ParseInt(f[12], 10, 64)
	const tick = int64(time.Second) / 100 // USER_HZ
	return (ut + stt) * tick, true
}

// since is the use from c0 to c; a session that started in between counts from zero.
func (c cpuUse) since(c0 cpuUse) cpuUse {
	if !c.ok || !c0.ok {
		return cpuUse{}
	}
	d := cpuUse{ok: true, self: c.self - c0.self}
	for pid, t := range c.sessions {
		d.db += t - c0.sessions[pid]
	}
	return d
}

// waitSampler reads pg_stat_activity every 5 ms, on a connection of its
// own, and counts what each of the store's sessions is doing: running,
// waiting (for a lock, the WAL flush, a lightweight lock) or idle
// (waiting for the next statement from Inkwell), by statement.
type waitSampler struct {
	quit    chan struct{}
	done    chan string
	samples int
}

func sampleWaits(b *testing.B, dsn string) *waitSampler {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	w := &waitSampler{quit: make(chan struct{}), done: make(chan string, 1)}
	go func() {
		defer db.Close()
		counts := map[string]int{}
		n := 0
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		const q = `SELECT state, COALESCE(wait_event_type || ':' || wait_event, ''), regexp_replace(left(query, 60), '\s+', ' ', 'g')
			FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name IN ('inkwell', 'inkwell/claim')`
		for {
			select {
			case <-w.quit:
				w.done <- formatWaits(counts, n)
				return
			case <-t.C:
			}
			rows, err := db.Query(q)
			if err != nil {
				continue
			}
			n++
			for rows.Next() {
				var state, wait, query string
				if rows.Scan(&state, &wait, &query) == nil && state != "idle" {
					counts[state+" | "+wait+" | "+query]++
				}
			}
			rows.Close()
		}
	}()
	return w
}

func (w *waitSampler) stop() string {
	close(w.quit)
	return <-w.done
}

// formatWaits lists the busiest (state, wait, statement) triples, as the
// average number of sessions in each at a sample.
func formatWaits(counts map[string]int, n int) string {
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range counts {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v })
	var sb strings.Builder
	fmt.Fprintf(&sb, "store sessions not idle, average over %d samples of pg_stat_activity (state | wait | statement):\n", n)
	for i, e := range all {
		if i == 15 {
			break
		}
		fmt.Fprintf(&sb, "  %5.3f  %s\n", float64(e.v)/float64(max(1, n)), e.k)
	}
	return sb.String()
}
