package store

import (
	"context"
	"database/sql"
	"time"
)

// Test hooks for postgres_fence_test.go (package store_test, which can use
// storetest): they reach past the checks that run before a transaction, to
// show that the fence in the statement refuses on its own.

// RecoverSkippingCheck runs Recover's transaction without LaneLock.Check
// first, as when the lock is lost between that check and the transaction.
func (s *Store) RecoverSkippingCheck(ctx context.Context, l *LaneLock) (RecoveryReport, error) {
	rep := RecoveryReport{Lane: l.Lane}
	now := s.nowTS()
	err := s.inTx(ctx, func(tx *sql.Tx) error { return s.recoverTx(ctx, tx, l, now, &rep) })
	return rep, err
}

// ShiftBackendStart moves the backend start that l's fence compares, as if
// another backend had been given the lock session's pid.
func (l *LaneLock) ShiftBackendStart(d time.Duration) {
	p := l.hold.(*pgLock)
	p.backendStart = p.backendStart.Add(d)
}
