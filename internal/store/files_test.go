package store_test

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Tests of files (docs/batches.md) at the store, on both dialects:
// internal/api/files_test.go tests the routes and their limits.

// TestStore_FileRoundTrip: a file of several parts reads back byte for
// byte, a part at a time; its row says what it holds.
func TestStore_FileRoundTrip(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		content := bytes.Repeat([]byte("{\"custom_id\":\"x\"}\n"), 2*store.FilePartBytes/18+7) // just over two parts
		f, err := s.CreateFile(t.Context(), store.FileParams{Account: "acme", Purpose: store.FilePurposeBatch, Filename: "in.jsonl",
			Bytes: int64(len(content)), Lines: 3, Content: bytes.NewReader(content)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(f.ID, "file-") || len(f.ID) != len("file-")+24 || f.CreatedAt.IsZero() {
			t.Errorf("file %+v: want an id file-<24 hex> and a time", f)
		}
		got, err := s.File(t.Context(), f.ID)
		if err != nil || got.Account != "acme" || got.Bytes != int64(len(content)) || got.Lines != 3 || got.Filename != "in.jsonl" || got.Purpose != "batch" {
			t.Errorf("File = %+v, %v; want acme's in.jsonl of %d bytes, 3 lines", got, err, len(content))
		}
		if n := count(t, s, `SELECT COUNT(*) FROM file_parts WHERE file_id = $1`, f.ID); n != 3 {
			t.Errorf("%d parts, want 3 of at most %d bytes", n, store.FilePartBytes)
		}
		r, err := s.FileContent(t.Context(), f.ID)
		if err != nil {
			t.Fatal(err)
		}
		back, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(back, content) {
			t.Errorf("content read back: %d bytes, %v; want the %d bytes stored", len(back), err, len(content))
		}
	})
}

// TestStore_FileRefused: a purpose other than batch, and content shorter
// or longer than announced, are refused and write nothing; a file that
// does not exist is ENOTFOUND.
func TestStore_FileRefused(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		for _, p := range []store.FileParams{
			{Account: "a", Purpose: "fine-tune", Filename: "f", Bytes: 2, Content: strings.NewReader("{}")},
			{Account: "a", Purpose: "batch", Filename: "f", Bytes: 3, Content: strings.NewReader("{}")},
			{Account: "a", Purpose: "batch", Filename: "f", Bytes: 1, Content: strings.NewReader("{}")},
		} {
			if _, err := s.CreateFile(t.Context(), p); inkwell.ErrorCode(err) != inkwell.EINVALID {
				t.Errorf("CreateFile %+v: %v, want invalid", p, err)
			}
		}
		if n := count(t, s, `SELECT (SELECT COUNT(*) FROM files) + (SELECT COUNT(*) FROM file_parts)`); n != 0 {
			t.Errorf("%d rows written by refused files, want 0", n)
		}
		if _, err := s.File(t.Context(), "file-0"); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("File of none: %v, want not_found", err)
		}
		if _, err := s.FileContent(t.Context(), "file-0"); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("FileContent of none: %v, want not_found", err)
		}
	})
}

// TestStore_EmptyFile: a file of no bytes has no part and reads as empty.
func TestStore_EmptyFile(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		f, err := s.CreateFile(t.Context(), store.FileParams{Account: "a", Purpose: "batch", Filename: "empty", Content: strings.NewReader("")})
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.FileContent(t.Context(), f.ID)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(r); err != nil || len(b) != 0 {
			t.Errorf("empty file read %q, %v", b, err)
		}
	})
}

// TestStore_FileDelete: DeleteFile removes the content and marks the row
// (kept for the batches that name it); the file is ENOTFOUND from then
// on, to File, FileContent, Files and a second DeleteFile; another file
// is untouched.
func TestStore_FileDelete(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		mk := func(content string) store.File {
			f, err := s.CreateFile(t.Context(), store.FileParams{Account: "acme", Purpose: store.FilePurposeBatch, Filename: "in.jsonl",
				Bytes: int64(len(content)), Lines: 1, Content: strings.NewReader(content)})
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		gone, kept := mk("{\"a\":1}\n"), mk("{\"b\":2}\n")
		f, err := s.DeleteFile(t.Context(), gone.ID, "token 7")
		if err != nil || f.ID != gone.ID || f.Account != "acme" || f.Bytes != gone.Bytes {
			t.Fatalf("DeleteFile = %+v, %v; want the file deleted", f, err)
		}
		if _, err := s.File(t.Context(), gone.ID); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("File after delete: %v, want not found", err)
		}
		if _, err := s.FileContent(t.Context(), gone.ID); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("FileContent after delete: %v, want not found", err)
		}
		if _, err := s.DeleteFile(t.Context(), gone.ID, "token 7"); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("a second DeleteFile: %v, want not found", err)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM file_parts WHERE file_id = $1`, gone.ID); n != 0 {
			t.Errorf("%d parts left of the deleted file, want 0", n)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM files WHERE id = $1 AND deleted_at IS NOT NULL AND deleted_by = 'token 7'`, gone.ID); n != 1 {
			t.Errorf("the deleted file's row: %d marked deleted by token 7, want 1 (kept for its batches)", n)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM file_parts WHERE file_id = $1`, kept.ID); n != 1 {
			t.Errorf("the other file has %d parts, want its 1", n)
		}
		list, more, err := s.Files(t.Context(), store.FileList{Account: "acme", Limit: 10})
		if err != nil || more || len(list) != 1 || list[0].ID != kept.ID {
			t.Errorf("Files = %+v, more %v, %v; want only %s", list, more, err, kept.ID)
		}
		if list, _, err := s.Files(t.Context(), store.FileList{Account: "acme", Limit: 10, After: gone.ID, Ascending: true}); err != nil || len(list) != 1 || list[0].ID != kept.ID {
			t.Errorf("Files after the deleted file, oldest first = %+v, %v; want %s, the page on from where it was", list, err, kept.ID)
		}
	})
}

// TestStore_FileDeletedWhileReadIsAnError: a file deleted while a reader
// is between two of its parts ends that reader with ENOTFOUND, never with
// io.EOF after the parts it got: a batch made of it would otherwise lose
// the lines past the cut, with no error.
func TestStore_FileDeletedWhileReadIsAnError(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		content := bytes.Repeat([]byte("{\"custom_id\":\"x\"}\n"), store.FilePartBytes/18+7) // just over one part
		f, err := s.CreateFile(t.Context(), store.FileParams{Account: "acme", Purpose: store.FilePurposeBatch, Filename: "in.jsonl",
			Bytes: int64(len(content)), Lines: 2, Content: bytes.NewReader(content)})
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.FileContent(t.Context(), f.ID)
		if err != nil {
			t.Fatal(err)
		}
		first := make([]byte, store.FilePartBytes)
		if _, err := io.ReadFull(r, first); err != nil {
			t.Fatalf("the first part: %v", err)
		}
		if _, err := s.DeleteFile(t.Context(), f.ID, "test"); err != nil {
			t.Fatal(err)
		}
		rest, err := io.ReadAll(r)
		if inkwell.ErrorCode(err) != inkwell.ENOTFOUND || !strings.Contains(err.Error(), "deleted while it was read") {
			t.Errorf("reading on after the delete: %d bytes, %v; want a not-found error saying the file was deleted", len(rest), err)
		}
	})
}

// TestStore_FilesPages: Files lists one account's files newest first (or
// oldest first), a page at a time after the last id seen, each file once,
// and says when more follow; a purpose filters them.
func TestStore_FilesPages(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		var ids []string // oldest first
		for i := range 5 {
			f, err := s.CreateFile(t.Context(), store.FileParams{Account: "acme", Purpose: store.FilePurposeBatch, Filename: "in.jsonl",
				Bytes: 2, Content: strings.NewReader("{}")})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, f.ID)
			if i == 2 { // another account's, between acme's
				if _, err := s.CreateFile(t.Context(), store.FileParams{Account: "globex", Purpose: store.FilePurposeBatch, Filename: "g.jsonl",
					Bytes: 2, Content: strings.NewReader("{}")}); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, asc := range []bool{false, true} {
			got := pageAll(t, s, store.FileList{Account: "acme", Limit: 2, Ascending: asc})
			want := slices.Clone(ids)
			if !asc {
				slices.Reverse(want)
			}
			if !slices.Equal(got, want) {
				t.Errorf("ascending=%v: pages list %v, want %v", asc, got, want)
			}
		}
		all, _, err := s.Files(t.Context(), store.FileList{Limit: 100})
		if err != nil || len(all) != 6 {
			t.Errorf("every account's files: %d, %v; want 6", len(all), err)
		}
		if none, _, err := s.Files(t.Context(), store.FileList{Account: "acme", Purpose: "fine-tune", Limit: 100}); err != nil || len(none) != 0 {
			t.Errorf("purpose fine-tune: %d files, %v; want none", len(none), err)
		}
		if _, _, err := s.Files(t.Context(), store.FileList{Account: "globex", Limit: 2, After: ids[0]}); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("globex's page after acme's file: %v, want not found", err)
		}
	})
}

// TestStore_FileExpiry: an upload stored with ExpiresAfter is a file until
// then, and from its expiry on is ENOTFOUND (File, FileContent, Files)
// with its content still there; DeleteExpiredFiles then deletes it as
// DeleteFile does (a dry run counts and writes nothing), and leaves a
// file without expiry alone.
func TestStore_FileExpiry(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		clock := newClock()
		s := storetest.MustOpen(t, b.DSN, store.Options{NowFunc: clock.Now})
		mk := func(after time.Duration) store.File {
			f, err := s.CreateFile(t.Context(), store.FileParams{Account: "acme", Purpose: store.FilePurposeBatch, Filename: "in.jsonl",
				Bytes: 3, Lines: 1, Content: strings.NewReader("{}\n"), ExpiresAfter: after})
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		going, staying := mk(time.Hour), mk(0)
		if got, err := s.File(t.Context(), going.ID); err != nil || got.ExpiresAt == nil || !got.ExpiresAt.Equal(got.CreatedAt.Add(time.Hour)) || staying.ExpiresAt != nil {
			t.Fatalf("File = %+v, %v; want it, expiring an hour after it was stored (and the other never: %v)", got, err, staying.ExpiresAt)
		}
		clock.Advance(time.Hour - time.Microsecond)
		if n, err := s.DeleteExpiredFiles(t.Context(), false, "retention"); err != nil || n != (store.Expired{}) {
			t.Errorf("before its expiry: DeleteExpiredFiles = %+v, %v; want nothing", n, err)
		}
		clock.Advance(time.Microsecond)
		if _, err := s.File(t.Context(), going.ID); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("File at its expiry: %v, want not found", err)
		}
		if _, err := s.FileContent(t.Context(), going.ID); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("FileContent at its expiry: %v, want not found", err)
		}
		if list, _, err := s.Files(t.Context(), store.FileList{Limit: 10}); err != nil || len(list) != 1 || list[0].ID != staying.ID {
			t.Errorf("Files at its expiry = %+v, %v; want only %s", list, err, staying.ID)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM file_parts WHERE file_id = $1`, going.ID); n != 1 {
			t.Errorf("expired, not yet deleted: %d parts, want its 1 (retention deletes it)", n)
		}
		if n, err := s.DeleteExpiredFiles(t.Context(), true, "retention"); err != nil || n != (store.Expired{Files: 1, Bytes: 3}) {
			t.Errorf("dry run = %+v, %v; want 1 file of 3 bytes", n, err)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM file_parts WHERE file_id = $1`, going.ID); n != 1 {
			t.Errorf("after a dry run: %d parts, want its 1: a dry run writes nothing", n)
		}
		if n, err := s.DeleteExpiredFiles(t.Context(), false, "retention"); err != nil || n != (store.Expired{Files: 1, Bytes: 3}) {
			t.Errorf("DeleteExpiredFiles = %+v, %v; want 1 file of 3 bytes", n, err)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM file_parts WHERE file_id = $1`, going.ID); n != 0 {
			t.Errorf("after DeleteExpiredFiles: %d parts, want 0", n)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM files WHERE id = $1 AND deleted_at IS NOT NULL AND deleted_by = 'retention'`, going.ID); n != 1 {
			t.Errorf("the expired file's row: %d marked deleted by retention, want 1", n)
		}
		if n, err := s.DeleteExpiredFiles(t.Context(), false, "retention"); err != nil || n != (store.Expired{}) {
			t.Errorf("a second run = %+v, %v; want nothing", n, err)
		}
		if _, err := s.File(t.Context(), staying.ID); err != nil {
			t.Errorf("the file without expiry: %v", err)
		}
	})
}

// pageAll is the ids of every file l lists, a page of l.Limit at a time,
// each page after the last id of the one before, as a client pages.
func pageAll(t *testing.T, s *store.Store, l store.FileList) []string {
	t.Helper()
	var got []string
	for page := 0; ; page++ {
		list, more, err := s.Files(t.Context(), l)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range list {
			got = append(got, f.ID)
		}
		if !more {
			return got
		}
		if page > 1000 || len(list) == 0 {
			t.Fatalf("pages do not end: %v", got)
		}
		l.After = list[len(list)-1].ID
	}
}
