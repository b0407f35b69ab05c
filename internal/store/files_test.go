package store_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

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
