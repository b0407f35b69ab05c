package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestPrune_DeletesExpiredUploads: inkwell prune deletes the uploads
// whose expires_after has passed, whatever --older-than says (a dry run
// counts them and writes nothing), and leaves an upload that has not
// expired, or has no expiry, alone.
func TestPrune_DeletesExpiredUploads(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	upload := func(st *store.Store, after time.Duration) string {
		t.Helper()
		f, err := st.CreateFile(t.Context(), store.FileParams{Account: "default", Purpose: store.FilePurposeBatch, Filename: "in.jsonl",
			Bytes: 3, Lines: 1, Content: strings.NewReader("{}\n"), ExpiresAfter: after})
		if err != nil {
			t.Fatal(err)
		}
		return f.ID
	}
	// Stored two hours ago, to go after one: expired an hour ago.
	past := storetest.MustOpen(t, db, store.Options{NowFunc: func() time.Time { return time.Now().Add(-2 * time.Hour) }})
	expired := upload(past, time.Hour)
	if err := past.Close(); err != nil {
		t.Fatal(err)
	}
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	later, kept := upload(st, 24*time.Hour), upload(st, 0)
	parts := func(id string) int {
		t.Helper()
		var n int
		if err := st.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM file_parts WHERE file_id = ?`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	code, stdout, stderr := runCLI(t, "prune", "--older-than", "30d", "--dry-run", "--db", db)
	if code != 0 || !strings.Contains(stdout, "dry run: 1 upload whose expiry has passed (") || parts(expired) != 1 {
		t.Errorf("dry run: exit %d, %d parts left\n%s%s", code, parts(expired), stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "prune", "--older-than", "30d", "--db", db)
	if code != 0 || !strings.Contains(stdout, "deleted 1 upload whose expiry had passed (") {
		t.Errorf("prune: exit %d\n%s%s", code, stdout, stderr)
	}
	if parts(expired) != 0 || parts(later) != 1 || parts(kept) != 1 {
		t.Errorf("after prune: parts of the expired, the later and the kept upload %d, %d, %d; want 0, 1, 1", parts(expired), parts(later), parts(kept))
	}
	if _, err := st.File(t.Context(), later); err != nil {
		t.Errorf("the upload that expires tomorrow: %v", err)
	}
	code, stdout, _ = runCLI(t, "prune", "--older-than", "30d", "--db", db)
	if code != 0 || strings.Contains(stdout, "upload") {
		t.Errorf("a second prune: exit %d\n%s; want nothing said of uploads", code, stdout)
	}
}
