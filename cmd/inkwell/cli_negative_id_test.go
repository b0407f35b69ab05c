package main

import (
	"strings"
	"testing"
)

// A negative job id after a bool flag ("show --json -1") is the same
// mistake as "show -1" and should be refused in the same words, not as an
// unknown flag. Flags taking a value keep their negative values.
func TestCLI_NegativeJobIDAfterABoolFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"show", "--json", "-1"}, {"show", "-1", "--json"}} {
		code, stdout, stderr := runCLIIn(t, t.TempDir(), args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, `job ID "-1" must be a positive whole number`) {
			t.Errorf("inkwell %s: exit %d, stderr %q; want the job-id refusal", strings.Join(args, " "), code, stderr)
		}
	}
}

// Values of flags are never taken as positional arguments.
func TestCLI_NegativeFlagValuesStayTheFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"status", "--jobs", "-7"}, {"status", "-jobs", "-7"}, {"status", "-jobs=-7"}, {"status", "--json", "--jobs", "-7"},
		{"status", "--db", "x.db", "--jobs", "-7"},
	} {
		code, _, stderr := runCLIIn(t, t.TempDir(), args...)
		if code != 2 || !strings.Contains(stderr, "--jobs -7") {
			t.Errorf("inkwell %s: exit %d, stderr %q; want --jobs' own refusal", strings.Join(args, " "), code, stderr)
		}
	}
}
