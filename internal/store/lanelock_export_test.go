package store

import "os"

// LockFileOf is the open lock file behind a flock lane lock (nil for
// another kind of lock).
func LockFileOf(l *LaneLock) *os.File {
	if h, ok := l.hold.(*flockHold); ok {
		return h.file
	}
	return nil
}
