package store

import (
	"context"
	"database/sql"
	"fmt"
)

// The old Inkwell kept one table:
//
//	CREATE TABLE jobs (id INTEGER PRIMARY KEY, prompt TEXT NOT NULL,
//	  status TEXT NOT NULL, error TEXT, created_at TEXT, started_at TEXT,
//	  finished_at TEXT)
//
// Adoption happens inside the first migration's transaction: the old table
// is renamed aside, the schema is created, every row is copied with the key
// legacy-<id> and its prompt in the payload, and the old table is dropped.
// Statuses, errors and timestamps are copied exactly as they were; no
// attempt row is made here. Startup recovery then back-fills one failed
// attempt for each running legacy job, and for no other.

// LegacyRequestHash marks adopted rows: the old table kept no request hash,
// so a re-send of a legacy key with any body is refused rather than guessed.
const LegacyRequestHash = "legacy"

// isLegacy reports whether this is an old single-table database: a jobs
// table with a prompt column and no schema_migrations.
func (s *Store) isLegacy(ctx context.Context, tx *sql.Tx) (bool, error) {
	if !s.dialect.legacy {
		return false, nil
	}
	const q = `SELECT
		(SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'),
		(SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name = 'prompt')`
	var migrations, prompt int
	if err := tx.QueryRowContext(ctx, q).Scan(&migrations, &prompt); err != nil {
		return false, fmt.Errorf("detect legacy schema: %w", err)
	}
	return migrations == 0 && prompt == 1, nil
}

func (s *Store) renameLegacy(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `ALTER TABLE jobs RENAME TO legacy_jobs`); err != nil {
		return fmt.Errorf("adopt legacy jobs: rename: %w", err)
	}
	return nil
}

func (s *Store) copyLegacy(ctx context.Context, tx *sql.Tx) error {
	// The queued ones take turns in id order (claim_fair.go): all are the
	// default account's, its first, second, … queued jobs.
	const copyRows = `INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, error, lane, created_at, started_at, finished_at, claim_turn)
		SELECT id, 'legacy-' || id, ?1, json_object('prompt', prompt), status, error, NULL, created_at, started_at, finished_at,
			CASE WHEN status = 'queued' THEN ROW_NUMBER() OVER (PARTITION BY status ORDER BY id) - 1 ELSE 0 END
		FROM legacy_jobs ORDER BY id`
	res, err := tx.ExecContext(ctx, copyRows, LegacyRequestHash)
	if err != nil {
		return fmt.Errorf("adopt legacy jobs: copy (a status other than queued, running, failed, done is refused): %w", err)
	}
	n, _ := res.RowsAffected()
	if _, err := tx.ExecContext(ctx, `DROP TABLE legacy_jobs`); err != nil {
		return fmt.Errorf("adopt legacy jobs: drop old table: %w", err)
	}
	s.log.InfoContext(ctx, "legacy database adopted", "jobs", n)
	return nil
}
