package store_test

import (
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_UnreadyWhileWritesFail: Unready (serve's /readyz) follows how
// write transactions end: nil before any and after a commit; the database's
// own refusal (here SQLite's write lock, held past the busy timeout by
// another connection) sets it, saying since when and why; a refusal that
// says nothing of the database (a retry of a queued job, rolled back)
// leaves it as it was; the next commit clears it.
func TestStore_UnreadyWhileWritesFail(t *testing.T) {
	t.Parallel()
	path := storetest.SQLitePath(t)
	s := storetest.MustOpen(t, path, store.Options{BusyTimeout: 50 * time.Millisecond})
	if err := s.Unready(); err != nil {
		t.Fatalf("Unready on a new store: %v, want nil", err)
	}
	if _, _, err := s.Accept(t.Context(), acceptParams("first", "a poem")); err != nil {
		t.Fatal(err)
	}
	if err := s.Unready(); err != nil {
		t.Fatalf("Unready after a commit: %v, want nil", err)
	}

	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(50)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	holder, err := other.Begin()
	if err != nil {
		t.Fatalf("the other connection's BEGIN IMMEDIATE: %v", err)
	}
	if _, _, err := s.Accept(t.Context(), acceptParams("second", "another poem")); inkwell.ErrorCode(err) != inkwell.EUNAVAILABLE {
		t.Fatalf("Accept while another connection holds the write lock: %v, want unavailable", err)
	}
	err = s.Unready()
	if inkwell.ErrorCode(err) != inkwell.EUNAVAILABLE || !strings.Contains(err.Error(), "database writes have failed since") || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("Unready while writes fail as busy: %v, want unavailable saying since when, and busy", err)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RetryIfFailed(t.Context(), 1, "cli"); inkwell.ErrorCode(err) != inkwell.ECONFLICT {
		t.Fatalf("a retry of a queued job: %v, want conflict", err)
	}
	if err := s.Unready(); err == nil {
		t.Fatalf("Unready after a refusal that says nothing of the database: nil, want it still unready (no commit since)")
	}
	if _, _, err := s.Accept(t.Context(), acceptParams("third", "a third poem")); err != nil {
		t.Fatal(err)
	}
	if err := s.Unready(); err != nil {
		t.Fatalf("Unready after the next commit: %v, want nil", err)
	}
}

// TestStore_UnreadyOnceItsFilesAreGone: once CheckFiles found a database
// file deleted under the store, Unready says the server is stopping, for
// good, whatever the writes since.
func TestStore_UnreadyOnceItsFilesAreGone(t *testing.T) {
	t.Parallel()
	path := storetest.SQLitePath(t)
	s := storetest.MustOpen(t, path, store.Options{})
	if _, _, err := s.Accept(t.Context(), acceptParams("first", "a poem")); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckFiles(t.Context()); err != nil {
		t.Fatalf("CheckFiles with every file in place: %v", err)
	}
	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckFiles(t.Context()); err == nil {
		t.Fatal("CheckFiles after the -wal was deleted: nil, want an error")
	}
	if err := s.Unready(); err == nil || !strings.Contains(err.Error(), "this server is stopping") {
		t.Errorf("Unready once a file is gone: %v, want it to say the server is stopping", err)
	}
}
