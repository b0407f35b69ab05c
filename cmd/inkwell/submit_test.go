package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCLI_SubmitSaysWhatToFix: after a refusal submit names the flag to
// fix and never advises a re-send; only when the outcome is unknown (no
// server answered) does it print the re-send with the same key.
func TestCLI_SubmitSaysWhatToFix(t *testing.T) {
	t.Parallel()
	srv := startServe(t, filepath.Join(t.TempDir(), "inkwell.db"), "--sim-latency", "1h")
	const resend = "re-send it, safely, with the same key"
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"Invalid", []string{"--prompt", "p", "--max-words", "5000"},
			[]string{"(400 invalid): max_words must be between", "fix --max-words", "nothing was stored"}},
		{"KeyReused", []string{"--prompt", "another prompt", "--key", "taken"},
			[]string{"(422 key_reused)", "key taken belongs to a different request", "nothing was stored"}},
	}
	if code, _, stderr := runCLI(t, "submit", "--server", srv.URL, "--prompt", "first", "--key", "taken"); code != 0 {
		t.Fatalf("first submit: exit %d: %s", code, stderr)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, append([]string{"submit", "--server", srv.URL}, tt.args...)...)
			if code != 1 || strings.Contains(stderr, resend) {
				t.Errorf("exit %d, stderr %q; want 1 and no re-send advice", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q; want %q", stderr, w)
				}
			}
		})
	}
	t.Run("OutcomeUnknown", func(t *testing.T) {
		code, _, stderr := runCLI(t, "submit", "--server", "http://"+freeAddr(t), "--prompt", "p", "--key", "lost-1")
		if code != 1 || !strings.Contains(stderr, resend) || !strings.Contains(stderr, "--key lost-1") {
			t.Errorf("exit %d, stderr %q; want 1 and the re-send with --key lost-1", code, stderr)
		}
	})
}
