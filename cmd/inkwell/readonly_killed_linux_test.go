package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// status as a user who may read but not write the database and its
// directory, after serve was killed (SIGKILL: its -wal and -shm stay), and
// for a copy of the file and its -wal without the -shm. Each should read
// the committed job, or say plainly why not; never tell the operator the
// file holds no Inkwell schema and to migrate it. (The copy without its
// -shm is refused by SQLite, "unable to open database file (14)", which
// the code documents: "the -shm beside it must be there too".)
func TestCLI_ReadOnlyShowAfterAKilledServe(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	dir, asNobody := nobodyCLI(t)
	db := filepath.Join(dir, "inkwell.db")
	srv := startServe(t, db, "--sim-latency", "30s")
	submit(t, srv.URL, "ro7-1", `{"prompt":"read me"}`)
	_ = srv.Signal(t, syscall.SIGKILL)
	for _, side := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(db + side); err != nil {
			t.Fatalf("after SIGKILL: %v", err)
		}
	}
	// A copy without the -shm (cp of the file and its -wal).
	cp := filepath.Join(dir, "copy")
	if err := os.Mkdir(cp, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, db, filepath.Join(cp, "inkwell.db"), 0o644)
	copyFile(t, db+"-wal", filepath.Join(cp, "inkwell.db-wal"), 0o644)

	for _, path := range []string{db, filepath.Join(cp, "inkwell.db")} {
		code, stdout, stderr := asNobody("show", "1", "--db", path)
		if path == db && (code != 0 || !strings.Contains(stdout, "read me")) {
			t.Errorf("show 1 as nobody on %s: exit %d, stdout %q, stderr %q; want the job", path, code, stdout, stderr)
		}
		if strings.Contains(stderr, "holds no Inkwell schema") {
			t.Errorf("show 1 as nobody on %s told to migrate: %q", path, stderr)
		}
	}
}
