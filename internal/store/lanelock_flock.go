package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/inkwell/inkwell"
)

// flockHold is the lane lock on SQLite: an exclusive flock on a file
// beside the database. The kernel drops it when the holding process dies,
// however it dies; but the file can be deleted or replaced under a live
// holder, so it does not prove a holder dead alone (takenFromLive).
type flockHold struct {
	path     string
	mu       sync.Mutex // guards file: Check runs from the loop and the heartbeat
	file     *os.File   // keep referenced: Go closes a collected file, dropping the lock
	restored atomic.Int64
}

// lockFile takes the flock on path for self. When another open file holds
// it, the error is a *busyLock with what the file says of its holder.
func lockFile(path, lane string, self Holder) (*LaneLock, error) {
	f, err := flockPath(path, lane)
	if err != nil {
		return nil, err
	}
	if inc, held := heldHere.take(path, self.Incarnation); held {
		// Granted although this process holds the lane: its lock file was
		// deleted or replaced under that hold (a new file, a new flock),
		// and checkHolder would read a holder of this very process as one
		// that let go.
		unlockAndClose(f)
		return nil, inkwell.Errorf(inkwell.ELANEHELD, "lane %s is held by pid %d on %s (incarnation %s), that is this very process, whose lock file was deleted or replaced under its hold: one hold of a lane per process",
			lane, os.Getpid(), hostname(), inc)
	}
	h := &flockHold{path: path, file: f}
	l := &LaneLock{Lane: lane, Method: "flock", Path: path, Previous: readHolder(f), Self: self, hold: h}
	if err := h.writeSelf(l); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// heldHere is every lane lock file this process holds, by path, with the
// incarnation holding it: what makes checkHolder's "this process itself,
// which released its earlier hold" true.
var heldHere = heldFiles{m: map[string]string{}}

type heldFiles struct {
	mu sync.Mutex
	m  map[string]string
}

// take records path as held by incarnation, unless it is held already
// (then it returns the holder and true).
func (h *heldFiles) take(path, incarnation string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if inc, ok := h.m[path]; ok {
		return inc, true
	}
	h.m[path] = incarnation
	return "", false
}

func (h *heldFiles) drop(path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, path)
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

// check: the file must still be the very inode this process locked. When
// someone deleted or replaced it, the holder takes the lock on the new
// path at once (the process check keeps any other process from starting
// the lane meanwhile: this holder is alive) and carries on; only when
// another process holds the new file does the lane stop.
func (h *flockHold) check(l *LaneLock) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if samePath(h.file, h.path) {
		return nil
	}
	f, err := flockPath(h.path, l.Lane)
	if err != nil {
		return inkwell.Errorf(inkwell.ELANEHELD, "lane %s: the lock file was deleted or replaced, and could not be taken again (%v); stopping the lane", l.Lane, err)
	}
	old := h.file
	h.file = f
	unlockAndClose(old)
	if err := h.writeSelf(l); err != nil {
		return err
	}
	h.restored.Add(1)
	return nil
}

// release writes "released" into the lock file, so that the next holder
// knows this incarnation let go, then drops the flock and closes the file.
func (h *flockHold) release(l *LaneLock) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now().UTC()
	l.Self.ReleasedAt = &now
	_ = h.writeSelf(l) // best effort: without it the next holder checks the process
	defer heldHere.drop(h.path)
	return unlockAndClose(h.file)
}

// unlockAndClose drops the flock, then closes f. Closing alone is not
// enough: a flock belongs to the open file description, and a child
// process forked at that moment (another goroutine's exec, between fork
// and the close-on-exec) shares it, so the lock would outlive the close
// until that child execs or exits, and this very process's next LockLane
// would be refused as held. LOCK_UN drops it for every sharer at once.
func unlockAndClose(f *os.File) error {
	unlockErr := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if err := f.Close(); err != nil {
		return err
	}
	return unlockErr
}

func (h *flockHold) fence() string { return "" }

func (h *flockHold) proof(*LaneLock) string {
	return "flock(LOCK_EX|LOCK_NB) granted on the lane's lock file (the kernel drops it when its holder dies), " +
		"and no previous holder's process runs (see previous_process): so no live process holds this lane"
}

func (h *flockHold) lost() <-chan struct{} { return nil }

func (h *flockHold) takenFromLive(Holder) string {
	return "its lock file was deleted or replaced while its holder runs"
}

func (h *flockHold) writeSelf(l *LaneLock) error {
	b, _ := json.Marshal(l.Self)
	if err := h.file.Truncate(0); err != nil {
		return fmt.Errorf("lane %s: write lock file: %w", l.Lane, err)
	}
	if _, err := h.file.WriteAt(append(b, '\n'), 0); err != nil {
		return fmt.Errorf("lane %s: write lock file: %w", l.Lane, err)
	}
	return h.file.Sync()
}

// Restored counts the times Check found the lock file deleted or replaced
// and took the lock again (0 for other kinds of lock); the lane logs each.
func (l *LaneLock) Restored() int64 {
	if h, ok := l.hold.(*flockHold); ok {
		return h.restored.Load()
	}
	return 0
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
