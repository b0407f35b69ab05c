package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	_ "modernc.org/sqlite" // registers the "sqlite" driver: pure Go, no cgo
)

// openSQLite opens the file at path with one writer connection and a small
// pool of readers. One writer means transactions queue fairly inside the
// process instead of spinning on SQLITE_BUSY; other processes (the CLI's
// retry, recover) still meet the busy timeout.
func (s *Store) openSQLite(ctx context.Context, path string, opts Options) error {
	path = strings.TrimPrefix(path, "file:")
	if strings.ContainsAny(path, "?#") {
		return inkwell.Errorf(inkwell.EINVALID, "database %q: give a plain file path; Inkwell sets the SQLite options itself", path)
	}
	canon, err := CanonicalPath(path)
	if err != nil {
		return err
	}
	if err := refuseUnsafeFile(canon); err != nil {
		return err
	}
	if err := refuseNewBesideRescue(canon); err != nil {
		return err
	}
	s.path = canon
	s.dialect = sqliteDialect
	if !opts.ReadOnly {
		opts.noCreate = createOnce(canon)
	} else if fi, err := os.Stat(canon); err == nil {
		if _, err := os.Stat(canon + "-wal"); errors.Is(err, fs.ErrNotExist) {
			// Decided once for both pools: with no -wal every committed
			// page is in the file, and SQLite, which may not make a -shm
			// here, can read it only as immutable, taking no lock. A
			// writer that starts meanwhile is seen by CheckReadAsOpened.
			opts.immutable = true
			s.readAsOpened = fi
		}
	}
	dsn, err := sqliteDSN(canon, opts, true)
	if err != nil {
		return err
	}
	if s.db, err = sql.Open("sqlite", dsn); err != nil {
		return fmt.Errorf("open %s: %w", canon, err)
	}
	s.db.SetMaxOpenConns(1)
	s.db.SetConnMaxIdleTime(0)
	// Readers begin DEFERRED: a read transaction (Show's snapshot) never
	// takes the write lock.
	rdsn, _ := sqliteDSN(canon, opts, false)
	if s.rdb, err = sql.Open("sqlite", rdsn); err != nil {
		s.db.Close()
		return fmt.Errorf("open %s: %w", canon, err)
	}
	s.rdb.SetMaxOpenConns(4)
	if err := s.db.PingContext(ctx); err != nil {
		s.Close()
		if ro := s.sqliteReadOnly(err); ro != nil {
			return ro
		}
		if strings.Contains(err.Error(), "not a database") { // SQLITE_NOTADB: its first bytes are not SQLite's header
			return inkwell.Errorf(inkwell.EINVALID, "database %s is not a SQLite database (nor Inkwell's): its first bytes are not SQLite's header; check --db (the file was not changed): %v", canon, err)
		}
		return s.classify(fmt.Errorf("open %s: %w", canon, err))
	}
	if !opts.NoMigrate && s.schemaCurrent(ctx) {
		s.optimizeSQLite(ctx)
	}
	return nil
}

// CheckReadAsOpened says whether what a read-only store opened as
// immutable (no -wal beside it) read is the file as it was when opened:
// SQLite takes no lock on an immutable file, so a serve that starts
// writing it meanwhile can tear what was read (pages of two versions, or
// "database disk image is malformed"). nil for any other store, and when
// nothing changed; else an error saying to run the command again.
func (s *Store) CheckReadAsOpened() error {
	was := s.readAsOpened
	if was == nil {
		return nil
	}
	now, err := os.Stat(s.path)
	_, walErr := os.Stat(s.path + "-wal")
	if err == nil && os.SameFile(was, now) && was.Size() == now.Size() && was.ModTime().Equal(now.ModTime()) && errors.Is(walErr, fs.ErrNotExist) {
		return nil
	}
	return inkwell.Errorf(inkwell.EUNAVAILABLE, "database %s changed while it was read (a process began writing it; this user may not write it, so it was read without locks): what was read may mix two versions and is not shown; run the command again", s.path)
}

// refuseUnsafeFile refuses a database path that is not a regular file (a
// directory, a pipe, a device: said as such, where a directory would
// otherwise read as a file of several names), and a database file that has
// more than one name (hard link). SQLite finds a database's WAL and shared memory by its
// name (<name>-wal, <name>-shm), and Inkwell its lane lock
// (<name>.lane-NAME.lock): a process opening the file by a second name
// sees neither the first's WAL nor its lock, so it would run the same lane
// unguarded and, at its first checkpoint, write its own pages over the
// other's. A symlink is safe (CanonicalPath resolves it); a hard link
// cannot be told from the original, so it is refused by whichever name.
func refuseUnsafeFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil // not there yet (it is made now) or unreadable (the open says why)
	}
	if !fi.Mode().IsRegular() {
		// A directory has two names or more by nature: say what it is.
		if fi.IsDir() {
			return inkwell.Errorf(inkwell.EINVALID, "database %s is a directory: --db names the database file itself, such as %s", path, filepath.Join(path, "inkwell.db"))
		}
		what := "a device"
		switch t := fi.Mode().Type(); {
		case t&os.ModeNamedPipe != 0:
			what = "a named pipe"
		case t&os.ModeSocket != 0:
			what = "a socket"
		}
		return inkwell.Errorf(inkwell.EINVALID, "database %s is %s, not a regular file: --db names the database file itself", path, what)
	}
	if n, ok := linkCount(fi); ok && n > 1 {
		return inkwell.Errorf(inkwell.EINVALID, "database %s has %d names (hard links): SQLite keeps its WAL and Inkwell its lane lock beside each name, so two processes opening it by different names would overwrite each other's writes; remove every other name (find / -samefile %s) or use a symlink, then start again", path, n, path)
	}
	return nil
}

// createOnce makes the database file when it does not exist yet (an empty
// file is an empty SQLite database), and reports whether it exists now, so
// that every connection opens it without the right to create it (mode=rw).
// A connection opened later, after someone deleted the file under this
// process, then fails instead of making a new, empty database at the path,
// which the next start would take for the real one (CheckFiles saves the
// real one beside it). When the file cannot be made here, SQLite's own
// open says why, as before.
func createOnce(path string) bool {
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
		f.Close()
		return true
	}
	_, err := os.Stat(path)
	return err == nil
}

// optimizeSQLite keeps the query planner's statistics (sqlite_stat1) as
// SQLite advises for a long-lived connection: PRAGMA optimize at open
// analyzes the tables that were never analyzed or whose size changed a
// great deal since, and nothing else, reading a bounded sample of each
// index (analysis_limit), so it is quick on any size once done. A database
// nobody analyzes plans every query as if each index held a million rows.
// Only opens that may write run it (serve, migrate), and only on a schema
// that is already this Inkwell's, whole: a read-only command such as
// inkwell status changes nothing, and neither does an open whose
// migration is refused (a legacy file with an unknown status, a newer
// schema); a database that is migrated now is analyzed at its next open.
// Inkwell's own hot queries do not depend on the statistics; a failure
// (say another process holds the write lock past the busy timeout) is
// logged and the open goes on.
func (s *Store) optimizeSQLite(ctx context.Context) {
	conn, err := s.db.Conn(ctx)
	if err == nil {
		defer conn.Close()
		if _, err = conn.ExecContext(ctx, `PRAGMA analysis_limit = 400`); err == nil {
			_, err = conn.ExecContext(ctx, `PRAGMA optimize = 0x10002`)
		}
	}
	if err != nil {
		s.log.WarnContext(ctx, "PRAGMA optimize failed; the query planner keeps its old statistics", "err", err)
	}
}

// sqliteDSN builds the connection string every connection opens with:
// incremental auto-vacuum for a new file (writer only), WAL (readers never
// block the writer), synchronous as configured,
// a busy timeout, foreign keys on, and _txlock=immediate so every
// transaction takes the write lock at BEGIN. A deferred transaction that
// later upgrades to a write gets SQLITE_BUSY at once, ignoring the timeout.
func sqliteDSN(path string, opts Options, immediate bool) (string, error) {
	sync := strings.ToUpper(opts.Synchronous)
	if sync == "" {
		sync = "FULL"
	}
	switch sync {
	case "FULL", "NORMAL", "EXTRA":
	default:
		return "", inkwell.Errorf(inkwell.EINVALID, "synchronous must be FULL, EXTRA or NORMAL, not %q", opts.Synchronous)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 5 * time.Second
	}
	q := url.Values{}
	if immediate && !opts.NoMigrate {
		// A new file gets incremental auto-vacuum: SQLite can only set it
		// before the first table is created, and it lets prune hand the
		// pages it frees back to the file system (PRAGMA incremental_vacuum,
		// see prune.go). On a file that already has tables it changes
		// nothing until a VACUUM (inkwell prune --vacuum) rebuilds it.
		// Only an open that may create the schema sets it: setting it
		// waits for the write lock, so an operator's inkwell status, run
		// while another process holds that lock, would fail as busy.
		q.Add("_pragma", "auto_vacuum(INCREMENTAL)")
	}
	if !opts.NoMigrate {
		// Persistent: SQLite writes it into the file's header at once.
		// An open that may not migrate leaves it be: the schema it
		// expects was made in WAL by a migrating open, and a file that
		// is not Inkwell's (refused: no Inkwell schema) must be left
		// exactly as it was, not switched to WAL (nor, when empty, given
		// a header) by a command that changes nothing.
		q.Add("_pragma", "journal_mode(WAL)")
	}
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	if immediate {
		q.Set("_txlock", "immediate")
	}
	if opts.noCreate {
		q.Set("mode", "rw")
	}
	if opts.ReadOnly {
		// With a -wal, the -shm beside it must be there too: SQLite reads
		// both read-only (or says why not).
		q.Set("mode", "ro")
		if opts.immutable {
			q.Set("immutable", "1")
		}
	}
	return "file:" + path + "?" + q.Encode(), nil
}

// CanonicalPath is the absolute path of a SQLite file with symlinks in its
// directory resolved, so every spelling of one database meets the same
// lane lock file. The file itself need not exist yet.
func CanonicalPath(path string) (string, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file::memory:") {
		return "", inkwell.Errorf(inkwell.EINVALID, "database %q: Inkwell needs a file (an in-memory database cannot survive a crash)", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("database path %q: %w", path, err)
	}
	// Follow symlinks by hand while their target does not exist yet: SQLite
	// will create the target, and every later start resolves to it, so the
	// first start must name the same lock file.
	for hops := 0; ; hops++ {
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			return real, nil
		}
		fi, err := os.Lstat(abs)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			break
		}
		if hops == 40 {
			return "", inkwell.Errorf(inkwell.EINVALID, "database path %q: too many symlinks", path)
		}
		target, err := os.Readlink(abs)
		if err != nil {
			return "", fmt.Errorf("database path %q: %w", path, err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(abs), target)
		}
		abs = filepath.Clean(target)
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		if os.IsNotExist(err) {
			return "", inkwell.Errorf(inkwell.EINVALID, "database directory %s does not exist", filepath.Dir(abs))
		}
		return "", fmt.Errorf("database path %q: %w", path, err)
	}
	return filepath.Join(dir, filepath.Base(abs)), nil
}
