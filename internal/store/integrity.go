package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
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
// foreign keys itself.
//
// Each index is checked inside a savepoint, so that one failed check
// neither hides the others nor aborts the caller's transaction (the drill
// reads the kept counts after it). In a snapshot transaction amcheck
// refuses the heap check of an index whose pg_index row is not older than
// the snapshot's xmin ("cannot be verified using transaction snapshot",
// SQLSTATE 40001): that happens when any transaction in the cluster, in
// any database, was already running when the index was made, as when a
// test makes a database from a template while others run. That is no
// finding about the index: it is then checked without the heap check
// (its structure only).
func postgresIntegrity(ctx context.Context, tx *sql.Tx) ([]string, error) {
	var installed bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'amcheck')`).Scan(&installed); err != nil {
		return nil, fmt.Errorf("amcheck: %w", err)
	}
	if !installed {
		return nil, nil
	}
	var indexes []string
	err := eachRow(ctx, tx, `SELECT c.oid::text FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_am a ON a.oid = c.relam
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE a.amname = 'btree' AND n.nspname = current_schema() ORDER BY c.relname`, func(rows *sql.Rows) error {
		var oid string
		if err := rows.Scan(&oid); err != nil {
			return err
		}
		indexes = append(indexes, oid)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("amcheck: %w", err)
	}
	var problems []string
	for _, oid := range indexes {
		err := checkIndex(ctx, tx, oid, true)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "40001" {
			err = checkIndex(ctx, tx, oid, false)
		}
		if err != nil {
			problems = append(problems, "amcheck bt_index_check: "+err.Error())
		}
	}
	return problems, nil
}

// checkIndex runs bt_index_check on one index in a savepoint, rolled back
// to when the check fails.
func checkIndex(ctx context.Context, tx *sql.Tx, oid string, heap bool) error {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT amcheck`); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `SELECT bt_index_check($1::regclass, $2)`, oid, heap)
	if err != nil {
		if _, rerr := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT amcheck`); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	_, err = tx.ExecContext(ctx, `RELEASE SAVEPOINT amcheck`)
	return err
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
