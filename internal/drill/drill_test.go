package drill

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// inkwellBin is the real inkwell binary, built once in TestMain: the
// drill's children are real processes, so the test needs the real thing.
var inkwellBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "inkwell-drill-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	inkwellBin = filepath.Join(dir, "inkwell")
	code := 1
	if err := buildInkwell(inkwellBin); err != nil {
		fmt.Fprintf(os.Stderr, "build inkwell for the drill tests: %v\n", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildInkwell(out string) error {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if p, err := exec.LookPath("go"); err == nil {
		gobin = p
	}
	cmd := exec.Command(gobin, "build", "-o", out, "github.com/inkwell/inkwell/cmd/inkwell")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s", err, stderr.String())
	}
	return nil
}

// TestDrill_Points runs the real drill, in CI mode, over three points
// whose windows differ: before the client's answer, between the paid call
// and the commit, and after a retry's commit.
func TestDrill_Points(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rep, err := Run(ctx, Config{
		Bin: inkwellBin, WorkDir: t.TempDir(), Mode: ModePoints, Short: true, Out: &out,
		Points: []string{crashpoint.AcceptAfterCommit, crashpoint.ProviderAfterCall, crashpoint.RetryAfterCommit},
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Log(out.String())
	if rep.Failed() {
		var sum bytes.Buffer
		rep.WriteSummary(&sum)
		t.Fatalf("drill failed:\n%s", sum.String())
	}
	if got := len(rep.Timelines); got != 3 {
		t.Fatalf("timelines = %d, want 3", got)
	}
	for _, tl := range rep.Timelines {
		if tl.Crash < 0 || tl.Recovered < 0 || tl.Final < 0 {
			t.Errorf("%s: snapshots after crash/recovery/final at %d/%d/%d, want all three", tl.Name, tl.Crash, tl.Recovered, tl.Final)
		}
	}
	t.Run("AcceptAfterCommit", func(t *testing.T) {
		tl := rep.Timelines[0]
		if got := tl.Snaps[tl.Crash].Jobs; len(got) != 1 || got[0].Status != "queued" {
			t.Errorf("after crash: jobs %+v, want one queued job", got)
		}
		first, last := tl.Requests[0], tl.Requests[len(tl.Requests)-1]
		if first.Outcome != OutcomeUnknown {
			t.Errorf("first request = %s, want an unknown outcome (serve died before answering)", first)
		}
		if last.Outcome != OutcomeOK || last.Status != 200 || last.JobID != tl.Snaps[tl.Final].Jobs[0].ID {
			t.Errorf("last request = %s, want ok 200 naming the one job", last)
		}
	})
	t.Run("ProviderAfterCall", func(t *testing.T) {
		tl := rep.Timelines[1]
		calls, bills, _ := tl.billsOf(tl.Snaps[tl.Final])
		if calls != 2 || bills != 1 {
			t.Errorf("provider calls/bills = %d/%d, want 2/1: the retry is answered from the simulator's record", calls, bills)
		}
		if got := attemptsCell(tl.Snaps[tl.Final]); got != "#1 failed (worker restarted), #2 done" {
			t.Errorf("final attempts = %q", got)
		}
	})
	t.Run("RetryAfterCommit", func(t *testing.T) {
		tl := rep.Timelines[2]
		if got := tl.Snaps[tl.Crash].Jobs; len(got) != 1 || got[0].Status != "queued" {
			t.Errorf("after crash: jobs %+v, want the retried job queued", got)
		}
	})
	t.Run("Markdown", func(t *testing.T) {
		var md bytes.Buffer
		if err := rep.WriteMarkdown(&md); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"# Crash timeline", "## provider.after-call", "| provider calls / bills | 1 / 1 | 1 / 1 | 2 / 1 |", "Every scenario passed"} {
			if !strings.Contains(md.String(), want) {
				t.Errorf("markdown lacks %q", want)
			}
		}
	})
}

// TestDrill_Random runs one short random run and replays nothing but its
// plan: the run must pass and print its seed.
func TestDrill_Random(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rep, err := Run(ctx, Config{Bin: inkwellBin, WorkDir: t.TempDir(), Mode: ModeRandom, Short: true, Runs: 1, Seed: 7, Out: &out})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Log(out.String())
	if rep.Failed() {
		var sum bytes.Buffer
		rep.WriteSummary(&sum)
		t.Fatalf("random drill failed:\n%s", sum.String())
	}
	if !strings.Contains(out.String(), "seed 7") {
		t.Errorf("output does not name the seed:\n%s", out.String())
	}
	if final := rep.Timelines[0].Snaps[rep.Timelines[0].Final]; len(final.Jobs) == 0 {
		t.Errorf("random run made no jobs")
	}
}

// TestDrill_Postgres runs two points with a fresh PostgreSQL database per
// scenario, made (and dropped) by the drill on the test server.
func TestDrill_Postgres(t *testing.T) {
	t.Parallel()
	url := os.Getenv(storetest.PostgresEnv)
	if url == "" {
		t.Skip("PostgreSQL drill skipped: set " + storetest.PostgresEnv + "=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable to run it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rep, err := Run(ctx, Config{
		Bin: inkwellBin, WorkDir: t.TempDir(), DB: url, Mode: ModePoints, Short: true, Out: &out,
		Points: []string{crashpoint.CompleteBeforeCommit, crashpoint.RecoverBeforeCommit},
	})
	if err != nil {
		t.Fatalf("Run with %s set: %v", storetest.PostgresEnv, err)
	}
	t.Log(out.String())
	if rep.DB != "postgres" || rep.Failed() {
		var sum bytes.Buffer
		rep.WriteSummary(&sum)
		t.Fatalf("postgres drill on %s:\n%s", rep.DB, sum.String())
	}
}

func TestRun_BadConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"NoBinary":      {},
		"MissingBinary": {Bin: filepath.Join(t.TempDir(), "nope")},
		"UnknownPoint":  {Bin: inkwellBin, Points: []string{"claim.before-commit"}},
		"BadMode":       {Bin: inkwellBin, Mode: "chaos"},
		"DBNotAURL":     {Bin: inkwellBin, DB: "mysql://x", WorkDir: t.TempDir()},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := Run(context.Background(), cfg); err == nil {
				t.Errorf("Run(%+v) = nil error, want a refusal", cfg)
			}
		})
	}
}
