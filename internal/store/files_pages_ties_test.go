package store_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Store.Files through files created at one instant, and Store.DeleteFile
// of one file from several callers at once.

// TestStore_FilesPagesThroughTies: files created at the same instant
// (and a microsecond apart, around them) are paged each once, in
// (created_at, id) order, both ways, on both dialects; SQLite's created_at
// is TimeLayout text, whose text order is time order.
func TestStore_FilesPagesThroughTies(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		base := time.Date(2026, 12, 6, 9, 59, 59, 999_999_000, time.UTC)
		var now time.Time
		s := storetest.MustOpen(t, b.DSN, store.Options{NowFunc: func() time.Time { return now }})
		type made struct {
			id string
			at time.Time
		}
		var files []made
		for i, offset := range []time.Duration{0, 0, 0, time.Microsecond, 0, -time.Microsecond, time.Microsecond, 0, 3 * time.Hour} {
			now = base.Add(offset)
			f, err := s.CreateFile(t.Context(), store.FileParams{Account: "acme", Purpose: store.FilePurposeBatch, Filename: "in.jsonl",
				Bytes: 2, Content: strings.NewReader("{}")})
			if err != nil {
				t.Fatal(i, err)
			}
			files = append(files, made{f.ID, now})
		}
		if b.Name == "sqlite" {
			var text string
			if err := s.DB().QueryRowContext(t.Context(), `SELECT created_at FROM files WHERE id = ?`, files[0].id).Scan(&text); err != nil || text != base.Format(store.TimeLayout) {
				t.Errorf("stored created_at %q, %v; want %q (TimeLayout)", text, err, base.Format(store.TimeLayout))
			}
		}
		want := slices.Clone(files)
		slices.SortFunc(want, func(a, b made) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return strings.Compare(a.id, b.id)
		})
		var asc []string
		for _, m := range want {
			asc = append(asc, m.id)
		}
		for _, ascending := range []bool{true, false} {
			for _, limit := range []int{1, 2, 4, 100} {
				got := pageAll(t, s, store.FileList{Account: "acme", Limit: limit, Ascending: ascending})
				w := slices.Clone(asc)
				if !ascending {
					slices.Reverse(w)
				}
				if !slices.Equal(got, w) {
					t.Errorf("ascending=%v limit=%d: %v; want %v", ascending, limit, got, w)
				}
			}
		}
	})
}

// TestStore_DeleteFileTwiceAtOnce: of DeleteFiles of one file running
// at once, exactly one deletes it, on both dialects.
func TestStore_DeleteFileTwiceAtOnce(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		for round := range 5 {
			f, err := s.CreateFile(t.Context(), store.FileParams{Account: "acme", Purpose: store.FilePurposeBatch, Filename: "in.jsonl",
				Bytes: 2, Content: strings.NewReader("{}")})
			if err != nil {
				t.Fatal(err)
			}
			errs := make([]error, 6)
			done := make(chan struct{})
			for i := range errs {
				go func() {
					_, errs[i] = s.DeleteFile(t.Context(), f.ID, "test")
					done <- struct{}{}
				}()
			}
			for range errs {
				<-done
			}
			ok := 0
			for _, err := range errs {
				if err == nil {
					ok++
				} else if !strings.Contains(err.Error(), "not found") {
					t.Errorf("round %d: DeleteFile: %v; want nil or not found", round, err)
				}
			}
			if ok != 1 {
				t.Errorf("round %d: %d DeleteFiles succeeded (%v); want 1", round, ok, errs)
			}
		}
	})
}
