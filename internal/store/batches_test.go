package store_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Tests of batches (docs/batches.md) at the store, on both dialects: the
// job key, a key already held, prune of a batch's jobs, and reads of a
// batch that does not exist. internal/api/batches_test.go tests the routes.

func batchParams(key string, customIDs ...string) store.BatchParams {
	p := store.BatchParams{Account: inkwell.DefaultAccount, IdempotencyKey: key}
	for _, id := range customIDs {
		payload, _ := json.Marshal(inkwell.Request{Prompt: "the prompt of " + id, Account: inkwell.DefaultAccount, MaxWords: 5})
		p.Lines = append(p.Lines, store.BatchLine{CustomID: id, RequestHash: inkwell.RequestHash(payload), Payload: payload})
	}
	p.RequestHash = store.BatchHash(p.Lines)
	return p
}

func mustAcceptBatch(t *testing.T, s *store.Store, p store.BatchParams) store.Batch {
	t.Helper()
	b, created, err := s.AcceptBatch(t.Context(), p)
	if err != nil || !created {
		t.Fatalf("AcceptBatch %s: created %v, %v", p.IdempotencyKey, created, err)
	}
	return b
}

// TestStore_BatchJobKey: two different (batch, custom_id) pairs never share
// a key, and no key fits an Idempotency-Key header (it holds a space).
func TestStore_BatchJobKey(t *testing.T) {
	t.Parallel()
	pairs := []struct {
		batch int64
		id    string
	}{{1, "2 x"}, {12, "x"}, {1, "2"}, {12, ""}, {1, "x"}, {11, "x"}, {1, "1 x"}}
	seen := map[string]int{}
	for i, p := range pairs {
		k := store.BatchJobKey(p.batch, p.id)
		if j, ok := seen[k]; ok {
			t.Errorf("pairs %v and %v share key %q", pairs[j], p, k)
		}
		seen[k] = i
		if !strings.Contains(k, " ") {
			t.Errorf("key %q has no space: a job sent alone could take it", k)
		}
	}
}

// TestStore_BatchKeyHeld: a line whose job key a row already holds (one
// adopted from elsewhere: no Idempotency-Key can name it) refuses the
// whole batch, naming the line, and writes nothing.
func TestStore_BatchKeyHeld(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		mustAcceptBatch(t, s, batchParams("first", "a"))
		held := store.BatchJobKey(2, "b")
		if _, err := s.WriteDB().Exec(`INSERT INTO jobs (idempotency_key, request_hash, payload, status, created_at) VALUES ('` + held + `', 'h', '{}', 'failed', '2026-01-01T00:00:00.000000Z')`); err != nil {
			t.Fatal(err)
		}
		before := dumpOf(t, s.DB(), append(dumpTables, "batches")...)
		_, _, err := s.AcceptBatch(t.Context(), batchParams("second", "a", "b", "c"))
		if inkwell.ErrorCode(err) != inkwell.EKEYREUSED || !strings.Contains(err.Error(), `custom_id "b"`) {
			t.Errorf("AcceptBatch over a held key: %v, want key_reused naming custom_id b", err)
		}
		assertSameDump(t, before, dumpOf(t, s.DB(), append(dumpTables, "batches")...))
	})
}

// TestStore_BatchPruned: prune keeps a batch's jobs in the batch (SQLite
// deletes and inserts the rows again): the output still lists each line's
// custom_id, without its text.
func TestStore_BatchPruned(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		b := mustAcceptBatch(t, s, batchParams("b", "one", "two"))
		for range 2 {
			if err := s.CompleteIfRunning(t.Context(), completeParams(claimOne(t, s, f.lane))); err != nil {
				t.Fatal(err)
			}
		}
		f.clock.Advance(48 * time.Hour)
		if rep := mustPrune(t, s, f.clock.Now(), store.PruneOptions{}); rep.Pruned != 2 {
			t.Fatalf("pruned %+v, want 2 jobs", rep)
		}
		var got []string
		err := s.BatchEnded(t.Context(), b.ID, inkwell.StatusDone, func(bj store.BatchJob) error {
			got = append(got, fmt.Sprintf("%s %s pruned=%v text=%q", bj.CustomID, bj.Job.Status, bj.Job.PrunedAt != nil, bj.Result.Text))
			return nil
		})
		want := []string{`one done pruned=true text=""`, `two done pruned=true text=""`}
		if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("output after prune = %q, %v; want %q", got, err, want)
		}
		st, err := s.BatchStatusOf(t.Context(), b.ID)
		if err != nil || st.Counts[inkwell.StatusDone] != 2 {
			t.Errorf("counts after prune = %v, %v; want 2 done", st.Counts, err)
		}
		assertIntact(t, s)
	})
}

// TestStore_BatchNotFound: the reads say ENOTFOUND for no such batch.
func TestStore_BatchNotFound(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		if _, err := s.BatchStatusOf(t.Context(), 7); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("BatchStatusOf 7: %v, want not_found", err)
		}
		err := s.BatchEnded(t.Context(), 7, inkwell.StatusFailed, func(store.BatchJob) error { return nil })
		if inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("BatchEnded 7: %v, want not_found", err)
		}
		if _, _, err := s.AcceptBatch(t.Context(), store.BatchParams{Account: "a", IdempotencyKey: "k"}); inkwell.ErrorCode(err) != inkwell.EINVALID {
			t.Errorf("AcceptBatch of no lines: %v, want invalid", err)
		}
	})
}

// TestStore_BatchJobsOfTheBatchAccount: every job of a batch names the
// batch's account in its payload and, where jobs has an account column
// (keys unique per account, migration 0008), in that column too: a batch
// written without it would file acme's jobs under the default account.
func TestStore_BatchJobsOfTheBatchAccount(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		p := batchParams("acme-batch", "x", "y")
		p.Account = "acme"
		for i := range p.Lines {
			p.Lines[i].Payload, _ = json.Marshal(inkwell.Request{Prompt: "p " + p.Lines[i].CustomID, Account: "acme", MaxWords: 5})
			p.Lines[i].RequestHash = inkwell.RequestHash(p.Lines[i].Payload)
		}
		p.RequestHash = store.BatchHash(p.Lines)
		b := mustAcceptBatch(t, s, p)
		rows := dumpOf(t, s.DB(), "jobs")["jobs"]
		if len(rows) != 2 {
			t.Fatalf("jobs = %d rows, want 2", len(rows))
		}
		for _, row := range rows {
			for _, col := range row {
				switch {
				case strings.HasPrefix(col, "account=") && col != "account=acme",
					strings.HasPrefix(col, "payload=") && !strings.Contains(col, `"account":"acme"`),
					strings.HasPrefix(col, "batch_id=") && col != fmt.Sprintf("batch_id=%d", b.ID):
					t.Errorf("a job of acme's batch %d has %s; want acme's, of batch %d (row %q)", b.ID, col, b.ID, row)
				}
			}
		}
	})
}
