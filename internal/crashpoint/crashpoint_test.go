package crashpoint

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		spec    string
		name    string
		nth     int64
		wantErr string
	}{
		{spec: "claim.after-commit", name: ClaimAfterCommit, nth: 1},
		{spec: "complete.before-commit:3", name: CompleteBeforeCommit, nth: 3},
		{spec: "claim.after-comit", wantErr: "unknown crash point"},
		{spec: "claim.after-commit:0", wantErr: "N must be"},
		{spec: "claim.after-commit:x", wantErr: "N must be"},
		{spec: "", wantErr: "unknown crash point"},
	}
	for _, c := range cases {
		name, nth, err := Parse(c.spec)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("Parse(%q) error = %v, want one containing %q", c.spec, err, c.wantErr)
			}
			continue
		}
		if err != nil || name != c.name || nth != c.nth {
			t.Errorf("Parse(%q) = %q, %d, %v; want %q, %d", c.spec, name, nth, err, c.name, c.nth)
		}
	}
}

// TestParse_UnknownListsKnown: a typo is refused with the list of points.
func TestParse_UnknownListsKnown(t *testing.T) {
	t.Parallel()
	_, _, err := Parse("nope")
	for _, n := range Names {
		if err == nil || !strings.Contains(err.Error(), n) {
			t.Fatalf("error %v does not name %s", err, n)
		}
	}
}

const childEnv = "INKWELL_CRASHPOINT_TEST_CHILD"

// TestHit_KillsOnTheNthHit re-executes the test binary armed with
// retry.after-commit:2: the first hit must return, the second must end the
// process by SIGKILL (no deferred code, no exit status of its own).
func TestHit_KillsOnTheNthHit(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		if err := ArmFromEnv(); err != nil {
			os.Exit(3)
		}
		Hit(ClaimAfterCommit) // another point: nothing
		Hit(RetryAfterCommit) // first hit: nothing
		os.Stdout.WriteString("survived first hit\n")
		Hit(RetryAfterCommit) // second hit: SIGKILL
		os.Stdout.WriteString("survived second hit\n")
		os.Exit(0)
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHit_KillsOnTheNthHit$")
	cmd.Env = append(os.Environ(), childEnv+"=1", EnvVar+"="+RetryAfterCommit+":2")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child ended with %v, want death by SIGKILL; output %q", err, out)
	}
	ws := exit.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child status %v, want SIGKILL", ws)
	}
	if got := string(out); got != "survived first hit\n" {
		t.Errorf("child output %q, want only the first hit survived", got)
	}
}

func TestArmFromEnv_RefusesUnknown(t *testing.T) {
	t.Setenv(EnvVar, "accept.befor-commit")
	err := ArmFromEnv()
	if err == nil || !strings.Contains(err.Error(), EnvVar) {
		t.Fatalf("ArmFromEnv() = %v, want a refusal naming %s", err, EnvVar)
	}
}

// BenchmarkHit_Unarmed: the cost of a crash point in production (one
// atomic load).
func BenchmarkHit_Unarmed(b *testing.B) {
	armed.Store(nil)
	for i := 0; i < b.N; i++ {
		Hit(CompleteBeforeCommit)
	}
}
