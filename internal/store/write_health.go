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
// says nothing of the database and changes nothing. Each change is
// logged, with the whole error (and on SQLite the write lock's holder),
// which /readyz, open to anyone, does not show.
func (s *Store) noteWrite(err error) {
	unavailable := inkwell.ErrorCode(err) == inkwell.EUNAVAILABLE
	if err != nil && !unavailable {
		return
	}
	// Who holds SQLite's write lock is read before the failure is made
	// visible, so that the log line saying why follows /readyz's 503 at
	// once (reading /proc can be slow on a loaded host).
	who := ""
	if unavailable {
		who = s.writeLockHolder()
	}
	h := &s.health
	h.mu.Lock()
	was, since := h.failing, h.since
	switch {
	case err == nil:
		h.failing = nil
	case was == nil:
		h.failing, h.since = err, time.Now()
	default:
		h.failing = err
	}
	h.mu.Unlock()
	switch {
	case err == nil && was != nil:
		s.log.Info("database writes commit again; /readyz answers ready", "failed_for", time.Since(since).Round(time.Millisecond))
	case err != nil && was == nil:
		args := []any{"err", err}
		if who != "" {
			args = append(args, "write_lock_held_by", who)
		}
		s.log.Warn("database writes failing; /readyz answers 503 unavailable until one commits", args...)
	}
}

// writeLockHolder names the process holding SQLite's write lock, when
// this host can tell ("" on PostgreSQL).
func (s *Store) writeLockHolder() string {
	if !s.dialect.files {
		return ""
	}
	return SQLiteWriteLockHolder(s.path)
}

// Unready says why this store cannot take writes now, in words for
// /readyz, which anyone may read: since when, and the error's short
// message (the log has the rest). nil when the last write committed (or
// none has ended yet). Once its files were deleted under it (CheckFiles),
// it stays unready: the process is stopping.
//
// It follows the most recent write, whichever it was: the lane's
// heartbeat, a small write to the lanes table, clears it, so a failure
// confined to some writes (a PostgreSQL LOCK TABLE on jobs, a disk with
// room for a heartbeat but not an accept) shows for at most a heartbeat.
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
	return inkwell.Errorf(inkwell.EUNAVAILABLE, "database writes have failed since %s (%s ago): %s (the server's log says more)",
		since.UTC().Format(time.RFC3339), time.Since(since).Round(time.Second), inkwell.ErrorMessage(failing))
}
