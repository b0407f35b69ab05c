package store_test

import (
	"os"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// A pending migration of a SQLite file is refused while a lane of THIS
// file holds its lock file (heldLaneFiles, migrate_lanes_flock.go), and
// only then.

// TestMigrate_SQLiteRefusedWhileALaneRuns: a SQLite file at schema 18
// whose lane "local" is held by a running (older) Inkwell: a newer
// `inkwell migrate` / `serve` opening it would apply migration 0019 under
// the live lane, and only then (serve) find the lane held. docs/recovery.md
// ("Upgrading") gives the reason a pending migration must not run under a
// live lane: the older lane goes on running under a schema (and provider
// key rules) changed beneath it. That reason holds for a SQLite file as
// for PostgreSQL; the flock of any lane on the file is visible from here.
// Right behaviour: refuse the pending migration with ELANEHELD while any
// lane lock of the file is held, changing nothing.
//
// refuseUnderLiveLanes once looked at PostgreSQL's advisory locks only; on
// SQLite it now probes the lanes' lock files (heldLaneFiles,
// migrate_lanes_flock.go).
func TestMigrate_SQLiteRefusedWhileALaneRuns(t *testing.T) {
	t.Parallel()
	b := storetest.Backend{Name: "sqlite", DSN: storetest.SQLitePath(t)}
	dsn, old := openAtVersion(t, b, 18)
	l, err := old.LockLane(t.Context(), "local")
	if err != nil {
		t.Fatalf("the older Inkwell's lane: %v", err)
	}
	defer l.Release()
	s, err := store.Open(t.Context(), dsn, store.Options{Logger: storetest.TestLogger(t)})
	if err == nil {
		defer s.Close()
	}
	if inkwell.ErrorCode(err) != inkwell.ELANEHELD {
		v, _ := old.SchemaVersion(t.Context())
		t.Errorf("migrate of a SQLite file under a live lane: %v (schema now %d); want ELANEHELD and schema still 18", err, v)
	}
}

// TestMigrate_SQLiteStaleLaneLockFileDoesNotRefuse: a lane lock file left
// behind by a lane that stopped (released, nobody holds it) does not
// refuse the migration; the file at schema 18 is migrated.
func TestMigrate_SQLiteStaleLaneLockFileDoesNotRefuse(t *testing.T) {
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

// TestMigrate_SQLiteOtherFilesLaneDoesNotRefuse: a lane held on another
// database whose name starts with this one's (inkwell.db2 beside
// inkwell.db) does not refuse this file's migration.
func TestMigrate_SQLiteOtherFilesLaneDoesNotRefuse(t *testing.T) {
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
