package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inkwell/inkwell"
)

// Options configure Open. The zero value is a production default.
type Options struct {
	// Synchronous is SQLite's synchronous pragma: "FULL" (default) makes
	// every commit durable before it returns; "NORMAL" may lose the last
	// commits on a power cut (never on a process crash) and is faster.
	Synchronous string
	// BusyTimeout is how long a SQLite statement waits for another
	// process's write lock before it reports busy (default 5s).
	BusyTimeout time.Duration
	// NowFunc is the clock; nil means time.Now. Tests inject it.
	NowFunc func() time.Time
	// Logger receives the store's few log lines; nil discards them.
	Logger *slog.Logger
	// NoMigrate opens the database without applying migrations.
	NoMigrate bool
	// ReadOnly opens a SQLite file this process may not write, for
	// reading (inkwell status, show, audit): mode=ro, and immutable when
	// there is no -wal file beside it (no process has it open for
	// writing, or its directory would have let this one make its -shm).
	// Every write fails. Implies NoMigrate. PostgreSQL ignores it.
	ReadOnly bool

	// noCreate: the SQLite file exists, and no connection may make it
	// again (set by openSQLite: createOnce).
	noCreate bool
	// immutable: a ReadOnly open of a file with no -wal (openSQLite).
	immutable bool
}

// Store is Inkwell's database. It is safe for concurrent use.
type Store struct {
	closeOnce sync.Once
	closeErr  error
	dsn       string
	dialect   dialect
	db        *sql.DB // writes (and transactions)
	rdb       *sql.DB // reads; the same pool as db on PostgreSQL
	cdb       *sql.DB // the claim's own connections on PostgreSQL (postgres_claim.go); nil on SQLite
	gdb       *sql.DB // the group statements' connections on PostgreSQL (openGroupPool); nil on SQLite
	// readAsOpened is the file as a read-only immutable open found it
	// (CheckReadAsOpened); nil otherwise.
	readAsOpened os.FileInfo
	// ends announces the jobs outcome groups end, after their commits
	// (postgres_notify.go); nil on SQLite.
	ends *endNotifier
	// endedRecheck, when set, replaces the const of that name (tests).
	endedRecheck time.Duration
	now          func() time.Time
	log          *slog.Logger
	accepts      *acceptBatcher
	// acceptInsert is the statement that stores a new job, in the
	// dialect's form (acceptInsertSQL).
	acceptInsert string
	outcomes     *outcomeBatcher
	stmts        stmtCache
	path         string // SQLite file path; empty on PostgreSQL
	// gate orders this process's writers where the dialect has one
	// writer at a time (SQLite): outcomes first. Nil on PostgreSQL.
	gate *writeGate
	// clockInDB: the clock is the database's own (PostgreSQL, no NowFunc):
	// a statement may read it itself, without a round trip before it.
	clockInDB bool
	// tokenUse holds API tokens' last_used_at marks until they are
	// written in a batch (tokens.go).
	tokenUse tokenUses
	// tokenVerify is VerifyToken's read, prepared once (SQLite).
	tokenVerify preparedRead
	// files are the SQLite files as CheckFiles first saw them.
	files sqliteFiles
	// health is what the last write said of the database, for /readyz
	// (write_health.go).
	health writeHealth
	// lastPark is when this process last looked for webhook deliveries
	// to park (unix nanoseconds of the store's clock; webhooks.go).
	lastPark atomic.Int64
}

// Open opens the database named by dsn (a SQLite file path or a
// postgres:// URL), and unless opts.NoMigrate applies pending migrations.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, inkwell.Errorf(inkwell.EINVALID, "database: empty --db")
	}
	if opts.ReadOnly {
		opts.NoMigrate = true
	}
	s := &Store{dsn: dsn, now: opts.NowFunc, log: opts.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if isPostgresDSN(dsn) {
		err = s.openPostgres(ctx, dsn)
	} else {
		err = s.openSQLite(ctx, dsn, opts)
	}
	if err != nil {
		return nil, err
	}
	if s.now == nil { // openPostgres sets the database's clock; see dbClock
		s.now = time.Now
	}
	if s.dialect.oneWriter {
		s.gate = &writeGate{}
	}
	if !opts.NoMigrate {
		if err := s.Migrate(ctx); err != nil {
			s.Close()
			return nil, err
		}
		if err := s.checkWritable(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.acceptInsert = acceptInsertSQL(s.dialect.clockOr("$5"))
	s.accepts = newAcceptBatcher(s)
	s.outcomes = newOutcomeBatcher(s)
	return s, nil
}

// checkWritable refuses a database this process can read but not write,
// when the open is one that writes (serve, migrate): serve would
// otherwise listen, answer /healthz, and fail at its first write. A
// schema already migrated needs no write to open, so it is asked: on
// SQLite, a write transaction begun and rolled back (SQLite opens a file
// it may not write read-only, and BEGIN IMMEDIATE is then refused); on
// PostgreSQL, whether new transactions are read-only (a hot standby, or
// default_transaction_read_only). Nothing is written.
func (s *Store) checkWritable(ctx context.Context) error { return s.dialect.checkWritable(s, ctx) }

// checkWritablePostgres asks whether new transactions are read-only.
func (s *Store) checkWritablePostgres(ctx context.Context) error {
	var ro string
	if err := s.db.QueryRowContext(ctx, `SHOW transaction_read_only`).Scan(&ro); err != nil {
		return s.classify(fmt.Errorf("is the database writable: %w", err))
	}
	if ro == "on" {
		return inkwell.Errorf(inkwell.EINVALID, "database %s is read-only (transaction_read_only is on: a standby, or default_transaction_read_only): point --db at the primary, or let this user write", RedactDSN(s.dsn))
	}
	return nil
}

// checkWritableSQLite begins a write transaction and rolls it back.
func (s *Store) checkWritableSQLite(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock=immediate): takes the write lock, writes nothing
	if err == nil {
		return tx.Rollback()
	}
	if ro := s.sqliteReadOnly(err); ro != nil {
		return ro
	}
	// Busy or locked: another process is writing, so the file is
	// writable; the first real write will wait its turn as usual.
	s.log.Debug("writable check", "err", err)
	return nil
}

// sqliteReadOnly is SQLite's "attempt to write a readonly database" in
// words that say what to do; nil for any other error. IsReadOnly knows it.
func (s *Store) sqliteReadOnly(err error) error {
	if !strings.Contains(err.Error(), "readonly") {
		return nil
	}
	return readOnlyError{inkwell.Errorf(inkwell.EINVALID, "database %s is read-only: this process may not write the file or its directory (it needs both, for the -wal and -shm files beside it): %v", s.path, err)}
}

// readOnlyError marks sqliteReadOnly's refusal, so a command that only
// reads can open the file again with Options.ReadOnly.
type readOnlyError struct{ err error }

func (e readOnlyError) Error() string { return e.err.Error() }
func (e readOnlyError) Unwrap() error { return e.err }

// IsReadOnly says err is the refusal of a SQLite file this process may not
// write (the file, or its directory for the -wal and -shm files).
func IsReadOnly(err error) bool { return errors.As(err, new(readOnlyError)) }

// Close stops the batchers and closes the database pools. A second Close
// returns the first one's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Store) close() error {
	s.closeTokenUse()
	if s.accepts != nil {
		s.accepts.close()
	}
	if s.outcomes != nil {
		s.outcomes.close()
	}
	s.saveOnClose()
	s.stmts.close()
	s.tokenVerify.once.Do(func() {}) // orders this read after any prepare, and ends later ones
	if st := s.tokenVerify.stmt; st != nil {
		st.Close()
	}
	err := s.db.Close()
	if s.rdb != s.db {
		err = errors.Join(err, s.rdb.Close())
	}
	if s.cdb != nil {
		err = errors.Join(err, s.cdb.Close())
	}
	if s.gdb != nil {
		err = errors.Join(err, s.gdb.Close())
	}
	if s.ends != nil {
		err = errors.Join(err, s.ends.close())
	}
	return err
}

// Dialect names the database kind, "sqlite" or "postgres", for display.
// Code asks for a capability instead (CanRescue, BeginSnapshot…).
func (s *Store) Dialect() string { return s.dialect.name }

// OutcomesClaim reports whether an outcome's transaction also claims the
// job its slot runs next (CompleteAndClaim, FailAndClaim): SQLite, where a
// claim costs no round trip. PostgreSQL claims in a statement of its own.
func (s *Store) OutcomesClaim() bool { return !s.dialect.claimStatement }

// CanRescue reports whether a live lane may close a dead lane's orphans on
// the proof of its lock (PostgreSQL; see rescue.go).
func (s *Store) CanRescue() bool { return s.dialect.rescue }

// BeginSnapshot begins a read-only transaction on the read pool that sees
// one consistent state of every table, for the drill's and the tests'
// inspection queries. Roll it back when done.
func (s *Store) BeginSnapshot(ctx context.Context) (*sql.Tx, error) {
	return s.rdb.BeginTx(ctx, s.dialect.snapshot)
}

// Integrity runs the database's own integrity checks in tx and returns the
// problems they report (none: nil).
func (s *Store) Integrity(ctx context.Context, tx *sql.Tx) ([]string, error) {
	return s.dialect.integrity(ctx, tx)
}

// Path is the SQLite file path, or "" on PostgreSQL.
func (s *Store) Path() string { return s.path }

// DB exposes the read pool for the drill's and tests' inspection queries.
// Production code outside this package never writes SQL.
func (s *Store) DB() *sql.DB { return s.rdb }

func isPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// inTx runs fn in one write transaction and commits it, or rolls back when
// fn or the commit fails. On SQLite the transaction begins IMMEDIATE (see
// sqliteDSN), so it holds the write lock from its first statement.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.inTxHooks(ctx, fn, "", "")
}

// inTxHooks is inTx with crash points hit just before and just after COMMIT.
func (s *Store) inTxHooks(ctx context.Context, fn func(tx *sql.Tx) error, beforeCommit, afterCommit string) error {
	return s.inTxAt(ctx, writeNormal, fn, beforeCommit, afterCommit)
}

// inTxAt is inTxHooks for a writer of priority p: on a one-writer database
// an outcome (writeOutcome) goes ahead of every other writer waiting in
// this process (see writeGate). How it ended is noted for /readyz
// (noteWrite).
func (s *Store) inTxAt(ctx context.Context, p writePriority, fn func(tx *sql.Tx) error, beforeCommit, afterCommit string) error {
	err := s.writeTx(ctx, p, fn, beforeCommit, afterCommit)
	s.noteWrite(err)
	return err
}

func (s *Store) writeTx(ctx context.Context, p writePriority, fn func(tx *sql.Tx) error, beforeCommit, afterCommit string) error {
	if s.dialect.oneWriter {
		if err := s.gate.acquire(ctx, p); err != nil {
			return fmt.Errorf("wait for the writer: %w", err)
		}
		defer s.gate.release()
	}
	db := s.db
	if p == writeOutcome && s.gdb != nil {
		db = s.gdb // its generic plans (openGroupPool)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return s.classify(fmt.Errorf("begin: %w", err))
	}
	defer s.stmts.warm(ctx, s.db)
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return s.classify(err)
	}
	hit(beforeCommit)
	if err := tx.Commit(); err != nil {
		return s.classify(fmt.Errorf("commit: %w", err))
	}
	s.saveAfterCommit(ctx)
	hit(afterCommit)
	return nil
}

// execOne runs a guarded UPDATE and returns a Conflict error when it
// changed no row: someone else moved the row, never "try anyway".
func (s *Store) execOne(ctx context.Context, tx *sql.Tx, query string, args ...any) error {
	res, err := s.txExec(ctx, tx, query, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return inkwell.Errorf(inkwell.ECONFLICT, "row not in the expected state (%d rows matched)", n)
	}
	return nil
}

// exec runs a statement in tx and returns the rows it changed.
func (s *Store) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (int64, error) {
	res, err := s.txExec(ctx, tx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// txExec runs a statement (in PostgreSQL form) in tx through the
// prepared-statement cache.
func (s *Store) txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	query = s.rebindKept(query)
	if st := s.cached(query); st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// cached returns the prepared statement for query on SQLite. PostgreSQL
// needs no cache of ours: pgx already prepares and caches statements per
// connection, and drops one whose plan a migration changed.
func (s *Store) cached(query string) *sql.Stmt {
	if !s.dialect.stmtCache {
		return nil
	}
	return s.stmts.lookup(query)
}

// txQueryRow runs a one-row query (in PostgreSQL form) in tx through the
// prepared-statement cache.
func (s *Store) txQueryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	query = s.rebindKept(query)
	if st := s.cached(query); st != nil {
		return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, query, args...)
}

// txQuery runs a query (in PostgreSQL form) in tx through the
// prepared-statement cache.
func (s *Store) txQuery(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	query = s.rebindKept(query)
	if st := s.cached(query); st != nil {
		return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, query, args...)
}

// ts converts a Go time to the column value of this dialect.
func (s *Store) ts(t time.Time) any { return s.dialect.ts(t) }

// nowTS is the current time as a column value.
func (s *Store) nowTS() any { return s.ts(s.now()) }

// clockArg is the time argument of a statement that reads it through
// dialect.clockOr: nil where the clock is the database's, which the
// statement then reads itself; the store's clock otherwise.
func (s *Store) clockArg() any {
	if s.clockInDB {
		return nil
	}
	return s.nowTS()
}

// Now is the store's clock: the one every transition writes (on
// PostgreSQL the database's, so that lanes on hosts with skewed clocks
// write one ordered history). A reschedule's not_before is computed from
// it, so a back-off means the same on every lane.
func (s *Store) Now() time.Time { return s.now() }

// WriteDB exposes the write pool for benchmarks and tests that must build
// large or deliberately broken states with raw SQL. Production code never
// calls it: every write goes through a transition.
func (s *Store) WriteDB() *sql.DB { return s.db }

// Rebind and TimeArg let such raw SQL be written once for both dialects:
// Rebind turns PostgreSQL placeholders ($1) into this dialect's, TimeArg a
// time into the value a time column takes here.
func (s *Store) Rebind(query string) string { return s.dialect.rebind(query) }

// TimeArg: see Rebind.
func (s *Store) TimeArg(t time.Time) any { return s.ts(t) }
