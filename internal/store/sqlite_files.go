package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/inkwell/inkwell"
)

// A SQLite database in WAL mode is three files found by name: the
// database, <name>-wal (commits not yet copied into the database) and
// <name>-shm (the index of the WAL, and the locks every process takes).
// Delete the -wal or -shm under a running serve and nothing fails: serve
// writes on into the unlinked files, which vanish when it stops, and a
// crash then loses every commit since the last checkpoint; a second
// process opening the database meanwhile makes a new WAL and a new -shm,
// so the two no longer see each other's commits or locks. Delete the
// database file itself and all of it goes when serve stops.
//
// So the lane's heartbeat checks, through CheckFiles, that each name
// still names the file this process opened, and when one does not, saves
// what this process holds and stops the lane (so serve) with an error
// that says what happened.

// sqliteFiles is what CheckFiles compares against, each file as it was
// first seen, and what it found.
type sqliteFiles struct {
	mu   sync.Mutex
	seen map[string]os.FileInfo // by suffix: "", "-wal", "-shm"
	// lost is set once CheckFiles found a file gone: lostWAL (the -wal or
	// -shm; the database file stands) or lostDB (the database file). From
	// then every commit is saved again as it ends (saveAfterCommit), new
	// jobs are refused (refuseWhileLost), and Close saves once more.
	lost string
	// rescued is the copy written of a database whose file is gone.
	rescued string
	// why is CheckFiles' error, for the refusals that follow it.
	why error
}

const (
	lostWAL = "wal"
	lostDB  = "db"
)

var sqliteFileSuffixes = []string{"", "-wal", "-shm"}

// CheckFiles reports whether the database's files are still the ones this
// process opened (SQLite; nil on PostgreSQL). The first call records them.
// When the database file still is, but its -wal or -shm was deleted or
// replaced, it copies every commit into the database file (a checkpoint);
// when the database file itself was, it writes a whole copy of the
// database as this process sees it to <name>.rescued-<time> (VACUUM INTO).
// Either way it returns an EUNAVAILABLE error saying which file, and where
// the commits are: the caller must stop, as in a shutdown. Every commit
// after it is saved the same way, and Close saves once more. Only a file
// that is not there, or is another file, counts: a stat that fails for
// another reason (permissions, I/O) is no evidence, and is looked at again
// at the next call.
func (s *Store) CheckFiles(ctx context.Context) error {
	if !s.dialect.files {
		return nil
	}
	f := &s.files
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.why != nil {
		return f.why
	}
	if f.seen == nil {
		f.seen = map[string]os.FileInfo{}
	}
	var gone []string
	for _, suf := range sqliteFileSuffixes {
		now, err := os.Stat(s.path + suf)
		was, ok := f.seen[suf]
		switch {
		case !ok:
			if err == nil {
				f.seen[suf] = now // first seen now (a -wal after the first write)
			}
		case errors.Is(err, fs.ErrNotExist) || (err == nil && !os.SameFile(was, now)):
			gone = append(gone, s.path+suf)
		case err != nil:
			s.log.Warn("cannot look at a database file; looking again at the next heartbeat", "file", s.path+suf, "err", err)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	what := fmt.Sprintf("%v was deleted or replaced while this process had the database open", gone)
	if gone[0] != s.path {
		f.lost = lostWAL
		if err := s.checkpointLocked(ctx); err != nil {
			f.why = inkwell.Errorf(inkwell.EUNAVAILABLE, "%s, and copying the commits into %s failed (%v): they are in this process's unlinked WAL; stop it gracefully (SIGTERM), which copies them, and start it again", what, s.path, err)
			return f.why
		}
		f.why = inkwell.Errorf(inkwell.EUNAVAILABLE, "%s: every commit was copied into %s (a checkpoint), and each one from now on will be; stopping, since another process opening it now would use another WAL and other locks: start serve again", what, s.path)
		return f.why
	}
	f.lost = lostDB
	f.rescued = fmt.Sprintf("%s.rescued-%s", s.path, time.Now().UTC().Format("20060102T150405Z"))
	if err := s.vacuumInto(ctx, f.rescued); err != nil {
		f.why = inkwell.Errorf(inkwell.EUNAVAILABLE, "%s, and writing a copy to %s failed (%v): the database lives only in this process's open files until it ends", what, f.rescued, err)
		return f.why
	}
	f.why = inkwell.Errorf(inkwell.EUNAVAILABLE, "%s: a whole copy of the database as this process sees it is in %s, written again after every commit from now on and as the process ends; stopping: move it into place (mv %s %s) and start serve again", what, f.rescued, f.rescued, s.path)
	return f.why
}

// refuseWhileLost refuses new work (accepts) once CheckFiles has found a
// file gone: the process is stopping, and what it holds must stay small.
func (s *Store) refuseWhileLost() error {
	f := &s.files
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.why == nil {
		return nil
	}
	return inkwell.Errorf(inkwell.EUNAVAILABLE, "this server is stopping: its database files were deleted or replaced (see its log); nothing was stored: send the request again once it is restarted")
}

// saveAfterCommit saves a commit made after CheckFiles found a file gone,
// as CheckFiles saved those before it: a paid answer stored while the
// lane stops (its calls in flight finish) must not live only in unlinked
// files until the process ends, nor depend on how it ends.
func (s *Store) saveAfterCommit(ctx context.Context) {
	f := &s.files
	f.mu.Lock()
	defer f.mu.Unlock()
	s.saveLocked(context.WithoutCancel(ctx), false)
}

// saveOnClose saves once more as the store closes, every write of this
// process done.
func (s *Store) saveOnClose() {
	f := &s.files
	f.mu.Lock()
	defer f.mu.Unlock()
	s.saveLocked(context.Background(), true)
}

// saveLocked is one save in the mode CheckFiles found (f.mu held); last
// is the save as the store closes. Nothing while no file was found gone,
// which is always on PostgreSQL (CheckFiles looks at SQLite only).
func (s *Store) saveLocked(ctx context.Context, last bool) {
	f := &s.files
	when := "after a commit"
	if last {
		when = "as the process ends"
	}
	switch f.lost {
	case lostWAL:
		if err := s.checkpointLocked(ctx); err != nil {
			s.log.Error("database -wal or -shm deleted: copying the commits into the database file failed "+when, "db", s.path, "err", err)
		}
	case lostDB:
		if f.rescued == "" {
			return
		}
		if err := s.vacuumInto(ctx, f.rescued); err != nil {
			s.log.Error("database file deleted: writing its copy again failed "+when+"; the earlier copy stands", "copy", f.rescued, "err", err)
			return
		}
		if last {
			s.log.Warn("database file was deleted or replaced: a whole copy, with everything this process stored, is written", "copy", f.rescued)
		}
	}
}

// checkpointLocked copies every commit in the WAL into the database file.
func (s *Store) checkpointLocked(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(FULL)`)
	return err
}

// vacuumInto writes a whole copy of the database, committed work in the
// WAL included, to path: first to path.tmp, then renamed over path, so
// path is always a whole copy.
func (s *Store) vacuumInto(ctx context.Context, path string) error {
	tmp := path + ".tmp"
	os.Remove(tmp) // VACUUM INTO refuses a file that is not empty
	os.Remove(tmp + "-journal")
	if _, err := s.db.ExecContext(ctx, `VACUUM INTO `+quoteSQLiteString(tmp)); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// quoteSQLiteString is s as an SQL string literal.
func quoteSQLiteString(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}

// refuseNewBesideRescue refuses to create a database where a rescued copy
// of the one that was there waits (CheckFiles): a new, empty database
// would take the old one's place silently, with none of its idempotency
// keys, so every client re-send would make a new job and be paid again.
func refuseNewBesideRescue(path string) error {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	copies, _ := filepath.Glob(path + ".rescued-*Z") // <time>Z: not a .tmp, or its -journal, that a kill left mid-copy
	if len(copies) == 0 {
		return nil
	}
	last := copies[len(copies)-1]
	return inkwell.Errorf(inkwell.EINVALID, "database %s does not exist, but %s is a rescued copy of the one that was there (written when its file was deleted under a running serve): move it into place (mv %s %s) and start again; to start a new, empty database instead, move the copy elsewhere first", path, last, last, path)
}
