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
	"syscall"
	"time"

	"github.com/inkwell/inkwell"
)

// The lane lock is the evidence that a lane's previous holder is dead.
// On SQLite it is an exclusive flock on a file beside the database: the
// kernel releases it when the holding process dies, however it dies, so
// taking it proves that no live process holds the lane. (PostgreSQL uses a
// session advisory lock; see postgres.go.)

// Holder identifies one process's hold on a lane: one incarnation.
type Holder struct {
	PID         int       `json:"pid"`
	Host        string    `json:"host"`
	Incarnation string    `json:"incarnation"`
	Since       time.Time `json:"since"`
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

	file *os.File
	pg   *pgLock // PostgreSQL: the session holding the advisory lock
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
	return lockFile(s.path+".lane-"+lane+".lock", lane, s.now())
}

func lockFile(path, lane string, now time.Time) (*LaneLock, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("lane %s: open lock file: %w", lane, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			holder := readHolder(f)
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, heldError(lane, path, holder)
			}
			return nil, fmt.Errorf("lane %s: flock %s: %w", lane, path, err)
		}
		// The file may have been unlinked or replaced between open and
		// flock; a lock on an orphaned inode proves nothing. Try again.
		if !samePath(f, path) {
			f.Close()
			continue
		}
		l := &LaneLock{Lane: lane, Method: "flock", Path: path, file: f, Previous: readHolder(f)}
		l.Self = Holder{PID: os.Getpid(), Host: hostname(), Incarnation: newIncarnation(), Since: now.UTC()}
		if err := l.writeSelf(); err != nil {
			l.Release()
			return nil, err
		}
		return l, nil
	}
}

// Check reports whether the lock still stands for its path: the file must
// still be the very inode this process locked. A deleted or replaced lock
// file would let a second process "take" the lane, so the lane must stop.
func (l *LaneLock) Check() error {
	if l.pg != nil {
		return l.pg.check()
	}
	if l.file == nil {
		return inkwell.Errorf(inkwell.ELANEHELD, "lane %s: lock was released", l.Lane)
	}
	if !samePath(l.file, l.Path) {
		return inkwell.Errorf(inkwell.ELANEHELD, "lane %s: lock file %s was deleted or replaced; stopping the lane", l.Lane, l.Path)
	}
	return nil
}

// Release drops the lock. The lock file stays, naming the last holder.
func (l *LaneLock) Release() error {
	if l.pg != nil {
		err := l.pg.release()
		l.pg = nil
		return err
	}
	if l.file == nil {
		return nil
	}
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

func heldError(lane, path string, h *Holder) error {
	who := "another process (the lock file names no holder)"
	if h != nil {
		who = h.String()
	}
	return inkwell.Errorf(inkwell.ELANEHELD, "lane %s is held by %s; lock %s. Refusing to start the lane or recover its rows while its holder is alive", lane, who, path)
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
