package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgreSQL runs through pgx's database/sql driver, so every statement in
// this package serves both dialects unchanged: SQL is already written in
// PostgreSQL form, rebind is the identity, and claims add FOR UPDATE SKIP
// LOCKED so that lanes in many processes never wait on each other's claims.

var postgresDialect = dialect{
	name:   "postgres",
	rebind: func(q string) string { return q },
	// timestamptz takes a time.Time as it is; the value comes from the
	// database's own clock (dbClock), not from this machine's.
	ts:          func(t time.Time) any { return t.UTC() },
	clockOr:     func(arg string) string { return `COALESCE(` + arg + `::timestamptz, clock_timestamp())` },
	claimLock:   " FOR UPDATE SKIP LOCKED",
	shareLock:   " FOR SHARE",
	picked:      func(cte string) string { return `id = ANY (ARRAY(SELECT id FROM ` + cte + `))` },
	classify:    classifyPostgres,
	migrateLock: `SELECT pg_advisory_xact_lock(` + migrateLockKey + `)`,
	lockKind:    lockAdvisory,
	lockLane:    (*Store).lockLanePostgres,
	rescue:      true,
	notify:      true,
	snapshot:    &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
	integrity:   postgresIntegrity,

	// One round trip per claim: see claimUpToStatement.
	claimStatement:  true,
	groupStatements: true,
	checkWritable:   (*Store).checkWritablePostgres,
}

// migrateLockKey serializes migrations of one database: lanes started at the
// same moment would otherwise race to create the same tables. It is an
// advisory key pair in Inkwell's own namespace ('inkm', 0).
const migrateLockKey = "1768844141, 0"

// postgresPoolSize bounds one process's connections (the lane lock uses one
// more of its own): enough for the lane, the accept batcher and reads.
const postgresPoolSize = 10

// openPostgres opens one pool for reads and writes. Pool connections keep
// TCP keepalives on, so a call to a vanished server fails instead of
// hanging past its context's deadline, and run with JIT off (jitOff).
func (s *Store) openPostgres(ctx context.Context, dsn string) error {
	cfg, err := postgresConfig(dsn, "inkwell")
	if err != nil {
		return err
	}
	cfg.AfterConnect = jitOff
	s.dialect = postgresDialect
	s.db = stdlib.OpenDB(*cfg)
	s.db.SetMaxOpenConns(postgresPoolSize)
	s.db.SetMaxIdleConns(postgresPoolSize)
	s.db.SetConnMaxIdleTime(5 * time.Minute)
	s.rdb = s.db
	if err := s.db.PingContext(ctx); err != nil {
		s.db.Close()
		return s.classify(fmt.Errorf("open %s: %w", RedactDSN(dsn), err))
	}
	if s.cdb, err = openClaimPool(dsn); err != nil {
		s.db.Close()
		return err
	}
	if s.gdb, err = openGroupPool(dsn); err != nil {
		s.db.Close()
		s.cdb.Close()
		return err
	}
	if s.ends, err = newEndNotifier(dsn, s.log); err != nil {
		s.db.Close()
		s.cdb.Close()
		s.gdb.Close()
		return err
	}
	if s.now == nil {
		s.now = newDBClock(s.db, s.log).now
		s.clockInDB = true
	}
	return nil
}

// jitOff turns JIT compilation off for one pool connection. Inkwell's
// statements are short; JIT only ever costs it time, and much of it on the
// overview views, whose cost PostgreSQL overestimates and which it then
// JIT-compiles on every read: 5.0 s per Overview at 100,000 jobs, against
// 0.11 s without (BenchmarkStore_Overview, with or without ANALYZE). It is
// a statement after connecting, not a startup parameter: PgBouncer refuses
// those it does not know ("unsupported startup parameter: jit"). A server
// without JIT (before PostgreSQL 11) has no such setting, and needs none.
func jitOff(ctx context.Context, c *pgconn.PgConn) error {
	err := c.Exec(ctx, `SET jit = off`).Close()
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42704" { // undefined_object: no JIT here
		return nil
	}
	return err
}

// postgresConfig parses dsn into a pgx config that names the application
// (visible in pg_stat_activity) and dials with TCP keepalives.
func postgresConfig(dsn, appName string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, inkwell.Errorf(inkwell.EINVALID, "database %s: %v", RedactDSN(dsn), err)
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = appName
	}
	d := &net.Dialer{
		Timeout:         cfg.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: keepaliveIdle, Interval: keepaliveInterval, Count: keepaliveCount},
	}
	if d.Timeout == 0 {
		d.Timeout = 10 * time.Second
	}
	cfg.DialFunc = d.DialContext
	return cfg, nil
}

// RedactDSN returns dsn fit for messages and logs: a URL's password,
// whether in its user part (percent-encoded or not) or in a password=
// parameter, becomes xxxxx, and so does a password= in a keyword/value
// string, which Inkwell would take for a file name. A DSN without a
// password, a SQLite path among them, comes back unchanged; a URL too
// broken to parse is hidden whole, since where its password starts
// cannot be known.
func RedactDSN(dsn string) string {
	if !strings.Contains(dsn, "://") {
		return keywordPassword.ReplaceAllString(dsn, "${1}xxxxx")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		scheme, _, _ := strings.Cut(dsn, "://")
		return scheme + "://(unparsable URL, not shown)"
	}
	_, hasPassword := u.User.Password()
	params := strings.Split(u.RawQuery, "&")
	for i, p := range params {
		key, _, _ := strings.Cut(p, "=")
		if k, err := url.QueryUnescape(key); err == nil && k == "password" {
			params[i], hasPassword = "password=xxxxx", true
		}
	}
	if !hasPassword {
		return dsn
	}
	u.RawQuery = strings.Join(params, "&")
	return u.Redacted()
}

// keywordPassword is the password of a keyword/value connection string
// (password=secret or password='se cret').
var keywordPassword = regexp.MustCompile(`(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// classifyPostgres maps the errors after which a caller should simply try
// again later (the server is busy, full, restarting or out of reach) to
// EUNAVAILABLE. A unique violation stays as it is: isUniqueViolation reads it.
func classifyPostgres(err error) error {
	if msg := unavailableReason(err); msg != "" {
		return fmt.Errorf("%w: %w", inkwell.Errorf(inkwell.EUNAVAILABLE, "%s", msg), err)
	}
	return err
}

func unavailableReason(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "40001", pe.Code == "40P01", pe.Code == "55P03":
			return "database is busy (serialization failure, deadlock or lock wait); retry shortly"
		case pe.Code == "53300":
			return "database has too many connections; retry shortly"
		case pe.Code == "53100":
			return "database disk is full"
		case strings.HasPrefix(pe.Code, "53"):
			return "database is out of resources; retry shortly"
		case strings.HasPrefix(pe.Code, "08"), pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03":
			return "database connection lost or server restarting; retry shortly"
		}
		return ""
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		return "database unreachable; retry shortly"
	case errors.Is(err, context.DeadlineExceeded):
		// Before net.Error, which a deadline also is: the call's time ran
		// out (a lock another session holds, a slow server), which says
		// nothing of the connection.
		return "database did not answer in time (a lock held elsewhere, or a slow server); retry shortly"
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.As(err, &ne), pgconn.SafeToRetry(err):
		return "database connection lost; retry shortly"
	}
	return ""
}

func isPostgresUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// dbClock is the store's clock on PostgreSQL. Why the database's clock:
// lanes run on many machines whose clocks disagree, and a history written
// with each machine's own time could show a job finished before it started.
// One clock, the server's, keeps every lane's timestamps in one order.
//
// How: one SELECT clock_timestamp() per transition, before its transaction,
// on the pool (s.now() is taken once per transition, and once per group of
// accepts). That costs one round trip and leaves every statement, and the
// SQLite path, unchanged. If the query fails, the transaction that follows
// will almost surely fail too; should it not, the time written is this
// machine's clock corrected by the offset last measured against the server,
// never the raw local time.
type dbClock struct {
	db     *sql.DB
	log    *slog.Logger
	offset atomic.Int64 // server minus local in nanoseconds, at the last successful read
}

func newDBClock(db *sql.DB, log *slog.Logger) *dbClock {
	return &dbClock{db: db, log: log}
}

// dbClockTimeout bounds the clock read; it is one tiny query.
const dbClockTimeout = 5 * time.Second

func (c *dbClock) now() time.Time {
	ctx, cancel := context.WithTimeout(context.Background(), dbClockTimeout)
	defer cancel()
	before := time.Now()
	var t time.Time
	if err := c.db.QueryRowContext(ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
		c.log.WarnContext(ctx, "database clock unreadable; using the local clock corrected by the last offset", "err", err)
		return time.Now().Add(time.Duration(c.offset.Load())).UTC()
	}
	mid := before.Add(time.Since(before) / 2)
	c.offset.Store(int64(t.Sub(mid)))
	return t.UTC()
}
