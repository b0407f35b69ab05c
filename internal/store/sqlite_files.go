package store

import (
	"context"
	"fmt"
	"os"
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

// sqliteFiles is what CheckFiles compares against: each file as it was
// first seen.
type sqliteFiles struct {
	mu   sync.Mutex
	seen map[string]os.FileInfo // by suffix: "", "-wal", "-shm"
	// rescued is the copy CheckFiles wrote of a database whose file was
	// deleted or replaced; Close writes it again, with what was stored
	// since (the calls in flight finish and are stored as the lane stops).
	rescued string
}

var sqliteFileSuffixes = []string{"", "-wal", "-shm"}

// CheckFiles reports whether the database's files are still the ones this
// process opened (SQLite; nil on PostgreSQL). The first call records them.
// When the database file still is, but its -wal or -shm was deleted or
// replaced, it copies every commit into the database file (a checkpoint);
// when the database file itself was, it writes a whole copy of the
// database as this process sees it to <name>.rescued-<time> (VACUUM INTO).
// Either way it returns an EUNAVAILABLE error saying which file, and where
// the commits are: the caller must stop writing and let the process end.
func (s *Store) CheckFiles(ctx context.Context) error {
	if s.dialect.name != "sqlite" {
		return nil
	}
	f := &s.files
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]os.FileInfo{}
		for _, suf := range sqliteFileSuffixes {
			if fi, err := os.Stat(s.path + suf); err == nil {
				f.seen[suf] = fi
			}
		}
		return nil
	}
	var gone []string
	for _, suf := range sqliteFileSuffixes {
		was, ok := f.seen[suf]
		if !ok {
			if fi, err := os.Stat(s.path + suf); err == nil {
				f.seen[suf] = fi // made since (a -wal after the first write)
			}
			continue
		}
		if now, err := os.Stat(s.path + suf); err != nil || !os.SameFile(was, now) {
			gone = append(gone, s.path+suf)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	what := fmt.Sprintf("%v was deleted or replaced while this process had the database open", gone)
	if gone[0] != s.path {
		if _, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(FULL)`); err != nil {
			return inkwell.Errorf(inkwell.EUNAVAILABLE, "%s, and copying the commits into %s failed (%v): they are in this process's unlinked WAL until it ends; stop it gracefully (SIGTERM), which copies them, and start it again", what, s.path, err)
		}
		return inkwell.Errorf(inkwell.EUNAVAILABLE, "%s: every commit was copied into %s (a checkpoint); stopping, since another process opening it now would use another WAL and other locks: start serve again", what, s.path)
	}
	if f.rescued != "" {
		return inkwell.Errorf(inkwell.EUNAVAILABLE, "%s: a whole copy of the database is in %s", what, f.rescued)
	}
	rescue := fmt.Sprintf("%s.rescued-%s", s.path, time.Now().UTC().Format("20060102T150405Z"))
	if err := s.vacuumInto(ctx, rescue); err != nil {
		return inkwell.Errorf(inkwell.EUNAVAILABLE, "%s, and writing a copy to %s failed (%v): the database lives only in this process's open files until it ends", what, rescue, err)
	}
	f.rescued = rescue
	return inkwell.Errorf(inkwell.EUNAVAILABLE, "%s: a whole copy of the database as this process sees it is in %s, written again as the process ends; stopping: move it into place (or put the original back) and start serve again", what, rescue)
}

// vacuumInto writes a whole copy of the database, committed work in the
// WAL included, to path: first to path.tmp, then renamed over path, so
// path is always a whole copy.
func (s *Store) vacuumInto(ctx context.Context, path string) error {
	tmp := path + ".tmp"
	os.Remove(tmp) // VACUUM INTO refuses a file that is not empty
	if _, err := s.db.ExecContext(ctx, `VACUUM INTO `+quoteSQLiteString(tmp)); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// rescueAgain writes the rescue copy again at Close, once every write of
// this process is done.
func (s *Store) rescueAgain() {
	f := &s.files
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rescued == "" {
		return
	}
	if err := s.vacuumInto(context.Background(), f.rescued); err != nil {
		s.log.Error("database file was deleted or replaced: the last copy could not be written; the earlier one stands", "copy", f.rescued, "err", err)
		return
	}
	s.log.Warn("database file was deleted or replaced: a whole copy, with everything this process stored, is written", "copy", f.rescued)
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
