package main_test

import (
	"os/exec"
	"path/filepath"
	"strings"
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
