package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// expiredUploads stores n uploads in db, each expired an hour ago.
func expiredUploads(t *testing.T, db string, n int) {
	t.Helper()
	past := storetest.MustOpen(t, db, store.Options{NowFunc: func() time.Time { return time.Now().Add(-2 * time.Hour) }})
	for range n {
		if _, err := past.CreateFile(t.Context(), store.FileParams{Account: "default", Purpose: store.FilePurposeBatch, Filename: "in.jsonl",
			Bytes: 3, Lines: 1, Content: strings.NewReader("{}\n"), ExpiresAfter: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if err := past.Close(); err != nil {
		t.Fatal(err)
	}
}

// pruneStoppedAfterOneUpload runs inkwell prune's report (pruneOlderThan)
// on db, stopped (Ctrl-C: ctx cancelled) after the first expired upload
// was deleted: the store's clock cancels ctx when DeleteExpiredFiles
// reads it for its second file (its 4th read: PruneOlderThan's cut-off,
// then the first file's look-up and DeleteFile, then the second look-up).
func pruneStoppedAfterOneUpload(t *testing.T, db string) (code int, stdout, stderr string, deleted int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var armed atomic.Bool
	var reads atomic.Int32
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true, NowFunc: func() time.Time {
		if armed.Load() && reads.Add(1) == 4 {
			cancel()
		}
		return time.Now()
	}})
	armed.Store(true)
	var out, errOut bytes.Buffer
	code = pruneOlderThan(ctx, st, 0, false, &out, &errOut, false)
	if err := st.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM files WHERE deleted_at IS NOT NULL`).Scan(&deleted); err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String(), deleted
}

// TestPrune_StoppedWhileDeletingUploadsSaysWhatItDeleted: a prune stopped
// by Ctrl-C while it deletes expired uploads keeps what it deleted
// (docs/retention.md) and must say so: "deleted 1 upload whose expiry had
// passed", as it says the jobs it pruned before a stop. With no job to
// prune, the report is dropped: Prune returns at once
// ("delete expired uploads: …"), rep.Matched is 0, and runPrune only
// prints the error.
func TestPrune_StoppedWhileDeletingUploadsSaysWhatItDeleted(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	expiredUploads(t, db, 3)
	code, stdout, stderr, deleted := pruneStoppedAfterOneUpload(t, db)
	if deleted != 1 {
		t.Fatalf("the stop did not fall after the first upload: %d deleted (exit %d)\n%s%s", deleted, code, stdout, stderr)
	}
	if code == 0 || !strings.Contains(stdout+stderr, "deleted 1 upload") {
		t.Errorf("prune stopped after deleting 1 expired upload: exit %d\nstdout: %s\nstderr: %s\nwant exit 1 and the upload it deleted said", code, stdout, stderr)
	}
}

// TestPrune_StoppedWhileDeletingUploadsReportsTheFile: the same stop with
// a job to prune: the report goes on, but Prune returned before it read
// the SQLite file's state, so it says "file …: 0.0 MB before, 0.0 MB
// after" of a file that is not empty.
func TestPrune_StoppedWhileDeletingUploadsReportsTheFile(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	expiredUploads(t, db, 3)
	finishedJob(t, db, "old")
	code, stdout, stderr, deleted := pruneStoppedAfterOneUpload(t, db)
	if deleted != 1 {
		t.Fatalf("the stop did not fall after the first upload: %d deleted (exit %d)\n%s%s", deleted, code, stdout, stderr)
	}
	fi, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() < 100_000 {
		t.Fatalf("the file is %d bytes: too small for the check", fi.Size())
	}
	if strings.Contains(stdout, "0.0 MB before, 0.0 MB after") {
		t.Errorf("prune stopped while deleting uploads reports an empty file (it is %d bytes):\n%s%s", fi.Size(), stdout, stderr)
	}
}
