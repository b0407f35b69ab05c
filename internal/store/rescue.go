package store

import (
	"context"
	"fmt"

	"github.com/inkwell/inkwell"
)

// Rescue on proof (PostgreSQL). A lane that dies leaves running attempts
// that its next incarnation would close at startup, but it may never come
// back. So every running lane watches the others: when a lane that still
// owns running attempts has a lock that can be taken, its holder's session
// is provably gone (the server released the lock when it ended), and the
// rescuing lane takes the lock, runs the same recovery as a startup would,
// with a recovery_runs row naming the dead lane, the rescuer and the proof,
// and lets go. No timeout plays any part: a live lane holds its lock
// however long its provider call takes, and is never rescued.

// LockLaneForRescue takes lane's lock for the running lane that holds by,
// without waiting. It returns ELANEHELD when the lane's holder is alive
// (the usual answer, found without opening a session), and nil, nil when
// the lock was free but the lane owns no running attempt any more (another
// lane rescued it first). Release the returned lock right after Rescue.
func (s *Store) LockLaneForRescue(ctx context.Context, lane string, by *LaneLock) (*LaneLock, error) {
	if err := ValidateLane(lane); err != nil {
		return nil, err
	}
	if !s.dialect.rescue {
		return nil, inkwell.Errorf(inkwell.EINVALID, "rescue on proof needs PostgreSQL: a SQLite lane's orphans are closed when the lane restarts")
	}
	if by == nil || by.Lane == lane {
		return nil, inkwell.Errorf(inkwell.EINVALID, "lane %s cannot rescue itself: its own orphans are closed at startup", lane)
	}
	if err := by.Check(); err != nil {
		return nil, fmt.Errorf("rescue lane %s: %w", lane, err)
	}
	held, err := s.laneLockHeld(ctx, lane)
	if err != nil {
		return nil, err
	}
	if held {
		return nil, inkwell.Errorf(inkwell.ELANEHELD, "lane %s is alive: a session holds its lock", lane)
	}
	l, err := s.lockPostgres(ctx, lane, "rescue", by.Self, false)
	if err != nil {
		return nil, err
	}
	l.RescuedBy = by.Lane
	var orphans bool
	err = s.rdb.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM job_attempts WHERE status = 'running' AND lane = $1)`, lane).Scan(&orphans)
	if err != nil || !orphans {
		l.Release()
		return nil, s.classify(err)
	}
	return l, nil
}

// laneLockHeld asks pg_locks whether any session holds lane's lock: the
// cheap look before the proof, so watching live lanes costs one query.
func (s *Store) laneLockHeld(ctx context.Context, lane string) (bool, error) {
	const q = `SELECT EXISTS (SELECT 1 FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid = ($1::int8 & 4294967295)::oid
		  AND objid = ($2::int8 & 4294967295)::oid)`
	var held bool
	if err := s.rdb.QueryRowContext(ctx, q, laneLockNS, laneLockKey(lane)).Scan(&held); err != nil {
		return false, s.classify(fmt.Errorf("lane %s: look at its lock: %w", lane, err))
	}
	return held, nil
}

// Rescue closes the orphans of the dead lane whose lock l holds for a
// rescuing lane (see LockLaneForRescue): the same transaction as startup
// recovery, with the rescuer named in the evidence and in the stop_reason
// it writes on the dead incarnation's lanes row, so operators see why the
// lane is gone and a holder that somehow still runs stops at its next
// heartbeat.
func (s *Store) Rescue(ctx context.Context, l *LaneLock) (RecoveryReport, error) {
	if l == nil || l.RescuedBy == "" {
		return RecoveryReport{}, inkwell.Errorf(inkwell.EINVALID, "rescue needs a lock taken with LockLaneForRescue")
	}
	return s.Recover(ctx, l, false)
}

// advisoryProof is the evidence sentence of a recovery on PostgreSQL.
func advisoryProof(l *LaneLock) string {
	proof := fmt.Sprintf("pg_try_advisory_lock(%d, %d) granted to a new session: PostgreSQL holds a session advisory lock "+
		"until its session ends, so no live session holds lane %s", laneLockNS, laneLockKey(l.Lane), l.Lane)
	if l.RescuedBy != "" {
		proof += fmt.Sprintf("; taken by running lane %s (%s) to close the orphans of its dead holder", l.RescuedBy, l.Self)
	}
	return proof
}
