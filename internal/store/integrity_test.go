package store_test

import (
	"testing"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// On PostgreSQL with amcheck installed, Integrity checks every index of
// the schema in a snapshot and leaves the caller's transaction usable for
// the reads that follow it (the drill reads the kept counts next), even
// while another transaction of the cluster that began before the indexes
// were made is still open, which makes amcheck refuse the heap check in a
// snapshot (SQLSTATE 40001) for an index with indcheckxmin set.
func TestStore_IntegrityPostgres(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		if s.Dialect() != "postgres" {
			t.Skip("SQLite's checks are its own pragmas")
		}
		ctx := t.Context()
		if _, err := s.WriteDB().ExecContext(ctx, `CREATE EXTENSION IF NOT EXISTS amcheck`); err != nil {
			t.Skipf("amcheck is not available here: %v", err)
		}
		// An index made while an older transaction holds an xid, on a table
		// with a HOT-updated row: PostgreSQL sets indcheckxmin on it.
		old, err := s.WriteDB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer old.Rollback()
		if _, err := old.ExecContext(ctx, `SELECT txid_current()`); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`CREATE TABLE zz_hot (id int PRIMARY KEY, a int, b int)`,
			`INSERT INTO zz_hot VALUES (1, 1, 1)`,
			`UPDATE zz_hot SET b = 2 WHERE id = 1`, // HOT: b has no index yet
			`CREATE INDEX zz_hot_b ON zz_hot (b)`,
		} {
			if _, err := s.WriteDB().ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		var checkXmin bool
		if err := s.WriteDB().QueryRowContext(ctx, `SELECT indcheckxmin FROM pg_index WHERE indexrelid = 'zz_hot_b'::regclass`).Scan(&checkXmin); err != nil {
			t.Fatal(err)
		}
		tx, err := s.BeginSnapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		problems, err := s.Integrity(ctx, tx)
		if err != nil || len(problems) > 0 {
			t.Errorf("integrity of a sound database: problems %v, err %v; want none (indcheckxmin on the new index: %v)", problems, err, checkXmin)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM job_counts`).Scan(&n); err != nil {
			t.Errorf("the snapshot after Integrity: %v; want it still usable", err)
		}
		if !checkXmin {
			t.Logf("indcheckxmin was not set here: only the plain path was exercised")
		}
	})
}
