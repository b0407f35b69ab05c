package store_test

import (
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// TestPostgres_Fence: on PostgreSQL a claim carries the lane lock's fence
// in its own statement, and a claim without the lock is refused.
func TestPostgres_Fence(t *testing.T) {
	t.Parallel()
	t.Run("ClaimWithoutTheLockIsRefused", func(t *testing.T) {
		t.Parallel()
		f := newPGLanes(t)
		f.accept("k")
		_, err := f.sa.Claim(t.Context(), "A")
		if inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Errorf("Claim(A) holding no lock = %v, want %s", err, inkwell.ELANEHELD)
		}
		l := pgMustLock(t, f.sa, "A")
		l.Release()
		if _, err := f.sa.Claim(t.Context(), "A"); inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Errorf("Claim(A) after Release = %v, want %s", err, inkwell.ELANEHELD)
		}
		if n := f.count(`SELECT COUNT(*) FROM job_attempts`) + f.count(`SELECT COUNT(*) FROM jobs WHERE status <> 'queued'`); n != 0 {
			t.Errorf("%d attempts or moved jobs after refused claims, want 0", n)
		}
	})
	t.Run("ClaimComparesTheBackendStart", func(t *testing.T) {
		t.Parallel()
		f := newPGLanes(t)
		l := pgMustLock(t, f.sa, "A")
		f.accept("k")
		// The same pid, a backend started a microsecond later: another session.
		l.ShiftBackendStart(time.Microsecond)
		if c, err := f.sa.Claim(t.Context(), "A"); err != nil || c != nil {
			t.Errorf("Claim(A) fenced on another backend start = %+v, %v; want nothing claimed", c, err)
		}
		l.ShiftBackendStart(-time.Microsecond)
		if c, err := f.sa.Claim(t.Context(), "A"); err != nil || c == nil {
			t.Errorf("Claim(A) under its own session = %+v, %v; want the job", c, err)
		}
	})
}

func (f *pgLanes) accept(key string) {
	f.t.Helper()
	if _, _, err := f.sa.Accept(f.t.Context(), store.AcceptParams{IdempotencyKey: key, RequestHash: "h", Payload: []byte(`{"prompt":"x"}`)}); err != nil {
		f.t.Fatal(err)
	}
}
