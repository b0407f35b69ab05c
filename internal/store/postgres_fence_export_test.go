package store

import "time"

// Test hooks for postgres_fence_test.go (package store_test, which can use
// storetest).

// ShiftBackendStart moves the backend start that l's fence compares, as if
// another backend had been given the lock session's pid.
func (l *LaneLock) ShiftBackendStart(d time.Duration) {
	l.pg.backendStart = l.pg.backendStart.Add(d)
}
