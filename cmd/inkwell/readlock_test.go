package main_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestCLI_ReadCommandsUnderAWriteLock: while another process holds
// SQLite's write lock (BEGIN IMMEDIATE, as a stuck writer would), the
// operator's read-only commands still answer: they are how the holder is
// diagnosed. Opening the database used to set auto_vacuum, which waits
// for the write lock, so they failed as busy after the busy timeout.
func TestCLI_ReadCommandsUnderAWriteLock(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	storetest.MustQueue(t, st, "default", "k", 1)
	st.Close()
	bin := lanesBinary(t)
	startWriteLockHolder(t, db)
	for _, args := range [][]string{
		{"status"}, {"show", "1"}, {"audit"}, {"tokens", "list"}, {"accounts", "list"},
	} {
		out, err := exec.Command(bin, append(args, "--db", db)...).CombinedOutput()
		if err != nil {
			t.Errorf("inkwell %s while another process holds the write lock: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestServe_BusyNamesTheWriteLockHolder: serve cannot start while a
// stopped process (SIGSTOP) holds SQLite's write lock; its refusal must
// name that process and its state, not only say "busy".
func TestServe_BusyNamesTheWriteLockHolder(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the holder is read from /proc/locks: Linux only")
	}
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	st.Close()
	bin := lanesBinary(t)
	holder := startWriteLockHolder(t, db)
	if err := holder.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "serve", "--db", db, "--addr", "127.0.0.1:0").CombinedOutput()
	if err == nil {
		t.Fatalf("serve started while another process held the write lock:\n%s", out)
	}
	want := fmt.Sprintf(`write_lock_held_by="pid %d (`, holder.Process.Pid)
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "stopped (T)") {
		t.Errorf("serve's refusal does not name the stopped holder (want %s… stopped (T)):\n%s", want, out)
	}
}
