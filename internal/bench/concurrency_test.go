package bench

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
)

// BenchmarkLaneConcurrency: jobs per second drained by one lane on SQLite
// (synchronous=FULL) with N calls in flight, against the in-process sim
// provider at a given latency. b.N jobs are queued first, then the lane
// drains them; run with -benchtime Nx to pick how many. The
// targets: latency 0 with 16 slots ≥ 5,000 jobs/s; 200 ms with 64 slots
// ≥ 250 jobs/s (the limit is 320); 20 s with 512 slots ≥ 24 jobs/s.
func BenchmarkLaneConcurrency(b *testing.B) {
	for _, tc := range []struct {
		latency time.Duration
		slots   int
	}{{0, 1}, {0, 16}, {0, 64}, {200 * time.Millisecond, 64}, {20 * time.Second, 512}} {
		b.Run(fmt.Sprintf("latency=%v/slots=%d", tc.latency, tc.slots), func(b *testing.B) {
			benchDrain(b, tc.latency, tc.slots)
		})
	}
}

func benchDrain(b *testing.B, latency time.Duration, slots int) {
	st := mustStore(b, filepath.Join(b.TempDir(), "bench.db"))
	queue(b, st, b.N)
	drainQueued(b, st, latency, slots)
}

// drainQueued drains the b.N jobs queued in st with one lane of slots
// calls at once to the in-process sim provider (drainWith).
func drainQueued(b *testing.B, st *store.Store, latency time.Duration, slots int) {
	drainWith(b, st, provider.NewSim(latency), slots)
}

// BenchmarkAcceptToClaimInFlight is BenchmarkAcceptToClaim with 64 calls
// in flight: 200 requests per second over HTTP to a lane with 96 slots and
// a 320 ms provider, so about 64 calls are running while each new job is
// accepted and claimed. The target: p50 ≤ 2 ms.
//
//	go test -run xxx -bench BenchmarkAcceptToClaimInFlight -benchtime 2000x ./internal/bench
func BenchmarkAcceptToClaimInFlight(b *testing.B) {
	benchAcceptToClaim(b, provider.NewSim(320*time.Millisecond), 96)
}
