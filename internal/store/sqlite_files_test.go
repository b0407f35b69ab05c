package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_CheckFiles: a store whose -wal and -shm are deleted under it
// says so (EUNAVAILABLE, naming the files), refuses new jobs while it
// stops, and has copied its commits into the database file, which a new
// open finds whole.
func TestStore_CheckFiles(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	storetest.MustQueue(t, st, "default", "k", 2)
	if err := st.CheckFiles(t.Context()); err != nil {
		t.Fatalf("first look: %v", err)
	}
	if err := st.CheckFiles(t.Context()); err != nil {
		t.Fatalf("nothing changed: %v", err)
	}
	for _, suf := range []string{"-wal", "-shm"} {
		if err := os.Remove(db + suf); err != nil {
			t.Fatal(err)
		}
	}
	err := st.CheckFiles(t.Context())
	if inkwell.ErrorCode(err) != inkwell.EUNAVAILABLE || !strings.Contains(err.Error(), db+"-wal") {
		t.Fatalf("after the -wal and -shm went: %v, want unavailable naming %s-wal", err, db)
	}
	if _, _, err := st.Accept(t.Context(), acceptParams("late", "refused")); inkwell.ErrorCode(err) != inkwell.EUNAVAILABLE {
		t.Errorf("accept while stopping: %v, want unavailable", err)
	}
	again, err := store.Open(t.Context(), db, store.Options{NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	var n int
	if err := again.WriteDB().QueryRow(`SELECT COUNT(*) FROM jobs`).Scan(&n); err != nil || n != 2 {
		t.Errorf("jobs in the database file after the checkpoint: %d (%v), want 2 (and not the refused one)", n, err)
	}
}

// TestStore_DeletedFileIsNotMadeAgain: once the database file is deleted
// under an open store, a connection the store opens later fails, instead
// of making a new, empty database at the path that the next start would
// take for the real one.
func TestStore_DeletedFileIsNotMadeAgain(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	for _, suf := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(db + suf); err != nil {
			t.Fatal(err)
		}
	}
	st.DB().SetMaxIdleConns(0) // every read opens a new connection
	var n int
	if err := st.DB().QueryRow(`SELECT COUNT(*) FROM sqlite_master`).Scan(&n); err == nil {
		t.Errorf("a new connection after the file was deleted read %d schema rows, want an error", n)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("a connection made %s again (%v)", db, err)
	}
}
