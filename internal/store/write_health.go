package store

import (
	"sync"
	"time"

	"github.com/inkwell/inkwell"
)

// writeHealth is what the last write transaction's end said of the
// database, for serve's /readyz: a server whose writes fail for want of
// the database (SQLite's write lock held past the busy timeout by another
// process, a full disk, an i/o error, PostgreSQL out of reach) is not
// ready, whatever its recovery says. It is evidence, not a probe: it
// changes only when a write ends, and the lane's heartbeat writes every
// few seconds, so it follows the database within one heartbeat (a probe
// would queue for SQLite's one write connection behind the real writes).
type writeHealth struct {
	mu      sync.Mutex
	failing error     // the last write's EUNAVAILABLE error; nil once one commits
	since   time.Time // when writes began to fail
}

// noteWrite records how a write transaction ended: a commit clears a
// failure, a database that could not take the write (EUNAVAILABLE) sets
// one, and anything else (a conflict, bad input, a caller that gave up)
// says nothing of the database and changes nothing.
func (s *Store) noteWrite(err error) {
	h := &s.health
	switch {
	case err == nil:
		h.mu.Lock()
		h.failing = nil
		h.mu.Unlock()
	case inkwell.ErrorCode(err) == inkwell.EUNAVAILABLE:
		h.mu.Lock()
		if h.failing == nil {
			h.since = time.Now()
		}
		h.failing = err
		h.mu.Unlock()
	}
}

// Unready says why this store cannot take writes now, in words for
// /readyz; nil when the last write committed (or none has ended yet). Once
// its files were deleted under it (CheckFiles), it stays unready: the
// process is stopping. On SQLite a busy database names the process that
// holds its write lock, when this host can tell.
func (s *Store) Unready() error {
	if err := s.refuseWhileLost(); err != nil {
		return err
	}
	h := &s.health
	h.mu.Lock()
	failing, since := h.failing, h.since
	h.mu.Unlock()
	if failing == nil {
		return nil
	}
	holder := ""
	if s.dialect.name == "sqlite" {
		if who := SQLiteWriteLockHolder(s.path); who != "" {
			holder = "; the write lock is held by " + who
		}
	}
	return inkwell.Errorf(inkwell.EUNAVAILABLE, "database writes have failed since %s (%s ago): %v%s",
		since.UTC().Format(time.RFC3339), time.Since(since).Round(time.Second), failing, holder)
}
