package store

import (
	"context"
	"database/sql"
	"fmt"
)

// A migration's SQL file runs as it is, but for the steps a SQL file
// cannot take alone, which run around it here, in the same transaction.
//
// SQLite 0008 builds jobs again (see its file), and DROP TABLE takes the
// table's indexes and triggers with it: before the file runs, the text of
// each is read from sqlite_master; after it, each is created again, word
// for word, on the new table. The one index not replayed is the old
// table's UNIQUE (idempotency_key) autoindex, which has no text and which
// the new UNIQUE (account, idempotency_key) replaces. A later migration
// that changes an index or trigger of jobs changes it on the new table as
// on any other.

// runMigration applies m inside tx with its hook, if it has one.
func (s *Store) runMigration(ctx context.Context, tx *sql.Tx, m migration) error {
	if !s.dialect.tableRebuilds || m.version != 8 {
		_, err := tx.ExecContext(ctx, m.sql)
		return err
	}
	defs, err := jobsSchemaObjects(ctx, tx)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	for _, d := range defs {
		if _, err := tx.ExecContext(ctx, d); err != nil {
			return fmt.Errorf("create again on the new jobs table: %s: %w", firstLine(d), err)
		}
	}
	return nil
}

// jobsSchemaObjects returns the CREATE text of every index and trigger on
// jobs, in the order they were created (the autoindexes have none).
func jobsSchemaObjects(ctx context.Context, tx *sql.Tx) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT sql FROM sqlite_master
		WHERE tbl_name = 'jobs' AND type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY rowid`)
	if err != nil {
		return nil, fmt.Errorf("read the indexes and triggers of jobs: %w", err)
	}
	defer rows.Close()
	var defs []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		defs = append(defs, d)
	}
	return defs, rows.Err()
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}
