package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
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

	mu       sync.Mutex // guards file: Check runs from the loop and the heartbeat
	file     *os.File
	restored atomic.Int64 // times Check re-took a deleted or replaced lock file
	pg       *pgLock      // PostgreSQL: the session holding the advisory lock
}

var laneNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ValidateLane checks a lane name: 1–63 letters, digits, '.', '_' or '-'.
func ValidateLane(lane string) error {
	if !laneNameRE.MatchString(lane) {
		return inkwell.Errorf(inkwell.EINVALID, "lane %q: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", lane)
	}
	return nil
}

// LockLane takes the lane's lock without waiting. When another live
// process holds it, it returns an ELANEHELD error naming that holder.
func (s *Store) LockLane(ctx context.Context, lane string) (*LaneLock, error) {
	if err := ValidateLane(lane); err != nil {
		return nil, err
	}
	if s.dialect.name != "sqlite" {
		return s.lockLanePostgres(ctx, lane)
	}
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

// lockFile takes the flock on path for self. When another open file holds
// it, the error is a *busyLock with what the file says of its holder.
func lockFile(path, lane string, self Holder) (*LaneLock, error) {
	f, err := flockPath(path, lane)
	if err != nil {
		return nil, err
	}
	l := &LaneLock{Lane: lane, Method: "flock", Path: path, file: f, Previous: readHolder(f), Self: self}
	if err := l.writeSelf(); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// busyLock is flockPath's answer when another open file holds the lock:
// holder is what the file says of its holder (nil when it says nothing).
type busyLock struct{ holder *Holder }

func (b *busyLock) Error() string { return "lock held" }

// flockPath opens (creating) path and takes its flock without waiting.
func flockPath(path, lane string) (*os.File, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("lane %s: open lock file: %w", lane, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			holder := readHolder(f)
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, &busyLock{holder: holder}
			}
			return nil, fmt.Errorf("lane %s: flock %s: %w", lane, path, err)
		}
		// The file may have been unlinked or replaced between open and
		// flock; a lock on an orphaned inode proves nothing. Try again.
		if !samePath(f, path) {
			f.Close()
			continue
		}
		return f, nil
	}
}

// Check reports whether the lock still stands for its path: the file must
// still be the very inode this process locked. When someone deleted or
// replaced the file, the holder takes the lock on the new path at once (the
// process check keeps any other process from starting the lane meanwhile:
// this holder is alive) and carries on; only when another process holds
// the new file does the lane stop.
func (l *LaneLock) Check() error {
	if l.pg != nil {
		return l.pg.check()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return inkwell.Errorf(inkwell.ELANEHELD, "lane %s: lock was released", l.Lane)
	}
	if samePath(l.file, l.Path) {
		return nil
	}
	f, err := flockPath(l.Path, l.Lane)
	if err != nil {
		return inkwell.Errorf(inkwell.ELANEHELD, "lane %s: the lock file was deleted or replaced, and could not be taken again (%v); stopping the lane", l.Lane, err)
	}
	old := l.file
	l.file = f
	old.Close()
	if err := l.writeSelf(); err != nil {
		return err
	}
	l.restored.Add(1)
	return nil
}

// Restored counts the times Check found the lock file deleted or replaced
// and took the lock again; the lane logs each one.
func (l *LaneLock) Restored() int64 { return l.restored.Load() }

// Release drops the lock. The lock file stays, naming the last holder and
// saying that it let go.
func (l *LaneLock) Release() error {
	if l.pg != nil {
		err := l.pg.release()
		l.pg = nil
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	now := time.Now().UTC()
	l.Self.ReleasedAt = &now
	_ = l.writeSelf()     // best effort: without it the next holder checks the process
	err := l.file.Close() // closing the last descriptor releases the flock
	l.file = nil
	return err
}

func (l *LaneLock) writeSelf() error {
	b, _ := json.Marshal(l.Self)
	if err := l.file.Truncate(0); err != nil {
		return fmt.Errorf("lane %s: write lock file: %w", l.Lane, err)
	}
	if _, err := l.file.WriteAt(append(b, '\n'), 0); err != nil {
		return fmt.Errorf("lane %s: write lock file: %w", l.Lane, err)
	}
	return l.file.Sync()
}

func readHolder(f *os.File) *Holder {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 4096))
	if err != nil || len(b) == 0 {
		return nil
	}
	var h Holder
	if json.Unmarshal(b, &h) != nil {
		return nil
	}
	return &h
}

func samePath(f *os.File, path string) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	pi, err := os.Stat(path)
	if err != nil {
		return false
	}
	return os.SameFile(fi, pi)
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
