package store

import (
	"fmt"
	"time"

	"github.com/inkwell/inkwell"
)

// The lane lock's fence (PostgreSQL): the guard that makes a write commit
// only while, in the same statement, pg_locks shows the lane's advisory
// lock held by the very session that took it (postgres_lock.go). The
// keeper notices a lost lock within lockCheckEvery, and a check before a
// transaction proves nothing about its commit; the fence closes both
// windows. It costs no round trip. Claim, the recovery run (its opening
// INSERT and its closing UPDATE) and RegisterLane carry it.
//
// On SQLite the fence is empty: the flock is held by this process's open
// file for as long as the process lives, and the lane checks the file
// before every claim (LaneLock.Check).

// fence is the condition, starting with " AND", that holds while p's
// session holds its lock. The session is named by pid and backend start,
// since PostgreSQL reuses pids. Keys, pid and time are written into the
// text (integers and a formatted time, never input), so callers' argument
// lists stay as they are.
func (p *pgLock) fence() string {
	return fmt.Sprintf(`
		  AND EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
		    AND classid = %d::oid AND objid = %d::oid AND pid = %d
		    AND (SELECT backend_start FROM pg_stat_get_activity(%[3]d)) = '%s'::timestamptz)`,
		uint32(laneLockNS), uint32(p.key), p.backendPID, p.backendStart.UTC().Format(time.RFC3339Nano))
}

// lockFence is the fence of a write made under l: recovery, rescue and
// registration. A released lock has none and is refused.
func (s *Store) lockFence(l *LaneLock) (string, error) {
	if l.hold == nil {
		return "", inkwell.Errorf(inkwell.ELANEHELD, "lane %s: lock was released", l.Lane)
	}
	return l.hold.fence(), nil
}

// errLockLost is the refusal of a fenced write whose lock was gone by the
// time it ran: it wrote nothing.
func errLockLost(l *LaneLock, what string) error {
	return inkwell.Errorf(inkwell.ELANEHELD, "lane %s: %s refused: the lane's lock is no longer held by the session that took it "+
		"(the session ended, or a pooler moved it); nothing written", l.Lane, what)
}
