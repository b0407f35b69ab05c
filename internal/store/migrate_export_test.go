package store

import (
	"context"
	"database/sql"
	"fmt"
)

// MigrateUpTo applies this dialect's migrations 1 to n to s's empty
// database, each as Migrate would (its hook included: SQLite 0008 builds
// jobs again), and records them in schema_migrations: a database as an
// older Inkwell left it, for migration tests.
func MigrateUpTo(ctx context.Context, s *Store, n int) error {
	migs, err := loadMigrations(s.dialect.name)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`); err != nil {
			return err
		}
		for _, m := range migs {
			if m.version > n {
				break
			}
			if err := s.runMigration(ctx, tx, m); err != nil {
				return fmt.Errorf("migrate %04d_%s: %w", m.version, m.name, err)
			}
			if _, err := tx.ExecContext(ctx, s.dialect.rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`),
				m.version, m.name, "2026-11-30T00:00:00.000000Z"); err != nil {
				return err
			}
		}
		return nil
	})
}
