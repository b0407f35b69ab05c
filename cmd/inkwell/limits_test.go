package main_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cli "github.com/inkwell/inkwell/cmd/inkwell"
	"github.com/inkwell/inkwell/internal/metrics/metricstest"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

const limitsWait = 60 * time.Second // bound on each wait; normally seconds

// TestServe_ProviderLimitsRefuseNegatives: a negative limit is refused with
// exit 2 and a clear error before anything is created.
func TestServe_ProviderLimitsRefuseNegatives(t *testing.T) {
	t.Parallel()
	bin := lanesBinary(t)
	for _, flag := range []string{"--provider-rpm", "--provider-tpm"} {
		t.Run(flag, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "inkwell.db")
			var stderr bytes.Buffer
			cmd := exec.Command(bin, "serve", "--db", db, "--addr", "127.0.0.1:0", flag, "-1")
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("serve %s -1: %v, want exit 2\n%s", flag, err, stderr.String())
			}
			if !strings.Contains(stderr.String(), "must be 0 (unlimited) or more") {
				t.Errorf("stderr = %q, want it to say the limit must be 0 or more", stderr.String())
			}
			if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("refused serve created %s (stat: %v)", db, err)
			}
		})
	}
}

// TestServe_ProviderLimits runs the real binary against the simulator: a
// lane limited to the simulator's rate draws no more than a handful of
// 429s, and a lane with no limit set is paused by the simulator's 429s,
// which its metrics show.
func TestServe_ProviderLimits(t *testing.T) {
	t.Parallel()
	bin := lanesBinary(t)
	t.Run("WithinTheLimit", func(t *testing.T) {
		t.Parallel()
		const jobs = 40
		sim := simtest.MustStart(t, providersim.Config{RPM: 1200}) // 20 a second
		lane := startLimitedServe(t, bin, sim.URL, "--provider-rpm", "1200")
		for i := range jobs {
			if _, err := lanesPost(lane.URL, fmt.Sprintf("within-%02d", i), fmt.Sprintf(`{"prompt":"line %d","max_words":5}`, i)); err != nil {
				t.Fatal(err)
			}
		}
		storetest.WaitFor(t, limitsWait, "every job finished", func() bool {
			return metricstest.Must(t, lane.URL, `inkwell_provider_limiter_wait_seconds_count`) == jobs &&
				metricstest.Must(t, lane.URL, "inkwell_provider_calls_in_flight") == 0
		})
		if n := metricstest.Must(t, lane.URL, "inkwell_provider_429_total"); n > 3 {
			t.Errorf("inkwell_provider_429_total = %v, want at most 3", n)
		}
		if l := sim.MustLedger(t); l.TotalBills < jobs-3 {
			t.Errorf("simulator billed %d calls, want at least %d", l.TotalBills, jobs-3)
		}
		if n := metricstest.Must(t, lane.URL, "inkwell_provider_paused_until_seconds"); n != 0 {
			t.Errorf("inkwell_provider_paused_until_seconds = %v, want 0 (not paused)", n)
		}
	})
	t.Run("A429PausesTheLane", func(t *testing.T) {
		t.Parallel()
		sim := simtest.MustStart(t, providersim.Config{RPM: 6}) // one call every 10 s: Retry-After 10
		lane := startLimitedServe(t, bin, sim.URL)
		for i := range 4 {
			if _, err := lanesPost(lane.URL, fmt.Sprintf("paused-%d", i), `{"prompt":"a line","max_words":5}`); err != nil {
				t.Fatal(err)
			}
		}
		storetest.WaitFor(t, limitsWait, "a 429 and the pause it starts", func() bool {
			return metricstest.Must(t, lane.URL, "inkwell_provider_429_total") >= 1 &&
				metricstest.Must(t, lane.URL, "inkwell_provider_paused_until_seconds") > float64(time.Now().Unix())
		})
		until := metricstest.Must(t, lane.URL, "inkwell_provider_paused_until_seconds")
		if ahead := time.Until(time.Unix(int64(until), 0)); ahead < 5*time.Second || ahead > 11*time.Second {
			t.Errorf("paused until %v from now, want about the simulator's Retry-After of 10 s", ahead)
		}
		if !strings.Contains(lane.Log(), "provider answered 429: every call of the lane waits until the pause ends") {
			t.Errorf("serve did not log the pause:\n%s", lane.Log())
		}
	})
}

func startLimitedServe(t *testing.T, bin, simURL string, extra ...string) *cli.Child {
	t.Helper()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	args := append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--lane", "limits",
		"--provider", "openai", "--provider-url", simURL, "--provider-timeout", "30s",
		"--concurrency", "32", "--poll", "50ms", "--grace", "5s"}, extra...)
	return cli.StartChild(t, bin, append(os.Environ(), "INKWELL_CRASH_AT="), limitsWait, args...)
}
