package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
)

// BenchmarkServeRSSCallsInFlight: the resident memory of a real `inkwell
// serve` process holding 1,000 provider calls in flight in one lane
// (--concurrency 1000, the in-process sim provider at 30 s a call).
// The target: under 128 MiB. Run it once:
//
//	go test -run xxx -bench BenchmarkServeRSSCallsInFlight -benchtime 1x ./internal/bench
func BenchmarkServeRSSCallsInFlight(b *testing.B) {
	const calls = 1000
	bin := mustBuildInkwell(b)
	b.Run("provider=sim", func(b *testing.B) {
		benchRSS(b, bin, calls, "--sim-latency", "30s")
	})
	b.Run("provider=openai-to-provider-sim", func(b *testing.B) {
		sim := startProc(b, bin, listenSimRE, "provider-sim", "--addr", "127.0.0.1:0", "--latency", "30s",
			"--ledger", filepath.Join(b.TempDir(), "ledger.db"))
		benchRSS(b, bin, calls, "--provider", "openai", "--provider-url", "http://"+sim.addr)
	})
}

func benchRSS(b *testing.B, bin string, calls int, args ...string) {
	db := filepath.Join(b.TempDir(), "inkwell.db")
	serve := startProc(b, bin, listenRE, append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0",
		"--concurrency", strconv.Itoa(calls)}, args...)...)
	b.ResetTimer()
	for range b.N {
		submitMany(b, "http://"+serve.addr, calls)
		waitRunning(b, mustStore(b, db), calls)
		rss, hwm := procMemory(b, serve.cmd.Process.Pid)
		b.ReportMetric(rss, "RSS-MiB")
		b.ReportMetric(hwm, "peak-RSS-MiB")
	}
}

type proc struct {
	cmd  *exec.Cmd
	addr string
}

// startProc runs bin with args until the benchmark ends and returns it
// once its log names the address it listens on.
func startProc(b *testing.B, bin string, re *regexp.Regexp, args ...string) proc {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "INKWELL_CRASH_AT=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return proc{cmd: cmd, addr: listenAddr(b, re, stderr)}
}

var (
	listenRE    = regexp.MustCompile(`msg="http listening" addr=(\S+)`)
	listenSimRE = regexp.MustCompile(`msg=listening .*addr=(\S+)`)
)

func listenAddr(b *testing.B, re *regexp.Regexp, stderr interface{ Read([]byte) (int, error) }) string {
	b.Helper()
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			go func() {
				for sc.Scan() {
				}
			}()
			return m[1]
		}
	}
	b.Fatal("the process exited before it listened")
	return ""
}

func submitMany(b *testing.B, url string, n int) {
	b.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			req, _ := http.NewRequest(http.MethodPost, url+"/v1/jobs", strings.NewReader(fmt.Sprintf(`{"prompt":"call %d"}`, i)))
			req.Header.Set("Idempotency-Key", fmt.Sprintf("rss-%d", i))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				b.Errorf("POST: %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
}

func waitRunning(b *testing.B, st *store.Store, n int) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var running int
		if err := st.DB().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM job_attempts WHERE status = 'running'`).Scan(&running); err != nil {
			b.Fatal(err)
		}
		if running == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d calls in flight after 2m, want %d", running, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procMemory reads a process's resident and peak resident memory in MiB.
func procMemory(b *testing.B, pid int) (rss, hwm float64) {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Skipf("no /proc/%d/status (Linux only): %v", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			hwm = kb / 1024
		}
	}
	return rss, hwm
}
