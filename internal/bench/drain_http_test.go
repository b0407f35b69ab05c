package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/worker"
)

// BenchmarkLaneConcurrencyHTTP is BenchmarkLaneConcurrency's zero-latency
// drain with the provider over HTTP, as serve runs it: the OpenAI provider
// calling the simulator (providersim, which writes every call to its own
// SQLite ledger) on loopback. One lane of 16 slots on SQLite
// (synchronous=FULL); b.N jobs are queued first. The in-process case is
// BenchmarkLaneConcurrency/latency=0s/slots=16.
//
//	go test -run xxx -bench BenchmarkLaneConcurrencyHTTP -benchtime 20000x -count 3 ./internal/bench
func BenchmarkLaneConcurrencyHTTP(b *testing.B) {
	for _, slots := range []int{16} {
		b.Run(fmt.Sprintf("latency=0s/slots=%d", slots), func(b *testing.B) {
			sim, err := providersim.New(providersim.Config{LedgerPath: filepath.Join(b.TempDir(), "ledger.db")})
			if err != nil {
				b.Fatal(err)
			}
			defer sim.Close()
			srv := httptest.NewServer(sim.Handler())
			defer srv.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: 2 * slots}
			defer tr.CloseIdleConnections()
			p, err := provider.NewOpenAI(provider.OpenAIConfig{URL: srv.URL, Client: &http.Client{Transport: tr}})
			if err != nil {
				b.Fatal(err)
			}
			st := mustStore(b, filepath.Join(b.TempDir(), "bench.db"))
			queue(b, st, b.N)
			drainWith(b, st, p, slots)
		})
	}
}

// drainWith drains the b.N jobs queued in st with one lane of slots calls
// at once to p, and reports jobs/s and jobs per commit.
func drainWith(b *testing.B, st *store.Store, p inkwell.Provider, slots int) {
	ctx := context.Background()
	obs := newCounter(b.N)
	lane := worker.New(st, worker.Config{Provider: p, Poll: time.Millisecond, Concurrency: slots, Observer: obs})
	if _, err := lane.Open(ctx); err != nil {
		b.Fatal(err)
	}
	defer lane.Close()
	runCtx, stop := context.WithCancel(ctx)
	runtime.GC()
	b.ResetTimer()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- lane.Run(runCtx) }()
	obs.wait(b)
	elapsed := time.Since(start)
	b.StopTimer()
	stop()
	<-done
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	reportCommits(b, st)
}
