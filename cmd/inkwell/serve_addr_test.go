package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServe_BadAddrIsAUsageError: an --addr that is not host:port is
// refused with exit 2, saying so, before any database file is made.
func TestServe_BadAddrIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"http://127.0.0.1:8080", "127.0.0.1", "127.0.0.1:http8080", "127.0.0.1:70000"} {
		db := filepath.Join(t.TempDir(), "x.db")
		code, _, stderr := runCLI(t, "serve", "--db", db, "--addr", addr)
		if code != 2 || !strings.Contains(stderr, "is not host:port") {
			t.Errorf("serve --addr %s: exit %d, %q; want 2 saying it is not host:port", addr, code, stderr)
		}
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Errorf("serve --addr %s made %s (%v)", addr, db, err)
		}
	}
}

// TestServe_BadJobLifeFlagsAreUsageErrors: automatic retry's, retention's
// and admission's flags out of range are exit 2, saying which, before any
// file is made.
func TestServe_BadJobLifeFlagsAreUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ flag, value, says string }{
		{"--max-attempts", "0", "--max-attempts must be at least 1"},
		{"--max-rate-limited", "0", "--max-rate-limited must be at least 1"},
		{"--retry-base", "0s", "--retry-base and --retry-cap must be positive"},
		{"--retry-cap", "100ms", "must not be shorter than --retry-base"},
		{"--retention", "-1h", "--retention must be 0"},
		{"--max-queued", "-1", "--max-queued must be 0"},
	} {
		db := filepath.Join(t.TempDir(), "x.db")
		code, _, stderr := runCLI(t, "serve", "--db", db, tc.flag, tc.value)
		if code != 2 || !strings.Contains(stderr, tc.says) {
			t.Errorf("serve %s %s: exit %d, %q; want 2 saying %q", tc.flag, tc.value, code, stderr, tc.says)
		}
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Errorf("serve %s %s made %s (%v)", tc.flag, tc.value, db, err)
		}
	}
}
