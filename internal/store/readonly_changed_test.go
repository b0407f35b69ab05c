package store_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// A read-only open made while no -wal is there reads the file as immutable,
// without locks. A writer (serve, started by its own user) that opens the
// file during the read, commits and checkpoints can tear what is read
// (pages of two versions, "database disk image is malformed"): SQLite
// cannot see it, so CheckReadAsOpened must, and the CLI shows nothing read
// then. Before the writer, and on a store that read with locks, it is nil.
func TestStore_ReadOnlyOpenSeesAWriterThatStartedDuringTheRead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := storetest.SQLitePath(t)
	accept := func(s *store.Store, key string) {
		t.Helper()
		payload, _ := json.Marshal(inkwell.Request{Prompt: "p " + key, Account: inkwell.DefaultAccount, MaxWords: 10})
		if _, _, err := s.Accept(ctx, store.AcceptParams{IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	accept(w, "k0")
	w.Close() // no -wal now: the read-only open below is immutable

	r := storetest.MustOpen(t, path, store.Options{ReadOnly: true})
	if d, err := r.Show(ctx, 1); err != nil || d.Job.IdempotencyKey != "k0" {
		t.Fatalf("Show(1) read-only = %+v, %v", d.Job, err)
	}
	if err := r.CheckReadAsOpened(); err != nil {
		t.Errorf("CheckReadAsOpened with no writer = %v, want nil", err)
	}

	w2 := storetest.MustOpen(t, path, store.Options{}) // serve starts during the read
	for i := range 300 {
		accept(w2, fmt.Sprintf("k%d", i+1))
	}
	if err := r.CheckReadAsOpened(); inkwell.ErrorCode(err) != inkwell.EUNAVAILABLE {
		t.Errorf("CheckReadAsOpened with a writer's -wal beside the file = %v, want unavailable", err)
	}
	w2.Close() // its close folds the WAL into the file and removes the -wal
	if err := r.CheckReadAsOpened(); inkwell.ErrorCode(err) != inkwell.EUNAVAILABLE {
		t.Errorf("CheckReadAsOpened after a writer checkpointed into the file = %v, want unavailable", err)
	}
	if err := w2.CheckReadAsOpened(); err != nil {
		t.Errorf("CheckReadAsOpened of a store that reads with locks = %v, want nil", err)
	}
}
