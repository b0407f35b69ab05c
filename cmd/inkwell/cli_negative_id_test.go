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

// TestCLI_NegativeJobIDIsAnID: "show -1" is a mistaken job id, not an
// unknown flag: the command refuses it in its own words (exit 2, a usage mistake) and
// opens nothing, while a flag's negative value ("status --jobs -5") is
// still the flag's.
func TestCLI_NegativeJobIDIsAnID(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"show", "-1"}, {"retry", "-3"}, {"cancel", "-12", "--db", "x.db"}} {
		dir := t.TempDir()
		code, stdout, stderr := runCLIIn(t, dir, args...)
		cmd := "inkwell " + strings.Join(args, " ")
		if code != 2 || !strings.Contains(stderr, `job ID "`+args[1]+`" must be a positive whole number`) || stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 naming the job ID", cmd, code, stdout, stderr)
		}
		if strings.Contains(stderr, "flag provided but not defined") {
			t.Errorf("%s: read the id as a flag: %s", cmd, stderr)
		}
		if names := dirNames(t, dir); len(names) != 0 {
			t.Errorf("%s left %v behind; a refused id opens nothing", cmd, names)
		}
	}
	code, _, stderr := runCLI(t, "status", "--jobs", "-5")
	if code == 0 || !strings.Contains(stderr, "--jobs -5") {
		t.Errorf("status --jobs -5: exit %d, stderr %q; want the flag's own refusal", code, stderr)
	}
}
