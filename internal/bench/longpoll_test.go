package bench

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/client"
	"github.com/inkwell/inkwell/internal/metrics/metricstest"
)

// BenchmarkServeLongPolls: a real `inkwell serve` (SQLite) with 10,000
// clients each waiting in GET /v1/jobs/{id}?wait=60s on its own queued
// job (Go clients' Wait). It reports the server's resident memory before
// they come and with all of them waiting, its CPU while they wait (the
// SQLite watch and the Go runtime; nothing per waiter), then ends every
// job from another process (`inkwell cancel`, the data_version path) and
// reports the CPU and wall time until all 10,000 have their answer. Run
// it once:
//
//	go test -run xxx -bench BenchmarkServeLongPolls -benchtime 1x ./internal/bench
func BenchmarkServeLongPolls(b *testing.B) {
	const clients = 10000
	bin := mustBuildInkwell(b)
	db := filepath.Join(b.TempDir(), "inkwell.db")
	serve := startProc(b, bin, listenRE, "serve", "--db", db, "--addr", "127.0.0.1:0", "--sim-latency", "1h", "--concurrency", "1")
	url := "http://" + serve.addr
	pid := serve.cmd.Process.Pid
	submitMany(b, url, clients)
	b.ResetTimer()
	for range b.N {
		before, _ := procMemory(b, pid) // 10,000 jobs queued, nobody waiting
		answered := longPollAll(b, url, clients)
		waitGauge(b, url, "inkwell_long_polls_waiting", clients)
		rss, hwm := procMemory(b, pid)
		cpu0, t0 := cpuSeconds(b, pid), time.Now()
		time.Sleep(10 * time.Second) // a quiet window: what waiting costs
		idle := (cpuSeconds(b, pid) - cpu0) / time.Since(t0).Seconds()
		cpu1, t1 := cpuSeconds(b, pid), time.Now()
		cancelAll(b, bin, db, clients)
		answered.Wait()
		b.ReportMetric(before, "RSS-MiB-before")
		b.ReportMetric(rss, "RSS-MiB")
		b.ReportMetric(hwm, "peak-RSS-MiB")
		b.ReportMetric(idle*1000, "CPU-ms/s-waiting")
		b.ReportMetric(cpuSeconds(b, pid)-cpu1, "CPU-s-to-end-all")
		b.ReportMetric(time.Since(t1).Seconds(), "s-to-end-all")
	}
}

// longPollAll starts one client per job 1..n, each waiting with the Go
// client's Wait (long-polls of 60 s, asked again when one runs out or its
// connection is cut), each on its own connection; the WaitGroup is done
// when every one has seen its job end.
func longPollAll(b *testing.B, url string, n int) *sync.WaitGroup {
	tr := &http.Transport{MaxIdleConnsPerHost: n}
	b.Cleanup(tr.CloseIdleConnections)
	c := client.New(url, client.WithHTTPClient(&http.Client{Transport: tr}), client.WithPollWait(time.Minute))
	var wg sync.WaitGroup
	for id := 1; id <= n; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			if d, err := c.Wait(ctx, int64(id)); err != nil || d.Job.Status != inkwell.StatusFailed {
				b.Errorf("wait for job %d: %s, %v", id, d.Job.Status, err)
			}
		}()
	}
	return &wg
}

// waitGauge waits until serve's /metrics shows gauge at want (a client
// asking again after its poll ran out is away for a moment: the next look
// sees it back).
func waitGauge(b *testing.B, url, gauge string, want int) {
	b.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if v, ok := metricstest.Sample(url, gauge); ok && int(v) == want {
			return
		}
		if time.Now().After(deadline) {
			v, _ := metricstest.Sample(url, gauge)
			b.Fatalf("%s = %v after 3m, want %d", gauge, v, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cancelAll ends jobs 1..n from another process.
func cancelAll(b *testing.B, bin, db string, n int) {
	b.Helper()
	args := []string{"cancel", "--db", db}
	for id := 1; id <= n; id++ {
		args = append(args, strconv.Itoa(id))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "INKWELL_CRASH_AT=")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("inkwell cancel: %v\n%.2000s", err, out)
	}
}

// cpuSeconds is a process's user+system CPU time so far (procCPU).
func cpuSeconds(b *testing.B, pid int) float64 {
	b.Helper()
	ns, ok := procCPU(pid)
	if !ok {
		b.Skipf("no /proc/%d/stat (Linux only)", pid)
	}
	return time.Duration(ns).Seconds()
}

// mustBuildInkwell builds ./cmd/inkwell into the benchmark's temporary
// directory and returns its path.
func mustBuildInkwell(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "inkwell")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/inkwell").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
