package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect holds the few real differences between SQLite and PostgreSQL,
// decided once at Open: the rest of the store asks the dialect's fields
// (can it rescue? what kind of lane lock?), never its name. SQL is written
// in PostgreSQL form ($1, $2 …) everywhere; rebind adapts it.
type dialect struct {
	name string // for display and the migrations folder only
	// lockKind is the kind of lane lock, and lockLane takes one.
	lockKind laneLockKind
	lockLane func(s *Store, ctx context.Context, lane string) (*LaneLock, error)
	// rescue: a live lane may take a dead lane's lock and close its
	// orphans on that proof (rescue.go). SQLite: one lane per file in
	// practice, and orphans close when the lane restarts.
	rescue bool
	// stmtCache: the store keeps its own prepared statements (SQLite);
	// pgx already prepares and caches them per connection.
	stmtCache bool
	// snapshot is how a multi-statement read sees one consistent state. On
	// SQLite a deferred transaction on the read pool reads one WAL snapshot
	// (nil options); PostgreSQL needs REPEATABLE READ for that (READ
	// COMMITTED would let each statement see newer commits).
	snapshot *sql.TxOptions
	// legacy: the database may be an old single-table Inkwell (SQLite only).
	legacy bool
	// integrity runs the database's own integrity checks (drill, tests).
	integrity func(ctx context.Context, tx *sql.Tx) ([]string, error)
	// rebind turns PostgreSQL placeholders into this dialect's.
	rebind func(query string) string
	// rebindKept, when set, is rebind for the statements the store keeps
	// prepared (stmtcache.go); nil: rebind.
	rebindKept func(query string) string
	// ts turns a time into a column value: TEXT on SQLite, timestamptz on PostgreSQL.
	ts func(t time.Time) any
	// clockOr is a statement's time (SQL): the argument arg, or, where it
	// is NULL, the database's clock read by the statement itself
	// (Store.clockArg): no round trip to read it first.
	clockOr func(arg string) string
	// claimLock is appended to the claim's inner SELECT.
	claimLock string
	// shareLock is appended to a SELECT of rows another transaction may
	// be changing, whose change must be waited for and then read
	// (PostgreSQL FOR SHARE; SQLite's one writer waits anyway).
	shareLock string
	// picked is the condition "id is among the ids of the CTE named",
	// for a write whose rows a CTE picked. PostgreSQL's is one array of
	// primary-key probes: "id IN (SELECT …)" let a kept plan read a whole
	// partial index and join.
	picked func(cte string) string
	// claimStatement: ClaimUpTo is one data-modifying statement, its own
	// transaction (PostgreSQL: WITH … UPDATE … INSERT). SQLite has no
	// data-modifying WITH, and its claim costs no round trips anyway.
	claimStatement bool
	// groupStatements: an accept group's new jobs, and an outcome group's
	// completions, are each one statement over arrays (postgres_accept.go,
	// postgres_complete.go): one round trip for a group.
	groupStatements bool
	// classify maps driver errors to inkwell error codes (busy, full…).
	classify func(err error) error
	// oneWriter: the database takes one writer at a time (SQLite), so
	// this process orders its writers itself (writeGate).
	oneWriter bool
	// migrateLock, when set, is run first in the migration transaction so
	// that processes started together migrate one after another. SQLite
	// needs none: BEGIN IMMEDIATE already serializes them.
	migrateLock string
	// notify: a job's end is announced with pg_notify in its transaction
	// (ended.go); without it, WatchEnded reads data_version (SQLite).
	notify bool
	// files: the database is files on this host (the database, its -wal
	// and -shm): their deletion is watched (CheckFiles), and the process
	// holding the write lock can be named from /proc/locks.
	files bool
	// pruneRewrites: a row a prune shrinks is rewritten, not updated, and
	// the file vacuumed (prune.go): SQLite never frees a page an UPDATE
	// shrinks.
	pruneRewrites bool
	// tableRebuilds: ALTER cannot change a table's UNIQUE constraint, so a
	// migration that does rebuilds the table (migrate_hooks.go).
	tableRebuilds bool
	// checkWritable refuses a database this process may read but not
	// write (Open's writable check).
	checkWritable func(s *Store, ctx context.Context) error
}

// laneLockKind names a kind of lane lock.
type laneLockKind int

const (
	lockFlock    laneLockKind = iota + 1 // flock on a file beside the database
	lockAdvisory                         // PostgreSQL session advisory lock
)

// TimeLayout is how SQLite columns store time: UTC, fixed width, so text
// order is time order, and readable in the sqlite3 shell.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

var sqliteDialect = dialect{
	name: "sqlite",
	// SQLite's ?NNN keeps PostgreSQL's numbering, so a reused or
	// out-of-order argument still binds to the right value.
	rebind:     func(q string) string { return strings.ReplaceAll(q, "$", "?") },
	rebindKept: planOnce,
	ts:         func(t time.Time) any { return t.UTC().Format(TimeLayout) },
	clockOr:    func(arg string) string { return arg }, // never NULL: the clock is this process's
	claimLock:  "",                                     // BEGIN IMMEDIATE already holds the only write lock
	picked:     func(cte string) string { return `id IN (SELECT id FROM ` + cte + `)` },
	classify:   classifySQLite,
	oneWriter:  true,
	lockKind:   lockFlock,
	lockLane:   (*Store).lockLaneFile,
	stmtCache:  true,
	legacy:     true,
	integrity:  sqliteIntegrity,

	files:         true,
	pruneRewrites: true,
	tableRebuilds: true,
	checkWritable: (*Store).checkWritableSQLite,
}

// classify passes err through the dialect's classification, keeping
// errors that already carry an inkwell code.
func (s *Store) classify(err error) error {
	if err == nil {
		return nil
	}
	var ie *inkwell.Error
	if errors.As(err, &ie) {
		return err
	}
	return s.dialect.classify(err)
}

func classifySQLite(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return fmt.Errorf("%w: %w", inkwell.Errorf(inkwell.EUNAVAILABLE, "database is busy; retry shortly"), err)
	case sqlite3.SQLITE_FULL:
		return fmt.Errorf("%w: %w", inkwell.Errorf(inkwell.EUNAVAILABLE, "database disk is full"), err)
	case sqlite3.SQLITE_IOERR:
		return fmt.Errorf("%w: %w", inkwell.Errorf(inkwell.EUNAVAILABLE, "database i/o error"), err)
	}
	return err
}

// isUniqueViolation reports whether err is a unique-constraint violation.
func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return isPostgresUniqueViolation(err)
}
