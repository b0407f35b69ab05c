package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"github.com/inkwell/inkwell"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// Migrate applies every pending migration of this dialect in one
// transaction (all or none) and records each in schema_migrations. A legacy
// single-table database is adopted in place first (see legacy.go). A
// database migrated by a newer Inkwell is refused, not guessed at.
func (s *Store) Migrate(ctx context.Context) error {
	migs, err := loadMigrations(s.dialect.name)
	if err != nil {
		return err
	}
	const create = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`
	if s.schemaCurrent(ctx) {
		// Nothing to apply: no write transaction, so a start does not wait
		// for the write lock (a stopped process may hold it; the lane
		// lock's refusal then says who, instead of "database is busy").
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if s.dialect.migrateLock != "" {
			if _, err := tx.ExecContext(ctx, s.dialect.migrateLock); err != nil {
				return fmt.Errorf("migrate: lock: %w", err)
			}
		}
		legacy, err := s.isLegacy(ctx, tx)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, create); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		applied, err := s.appliedVersions(ctx, tx)
		if err != nil {
			return err
		}
		if newest := migs[len(migs)-1].version; maxVersion(applied) > newest {
			return inkwell.Errorf(inkwell.EINVALID, "database schema is at version %d, newer than this inkwell knows (%d): run a newer inkwell", maxVersion(applied), newest)
		}
		if pending(migs, applied) {
			// Another process may have applied them while this one waited
			// for the migration lock: only pending work is refused.
			if err := s.refuseUnderLiveLanes(ctx, tx); err != nil {
				return err
			}
		}
		if legacy {
			if err := s.renameLegacy(ctx, tx); err != nil {
				return err
			}
		}
		for _, m := range migs {
			if applied[m.version] {
				continue
			}
			if err := s.runMigration(ctx, tx, m); err != nil {
				return fmt.Errorf("migrate %04d_%s: %w", m.version, m.name, err)
			}
			// The statement reads the database's clock itself (clockOr): a
			// transaction never asks the pool for the time (clock_rule_test.go).
			if _, err := tx.ExecContext(ctx, s.dialect.rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, `+s.dialect.clockOr("$3")+`)`),
				m.version, m.name, s.clockArg()); err != nil {
				return fmt.Errorf("migrate %04d: record: %w", m.version, err)
			}
			s.log.InfoContext(ctx, "migration applied", "version", m.version, "name", m.name)
		}
		if legacy {
			return s.copyLegacy(ctx, tx)
		}
		return nil
	})
}

// pending reports whether some migration of migs is not applied yet.
func pending(migs []migration, applied map[int]bool) bool {
	for _, m := range migs {
		if !applied[m.version] {
			return true
		}
	}
	return false
}

// refuseUnderLiveLanes refuses to migrate a database while a lane holds
// its lock on it: that lane runs the Inkwell the schema is being changed
// under. Migration 0005, for one, changes the provider key of every job
// from then on: a lane of the older Inkwell would call the provider under
// the old key, and a retry by a newer lane under the new one, which a
// provider that honours keys would bill again. Stop every lane, migrate,
// start the new ones. On PostgreSQL the lanes' advisory locks say who
// holds one; on SQLite the flocks on the lock files beside the file (a
// serve migrates at start, before it takes its own).
func (s *Store) refuseUnderLiveLanes(ctx context.Context, tx *sql.Tx) error {
	if s.dialect.lockKind == lockFlock {
		held, err := heldLaneFiles(s.path)
		if err != nil {
			return fmt.Errorf("migrate: look for live lanes: %w", err)
		}
		if len(held) > 0 {
			return inkwell.Errorf(inkwell.ELANEHELD, "migrate: lanes are running on this file (%s hold their lock files %s.lane-NAME.lock; "+
				"see SELECT * FROM lane_liveness): stop every inkwell serve of the older version, then migrate (or start the new one) again; "+
				"nothing was changed", strings.Join(held, ", "), s.path)
		}
		return nil
	}
	if s.dialect.lockKind != lockAdvisory {
		return nil
	}
	const q = `SELECT COALESCE(string_agg(DISTINCT pid::text, ', '), '') FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid = ($1::int8 & 4294967295)::oid AND pid <> pg_backend_pid()`
	var pids string
	if err := tx.QueryRowContext(ctx, q, laneLockNS).Scan(&pids); err != nil {
		return fmt.Errorf("migrate: look for live lanes: %w", err)
	}
	if pids != "" {
		return inkwell.Errorf(inkwell.ELANEHELD, "migrate: lanes are running on this database (lock sessions of backend pid %s; "+
			"see SELECT * FROM lane_liveness): stop every inkwell serve of the older version, then migrate (or start the new one) again; "+
			"nothing was changed", pids)
	}
	return nil
}

// schemaCurrent reports, from a read alone, whether every migration this
// Inkwell knows has been applied, and no other. Any doubt (no table yet, a
// read error) says no.
func (s *Store) schemaCurrent(ctx context.Context) bool {
	migs, err := loadMigrations(s.dialect.name)
	if err != nil || len(migs) == 0 {
		return false
	}
	var n, top sql.NullInt64
	err = s.db.QueryRowContext(ctx, `SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &top)
	return err == nil && n.Int64 == int64(len(migs)) && top.Int64 == int64(migs[len(migs)-1].version)
}

// SchemaVersion is the highest applied migration, 0 for an empty database.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	err := s.rdb.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return int(v.Int64), nil
}

func (s *Store) appliedVersions(ctx context.Context, tx *sql.Tx) (map[int]bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("migrate: read versions: %w", err)
	}
	defer rows.Close()
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		applied[v] = true
	}
	return applied, rows.Err()
}

func loadMigrations(dialect string) ([]migration, error) {
	dir := path.Join("migrations", dialect)
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, fmt.Errorf("migrations for %s: %w", dialect, err)
	}
	var migs []migration
	for _, e := range entries {
		base := strings.TrimSuffix(e.Name(), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %s: want NNNN_name.sql", e.Name())
		}
		body, err := migrationFS.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		migs = append(migs, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(migs, func(i, j int) bool { return migs[i].version < migs[j].version })
	return migs, nil
}

func maxVersion(applied map[int]bool) int {
	top := 0
	for v := range applied {
		top = max(top, v)
	}
	return top
}
