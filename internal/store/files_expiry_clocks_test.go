package store_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Uploads' expiry with two lanes deleting at once, a clock in another
// zone, and PostgreSQL's own clock.

// TestFileExpiry_TwoLanesDeleteEachFileOnce: two processes (two stores on
// one database: serve's retention loop in two lanes) deleting the expired
// uploads at once delete each exactly once, count each once between them,
// and neither fails on a file the other deleted.
func TestFileExpiry_TwoLanesDeleteEachFileOnce(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		past := storetest.MustOpen(t, b.DSN, store.Options{NowFunc: func() time.Time { return time.Now().Add(-2 * time.Hour) }})
		const n = 40
		for range n {
			if _, err := past.CreateFile(t.Context(), store.FileParams{Account: "acme", Purpose: store.FilePurposeBatch, Filename: "in.jsonl",
				Bytes: 3, Lines: 1, Content: strings.NewReader("{}\n"), ExpiresAfter: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		lanes := []*store.Store{storetest.MustOpen(t, b.DSN, store.Options{NoMigrate: true}), storetest.MustOpen(t, b.DSN, store.Options{NoMigrate: true})}
		got := make([]store.Expired, len(lanes))
		errs := make([]error, len(lanes))
		var wg sync.WaitGroup
		for i, s := range lanes {
			wg.Go(func() { got[i], errs[i] = s.DeleteExpiredFiles(t.Context(), false, "retention") })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("lane %d: %v", i, err)
			}
		}
		if got[0].Files+got[1].Files != n || got[0].Bytes+got[1].Bytes != 3*n {
			t.Errorf("the lanes counted %+v and %+v; want %d files (%d bytes) between them", got[0], got[1], n, 3*n)
		}
		if c := count(t, past, `SELECT COUNT(*) FROM files WHERE deleted_at IS NOT NULL AND deleted_by = 'retention'`); c != n {
			t.Errorf("%d files marked deleted by retention; want %d", c, n)
		}
		if c := count(t, past, `SELECT COUNT(*) FROM file_parts`); c != 0 {
			t.Errorf("%d parts left; want 0", c)
		}
	})
}

// TestFileExpiry_ClockInAnotherZone: the injected clock in a zone other
// than UTC: the expiry is compared as a time (SQLite stores UTC text), not
// as the zone's wall clock.
func TestFileExpiry_ClockInAnotherZone(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		zone := time.FixedZone("UTC+14", 14*3600)
		var mu sync.Mutex
		now := time.Date(2026, 3, 1, 23, 30, 0, 0, zone)
		s := storetest.MustOpen(t, b.DSN, store.Options{NowFunc: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
		f, err := s.CreateFile(t.Context(), store.FileParams{Account: "acme", Purpose: store.FilePurposeBatch, Filename: "in.jsonl",
			Bytes: 3, Lines: 1, Content: strings.NewReader("{}\n"), ExpiresAfter: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		set := func(d time.Duration) {
			mu.Lock()
			now = time.Date(2026, 3, 1, 23, 30, 0, 0, zone).Add(d)
			mu.Unlock()
		}
		set(time.Hour - time.Microsecond)
		if _, err := s.File(t.Context(), f.ID); err != nil {
			t.Errorf("a microsecond before its expiry: %v", err)
		}
		set(time.Hour)
		if _, err := s.File(t.Context(), f.ID); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("at its expiry: %v; want not found", err)
		}
	})
}

// TestFileExpiry_PostgresDatabaseClock: on PostgreSQL without NowFunc the
// store's clock is the database's (dbClock): a file whose expires_at the
// database's clock has passed is gone, and retention deletes it.
func TestFileExpiry_PostgresDatabaseClock(t *testing.T) {
	t.Parallel()
	s := storetest.MustOpen(t, storetest.PostgresDSN(t), store.Options{})
	f, err := s.CreateFile(t.Context(), store.FileParams{Account: "acme", Purpose: store.FilePurposeBatch, Filename: "in.jsonl",
		Bytes: 3, Lines: 1, Content: strings.NewReader("{}\n"), ExpiresAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.File(t.Context(), f.ID); err != nil {
		t.Fatalf("a file that expires in an hour: %v", err)
	}
	if _, err := s.DB().ExecContext(t.Context(), `UPDATE files SET expires_at = clock_timestamp() - interval '1 second' WHERE id = $1`, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.File(t.Context(), f.ID); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
		t.Errorf("past its expiry by the database's clock: %v; want not found", err)
	}
	if got, err := s.DeleteExpiredFiles(t.Context(), false, "retention"); err != nil || got.Files != 1 {
		t.Errorf("DeleteExpiredFiles = %+v, %v; want the 1 file", got, err)
	}
}
