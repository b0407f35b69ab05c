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
