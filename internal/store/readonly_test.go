package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Options.ReadOnly: a SQLite file opened for reading only (the fallback of
// inkwell status, show and audit when this user may not write the file or
// its directory) reads what was committed, writes nothing, and makes no
// file beside it.
func TestStore_ReadOnlyOpen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := storetest.SQLitePath(t)
	accept := func(s *store.Store, key string) (inkwell.Job, error) {
		payload, _ := json.Marshal(inkwell.Request{Prompt: "p " + key, Account: inkwell.DefaultAccount, MaxWords: 10})
		j, _, err := s.Accept(ctx, store.AcceptParams{IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload})
		return j, err
	}

	w, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := accept(w, "k1")
	if err != nil {
		t.Fatal(err)
	}
	w.Close() // a clean close folds the WAL into the file and removes it

	t.Run("no writer: immutable", func(t *testing.T) {
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		r := storetest.MustOpen(t, path, store.Options{ReadOnly: true})
		if d, err := r.Show(ctx, first.ID); err != nil || d.Job.IdempotencyKey != "k1" {
			t.Errorf("Show(%d) read-only = %+v, %v; want the committed job", first.ID, d.Job, err)
		}
		if _, err := accept(r, "k2"); err == nil {
			t.Error("Accept on a read-only store succeeded")
		}
		r.Close()
		after, _ := os.ReadFile(path)
		if !bytes.Equal(before, after) {
			t.Errorf("a read-only open changed the file (%d -> %d bytes)", len(before), len(after))
		}
		for _, side := range []string{"-wal", "-shm"} {
			if _, err := os.Stat(path + side); err == nil {
				t.Errorf("a read-only open with no writer made %s", path+side)
			}
		}
	})

	t.Run("beside a live writer: its WAL read", func(t *testing.T) {
		w := storetest.MustOpen(t, path, store.Options{})
		second, err := accept(w, "k3") // committed to the WAL, not yet to the file
		if err != nil {
			t.Fatal(err)
		}
		r := storetest.MustOpen(t, path, store.Options{ReadOnly: true})
		if d, err := r.Show(context.Background(), second.ID); err != nil || d.Job.IdempotencyKey != "k3" {
			t.Errorf("Show(%d) read-only beside a writer = %+v, %v; want the job the writer committed", second.ID, d.Job, err)
		}
	})
}
