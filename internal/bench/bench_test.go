package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/worker"
)

func mustStore(b *testing.B, path string) *store.Store {
	b.Helper()
	st, err := store.Open(context.Background(), path, store.Options{Synchronous: "FULL"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// BenchmarkAcceptHTTP: accepted requests per second over real HTTP with 16
// concurrent clients, each request with its own key, synchronous=FULL.
func BenchmarkAcceptHTTP(b *testing.B) {
	st := mustStore(b, filepath.Join(b.TempDir(), "bench.db"))
	srv := httptest.NewServer(api.New(api.Config{Store: st}))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	const clients = 16
	var next atomic.Int64
	var errs atomic.Int64
	body := []byte(`{"prompt":"a haiku about ink","max_words":20}`)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/jobs", bytes.NewReader(body))
				req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-%d", i))
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != http.StatusCreated {
					errs.Add(1)
				}
				if resp != nil {
					io.Copy(io.Discard, resp.Body) // drain, so the connection is reused
					resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if n := errs.Load(); n > 0 {
		b.Fatalf("%d requests failed", n)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "accepts/s")
}

// BenchmarkDrain: jobs per second drained by one lane with a zero-latency
// provider. b.N jobs are queued first, then the lane drains them.
func BenchmarkDrain(b *testing.B) {
	st := mustStore(b, filepath.Join(b.TempDir(), "bench.db"))
	queue(b, st, b.N)
	drainWith(b, st, provider.NewSim(0), 1)
}

// BenchmarkAcceptToClaim: latency from the accept transaction to the claim
// transaction (jobs.created_at to job_attempts.started_at, one clock) at
// 200 requests per second over HTTP, with the lane woken on accept.
func BenchmarkAcceptToClaim(b *testing.B) {
	benchAcceptToClaim(b, provider.NewSim(0), 1)
}

// benchAcceptToClaim sends b.N requests at 200 per second over HTTP to a
// lane with the given provider and slots, and reports the latency from
// each accept to its claim, and the most calls in flight at once.
func benchAcceptToClaim(b *testing.B, prov inkwell.Provider, slots int) {
	ctx := context.Background()
	st := mustStore(b, filepath.Join(b.TempDir(), "bench.db"))
	obs := newCounter(b.N)
	lane := worker.New(st, worker.Config{Provider: prov, Poll: time.Hour, Concurrency: slots, Observer: obs})
	if _, err := lane.Open(ctx); err != nil {
		b.Fatal(err)
	}
	defer lane.Close()
	srv := httptest.NewServer(api.New(api.Config{Store: st, OnAccepted: lane.Wake}))
	defer srv.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- lane.Run(runCtx) }()
	body := []byte(`{"prompt":"latency","max_words":5}`)
	tick := time.NewTicker(5 * time.Millisecond) // 200 requests per second
	defer tick.Stop()
	var peak int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		<-tick.C
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/jobs", bytes.NewReader(body))
		req.Header.Set("Idempotency-Key", fmt.Sprintf("lat-%d", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		peak = max(peak, int64(i+1)-obs.finished())
	}
	obs.wait(b)
	b.StopTimer()
	stop()
	<-done
	lat := latencies(b, st)
	b.ReportMetric(percentile(lat, 0.50), "p50-ms")
	b.ReportMetric(percentile(lat, 0.99), "p99-ms")
	if slots > 1 {
		b.ReportMetric(float64(peak), "peak-in-flight")
	}
}

func latencies(b *testing.B, st *store.Store) []float64 {
	rows, err := st.DB().Query(`SELECT j.created_at, a.started_at FROM jobs j JOIN job_attempts a ON a.job_id = j.id`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var out []float64
	for rows.Next() {
		var created, started string
		if err := rows.Scan(&created, &started); err != nil {
			b.Fatal(err)
		}
		c, err1 := time.Parse(store.TimeLayout, created)
		s, err2 := time.Parse(store.TimeLayout, started)
		if err1 != nil || err2 != nil {
			b.Fatalf("times %q %q: %v %v", created, started, err1, err2)
		}
		out = append(out, float64(s.Sub(c).Microseconds())/1000)
	}
	sort.Float64s(out)
	return out
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*p)]
}

func queue(b *testing.B, st *store.Store, n int) {
	b.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			payload := []byte(fmt.Sprintf(`{"prompt":"job %d","account":"default","max_words":5}`, i))
			if _, _, err := st.Accept(context.Background(), store.AcceptParams{IdempotencyKey: fmt.Sprintf("q-%d", i), RequestHash: "h", Payload: payload}); err != nil {
				b.Error(err)
			}
		}(i)
	}
	wg.Wait()
}

// counter is a worker.Observer that closes done after n finished jobs.
type counter struct {
	n    int64
	left atomic.Int64
	done chan struct{}
}

// finished is how many jobs have finished so far.
func (c *counter) finished() int64 { return c.n - c.left.Load() }

func newCounter(n int) *counter {
	c := &counter{n: int64(n), done: make(chan struct{})}
	c.left.Store(int64(n))
	return c
}

func (c *counter) Claimed(string) {}

func (c *counter) Finished(_, outcome string, _ float64, _ inkwell.Job) {
	if c.left.Add(-1) == 0 {
		close(c.done)
	}
}

func (c *counter) wait(b *testing.B) {
	b.Helper()
	select {
	case <-c.done:
	case <-time.After(5 * time.Minute):
		b.Fatal("jobs not finished in time")
	}
}
