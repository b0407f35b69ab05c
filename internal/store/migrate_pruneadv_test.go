package store_test

import (
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestMigrateAdv_SQLiteRefusedWhileALaneRuns: a SQLite file at schema 18
// whose lane "local" is held by a running (older) Inkwell: a newer
// `inkwell migrate` / `serve` opening it applies migration 0019 under the
// live lane, and only then (serve) finds the lane held. docs/recovery.md
// ("Upgrading") gives the reason a pending migration must not run under a
// live lane: the older lane goes on running under a schema (and provider
// key rules) changed beneath it. That reason holds for a SQLite file as
// for PostgreSQL; the flock of any lane on the file is visible from here.
// Right behaviour: refuse the pending migration with ELANEHELD while any
// lane lock of the file is held, changing nothing.
//
// Found in review: refuseUnderLiveLanes looked at PostgreSQL's advisory
// locks only; on SQLite it now probes the lanes' lock files
// (heldLaneFiles, migrate_lanes_flock.go).
func TestMigrateAdv_SQLiteRefusedWhileALaneRuns(t *testing.T) {
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
