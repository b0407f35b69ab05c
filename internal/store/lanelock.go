package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/inkwell/inkwell"
)

// The lane lock is the evidence that a lane's previous holder is dead.
// On SQLite it is an exclusive flock on a file beside the database: the
// kernel releases it when the holding process dies, however it dies. A
// file can be deleted or replaced under a live holder, though, so the
// flock counts as proof only with a second fact: the previous holder's
// process is gone (process.go). (PostgreSQL uses a session advisory lock,
// which nobody can take from a live session; see postgres_lock.go.)

// Holder identifies one process's hold on a lane: one incarnation. The
// JSON form is what the lock file and recovery evidence store.
type Holder struct {
	PID         int       `json:"pid"`
	Host        string    `json:"host"`
	Incarnation string    `json:"incarnation"`
	Since       time.Time `json:"since"`
	BootID      string    `json:"boot_id,omitempty"`    // the host's boot id when it started
	ProcStart   string    `json:"proc_start,omitempty"` // its start time, clock ticks since boot
	// ReleasedAt is written to the lock file by Release: that holder let
	// go of the lane itself, whether or not its process still runs.
	ReleasedAt *time.Time `json:"released_at,omitempty"`
}

func (h Holder) String() string {
	return fmt.Sprintf("pid %d on %s since %s (incarnation %s)", h.PID, h.Host, h.Since.UTC().Format(time.RFC3339), h.Incarnation)
}

// LaneLock is a held lane lock. Keep it referenced for the life of the
// lane: the file inside it holds the flock, and Go closes an unreferenced
// file (and so drops the lock) when it is garbage collected.
type LaneLock struct {
	Lane   string
	Method string // "flock", or "pg_advisory_lock" on PostgreSQL
	Path   string // the lock file, or the advisory lock's keys and session
	Self   Holder
	// Previous is what the lock file said about the last holder, if it
	// said anything: recorded as evidence, never trusted as liveness.
	Previous *Holder
	// RescuedBy names the running lane that took this (dead) lane's lock
	// to close its orphans; empty for a lane's own lock. See rescue.go.
	RescuedBy string
	// PreviousProcess says, in words, why the previous holder's process is
	// known to be gone, or why it could not be checked (flock only).
	PreviousProcess string

	// hold is what holds the lock, one kind per dialect (lanelock_flock.go,
	// postgres_lock.go); nil once released.
	hold laneHold
}

// laneHold is one kind of lane lock: the flock of a file (SQLite) or a
// session advisory lock (PostgreSQL).
type laneHold interface {
	// check reports whether the lock still stands (see LaneLock.Check).
	check(l *LaneLock) error
	// release drops the lock.
	release(l *LaneLock) error
	// fence is the condition, starting with " AND", that a fenced write
	// carries in its own statement so that it commits only while the lock
	// is held; "" when holding the lock is itself the fence (a flock held
	// by this process's open file for as long as it lives).
	fence() string
	// proof is the evidence sentence of a recovery under this lock.
	proof(l *LaneLock) string
	// lost is closed when the lock is no longer held; nil when loss is
	// found only by check.
	lost() <-chan struct{}
	// takenFromLive says how this lock may have been taken while its
	// previous holder h still runs ("" when that cannot be): a lock file
	// deleted under it, a lock session ended under it. Recovery then
	// refuses while h is alive on this host (lanelock_proof.go).
	takenFromLive(h Holder) string
}

// ValidateLane is the one rule for a lane's name (inkwell.ValidateLane).
func ValidateLane(lane string) error { return inkwell.ValidateLane(lane) }

// LockLane takes the lane's lock without waiting. When another live
// process holds it, it returns an ELANEHELD error naming that holder.
func (s *Store) LockLane(ctx context.Context, lane string) (*LaneLock, error) {
	if err := ValidateLane(lane); err != nil {
		return nil, err
	}
	return s.dialect.lockLane(s, ctx, lane)
}

// lockLaneFile is LockLane on SQLite: the flock, and then the previous
// holder's process proven gone.
func (s *Store) lockLaneFile(ctx context.Context, lane string) (*LaneLock, error) {
	self := newHolder()
	self.Since = s.now().UTC()
	l, err := lockFile(s.path+".lane-"+lane+".lock", lane, self)
	var busy *busyLock
	if errors.As(err, &busy) {
		return nil, s.heldError(ctx, lane, busy.holder)
	}
	if err != nil {
		return nil, err
	}
	if err := s.provePreviousGone(ctx, l); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// Check reports whether the lock still stands. On SQLite the lock file
// must still be the very inode this process locked, and when someone
// deleted or replaced it the holder takes the lock on the new file at once
// (lanelock_flock.go); on PostgreSQL the keeper must not have seen the
// session or the lock go (postgres_lock.go). No claim without it.
func (l *LaneLock) Check() error {
	h := l.hold
	if h == nil {
		return inkwell.Errorf(inkwell.ELANEHELD, "lane %s: lock was released", l.Lane)
	}
	return h.check(l)
}

// Release drops the lock.
func (l *LaneLock) Release() error {
	h := l.hold
	if h == nil {
		return nil
	}
	l.hold = nil
	return h.release(l)
}

// Lost is closed when the lane's lock is no longer proven held (PostgreSQL:
// the lock session died or lost the lock). It is nil, never closed, for a
// file lock, whose loss Check finds by looking.
func (l *LaneLock) Lost() <-chan struct{} {
	if l.hold == nil {
		return nil
	}
	return l.hold.lost()
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}

func newIncarnation() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
