package store

import (
	"context"
	"database/sql"
	"fmt"
)

// Each dialect's own integrity checks (dialect.integrity), read by the
// drill and the tests through Store.Integrity. They only read.

// sqliteIntegrity runs SQLite's own checks: the b-trees and indexes, and
// the foreign keys. It returns what they found wrong.
func sqliteIntegrity(ctx context.Context, tx *sql.Tx) ([]string, error) {
	var problems []string
	err := eachRow(ctx, tx, `PRAGMA integrity_check`, func(rows *sql.Rows) error {
		var msg string
		if err := rows.Scan(&msg); err != nil {
			return err
		}
		if msg != "ok" {
			problems = append(problems, "integrity_check: "+msg)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(ctx, tx, `PRAGMA foreign_key_check`, func(rows *sql.Rows) error {
		var table, parent string
		var rowid, fkid sql.NullInt64
		if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
			return err
		}
		problems = append(problems, fmt.Sprintf("foreign_key_check: %s row %d points at a missing %s row", table, rowid.Int64, parent))
		return nil
	})
	return problems, err
}

// postgresIntegrity verifies every B-tree index of Inkwell's schema against
// its table with amcheck, when the extension is installed (the drill
// installs it in each database it creates). PostgreSQL enforces the
// foreign keys itself. It runs last: a corrupt index aborts the transaction.
func postgresIntegrity(ctx context.Context, tx *sql.Tx) ([]string, error) {
	var installed bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'amcheck')`).Scan(&installed); err != nil {
		return nil, fmt.Errorf("amcheck: %w", err)
	}
	if !installed {
		return nil, nil
	}
	const q = `SELECT count(bt_index_check(c.oid, true)) FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_am a ON a.oid = c.relam
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE a.amname = 'btree' AND n.nspname = current_schema()`
	var n int
	if err := tx.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return []string{"amcheck bt_index_check: " + err.Error()}, nil
	}
	return nil, nil
}

func eachRow(ctx context.Context, tx *sql.Tx, query string, scan func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("%.40s...: %w", query, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
