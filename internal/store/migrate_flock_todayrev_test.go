package store_test

import (
	"os"
	"testing"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Today's flock probe (heldLaneFiles): a SQLite migration is refused only
// while a lane of THIS file holds its lock file.

// TestMigrateTodayrev_StaleLockFileDoesNotRefuse (passes): a lane lock
// file left behind by a lane that stopped (released, nobody holds it) does
// not refuse the migration; the file at schema 18 is migrated.
func TestMigrateTodayrev_StaleLockFileDoesNotRefuse(t *testing.T) {
	t.Parallel()
	b := storetest.Backend{Name: "sqlite", DSN: storetest.SQLitePath(t)}
	dsn, old := openAtVersion(t, b, 18)
	l, err := old.LockLane(t.Context(), "local")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old.Path() + ".lane-local.lock"); err != nil {
		t.Fatalf("no stale lock file left behind: %v", err)
	}
	s, err := store.Open(t.Context(), dsn, store.Options{Logger: storetest.TestLogger(t)})
	if err != nil {
		t.Fatalf("migrate with a stale (unheld) lane lock file: %v; want it migrated", err)
	}
	s.Close()
}

// TestMigrateTodayrev_OtherFilesLaneDoesNotRefuse (passes): a lane held on
// another database whose name starts with this one's (inkwell.db2 beside
// inkwell.db) does not refuse this file's migration.
func TestMigrateTodayrev_OtherFilesLaneDoesNotRefuse(t *testing.T) {
	t.Parallel()
	b := storetest.Backend{Name: "sqlite", DSN: storetest.SQLitePath(t)}
	dsn, old := openAtVersion(t, b, 18)
	other := storetest.MustOpen(t, old.Path()+"2", store.Options{})
	l, err := other.LockLane(t.Context(), "local")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	s, err := store.Open(t.Context(), dsn, store.Options{Logger: storetest.TestLogger(t)})
	if err != nil {
		t.Fatalf("migrate %s while a lane of %s2 runs: %v; want it migrated", dsn, old.Path(), err)
	}
	s.Close()
}
