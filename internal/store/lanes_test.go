package store_test

import (
	"database/sql"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

func TestStore_StopLane(t *testing.T) {
	t.Parallel()
	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			l := mustRegisteredLane(t, s, "local")
			if err := s.StopLane(t.Context(), l, "shutdown"); err != nil {
				t.Fatalf("StopLane: %v", err)
			}
			if got := stopReason(t, s, "local"); got.String != "shutdown" {
				t.Errorf("stop_reason = %q (valid %v), want %q", got.String, got.Valid, "shutdown")
			}
		})
	})
	// A lane stopped by someone else (a rescuer) stops cleanly and keeps
	// the first stop's reason, which is the evidence.
	t.Run("AlreadyStoppedKeepsTheFirstReason", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			l := mustRegisteredLane(t, s, "local")
			if err := s.StopLane(t.Context(), l, "session ended: lane B took its lock"); err != nil {
				t.Fatalf("first StopLane: %v", err)
			}
			if err := s.StopLane(t.Context(), l, "shutdown"); err != nil {
				t.Errorf("second StopLane = %v, want nil (already stopped)", err)
			}
			if got := stopReason(t, s, "local"); got.String != "session ended: lane B took its lock" {
				t.Errorf("stop_reason = %q, want the first stop's", got.String)
			}
		})
	})
	t.Run("AnotherIncarnationIsConflict", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			old := mustRegisteredLane(t, s, "local")
			old.Release()
			mustRegisteredLane(t, s, "local")
			err := s.StopLane(t.Context(), old, "shutdown")
			if inkwell.ErrorCode(err) != inkwell.ECONFLICT {
				t.Errorf("StopLane of a replaced incarnation = %v, want %s", err, inkwell.ECONFLICT)
			}
			if got := stopReason(t, s, "local"); got.Valid {
				t.Errorf("stop_reason = %q after a refused stop, want the new holder's row untouched", got.String)
			}
		})
	})
}

func mustRegisteredLane(t *testing.T, s *store.Store, lane string) *store.LaneLock {
	t.Helper()
	l := mustLockLane(t, s, lane)
	if err := s.RegisterLane(t.Context(), l); err != nil {
		t.Fatalf("RegisterLane %s: %v", lane, err)
	}
	return l
}

func stopReason(t *testing.T, s *store.Store, lane string) sql.NullString {
	t.Helper()
	var r sql.NullString
	if err := s.DB().QueryRowContext(t.Context(), rebind(s, `SELECT stop_reason FROM lanes WHERE name = $1`), lane).Scan(&r); err != nil {
		t.Fatalf("lanes row %s: %v", lane, err)
	}
	return r
}
