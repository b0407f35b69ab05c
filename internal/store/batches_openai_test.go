package store_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Tests of the OpenAI form of batches at the store (docs/batches.md), on
// both dialects: its columns, the list and the cancel.

// TestStore_BatchFromFile: a batch made from a file keeps its file, url,
// window and metadata, and a re-send finds it.
func TestStore_BatchFromFile(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		f, err := s.CreateFile(t.Context(), store.FileParams{Account: inkwell.DefaultAccount, Purpose: "batch", Filename: "in.jsonl", Bytes: 0})
		if err != nil {
			t.Fatal(err)
		}
		p := batchParams("file "+f.ID, "a", "b")
		p.InputFileID, p.Endpoint, p.CompletionWindow, p.Metadata = f.ID, "/v1/chat/completions", "24h", []byte(`{"team":"ink"}`)
		b := mustAcceptBatch(t, s, p)
		st, err := s.BatchStatusOf(t.Context(), b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.InputFileID != f.ID || st.Endpoint != "/v1/chat/completions" || st.CompletionWindow != "24h" || string(st.Metadata) != `{"team":"ink"}` ||
			st.CancellingAt != nil || st.CancelledAt != nil || st.LastEndedAt != nil || st.Unended() != 2 {
			t.Errorf("batch = %+v; want the file's columns, nothing cancelled or ended, 2 unended", st)
		}
		again, created, err := s.AcceptBatch(t.Context(), p)
		if err != nil || created || again.ID != b.ID {
			t.Errorf("re-send: %d, created %v, %v; want batch %d", again.ID, created, err, b.ID)
		}
	})
}

// TestStore_BatchList: newest first, a page at a time with the cursor of
// the page before, of one account or of all.
func TestStore_BatchList(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		var ids []int64
		for i := range 5 {
			p := batchParams(fmt.Sprintf("b%d", i), "x")
			if i%2 == 1 {
				p.Account = "acme"
			}
			ids = append(ids, mustAcceptBatch(t, s, p).ID)
		}
		var got []int64
		for before, pages := int64(0), 0; ; pages++ {
			page, err := s.BatchList(t.Context(), "", before, 2)
			if err != nil || pages > 3 {
				t.Fatalf("page %d: %v", pages, err)
			}
			for _, b := range page.Batches {
				got = append(got, b.ID)
				if b.Counts[inkwell.StatusQueued] != 1 {
					t.Errorf("batch %d counts %v, want 1 queued", b.ID, b.Counts)
				}
			}
			if !page.HasMore {
				break
			}
			before = page.Batches[len(page.Batches)-1].ID
		}
		want := slices.Clone(ids)
		slices.Reverse(want)
		if !slices.Equal(got, want) {
			t.Errorf("listed %v, want %v", got, want)
		}
		page, err := s.BatchList(t.Context(), "acme", 0, 10)
		if err != nil || page.HasMore || len(page.Batches) != 2 || page.Batches[0].ID != ids[3] || page.Batches[1].ID != ids[1] {
			t.Errorf("acme's: %+v, %v; want batches %d and %d", page, err, ids[3], ids[1])
		}
		page, err = s.BatchList(t.Context(), "nobody", 0, 10)
		if err != nil || page.HasMore || page.Batches == nil || len(page.Batches) != 0 {
			t.Errorf("nobody's: %+v, %v; want an empty page", page, err)
		}
	})
}

// TestStore_CancelBatch: one done line stays done; the queued lines end
// failed, class cancelled, in the first transaction, with their
// reservations released and an audit row each; the running line's attempt
// is closed through Cancel and named for its lane to abort; cancelled_at
// is set once nothing is left. A re-sent cancel changes nothing; a batch
// that ended with no cancel is a conflict, writing nothing.
func TestStore_CancelBatch(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		withBudget(t, s, ptr[int64](100_000))
		b := mustAcceptBatch(t, s, acmeBatch("to-cancel", 1_000, "a", "b", "c", "d"))
		l := mustLockLane(t, s, "lane-a")
		done := claimOne(t, s, l)
		completeAs(t, s, done, 700)
		running := claimOne(t, s, l)

		out, err := s.CancelBatch(t.Context(), b.ID, "token t1")
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(out.Ended)
		if want := []int64{running.Job.ID, running.Job.ID + 1, running.Job.ID + 2}; !slices.Equal(out.Ended, want) || !slices.Equal(out.Attempts, []int64{running.Attempt.ID}) {
			t.Errorf("cancel ended %v, closed attempts %v; want jobs %v and attempt %d", out.Ended, out.Attempts, want, running.Attempt.ID)
		}
		st, err := s.BatchStatusOf(t.Context(), b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Counts[inkwell.StatusDone] != 1 || st.Counts[inkwell.StatusFailed] != 3 || st.Unended() != 0 ||
			st.CancellingAt == nil || st.CancelledAt == nil || st.LastEndedAt == nil {
			t.Errorf("after cancel: %+v; want 1 done, 3 failed, cancelling_at and cancelled_at set", st)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM jobs WHERE batch_id = $1 AND status = 'failed' AND error_class = 'cancelled'`, b.ID); n != 3 {
			t.Errorf("%d jobs failed, class cancelled; want 3", n)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM audit_log WHERE action = 'cancel' AND actor = 'token t1'`); n != 3 {
			t.Errorf("%d audit rows of the cancel, want 3", n)
		}
		// The queued lines never ran: released. The running one may have
		// been billed: open until an operator closes it.
		if a := account(t, s); a.ReservedMicros != 1_000 || a.SpentMicros != 700 {
			t.Errorf("acme reserves %d, spent %d; want 1000 (the running line's) and 700", a.ReservedMicros, a.SpentMicros)
		}
		wantReservation(t, s, running.Job.ID+1, store.ReservationReleased, 1_000)
		wantReservation(t, s, running.Job.ID, store.ReservationOpen, 1_000)
		assertBooks(t, s)

		before := dumpOf(t, s.DB(), append(budgetTables, "batches")...)
		if again, err := s.CancelBatch(t.Context(), b.ID, "token t1"); err != nil || len(again.Ended) != 0 || len(again.Attempts) != 0 {
			t.Errorf("a re-sent cancel: %+v, %v; want nothing more to do", again, err)
		}
		assertSameDump(t, before, dumpOf(t, s.DB(), append(budgetTables, "batches")...))

		ended := mustAcceptBatch(t, s, acmeBatch("ended", 10, "z"))
		completeAs(t, s, claimOne(t, s, l), 5)
		before = dumpOf(t, s.DB(), append(budgetTables, "batches")...)
		if _, err := s.CancelBatch(t.Context(), ended.ID, "api"); inkwell.ErrorCode(err) != inkwell.ECONFLICT {
			t.Errorf("cancel of an ended batch: %v, want conflict", err)
		}
		if _, err := s.CancelBatch(t.Context(), 999, "api"); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("cancel of no batch: %v, want not_found", err)
		}
		assertSameDump(t, before, dumpOf(t, s.DB(), append(budgetTables, "batches")...))
		assertIntact(t, s)
	})
}

// TestStore_BatchEndedByStatus: the done lines and the failed lines are
// read apart, each with what its output line needs.
func TestStore_BatchEndedByStatus(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		b := mustAcceptBatch(t, s, batchParams("two", "ok", "bad"))
		l := mustLockLane(t, s, "lane-a")
		c := claimOne(t, s, l)
		p := completeParams(c)
		p.Response, p.Model, p.FinishReason, p.PromptTokens, p.CompletionTokens, p.Usage = []byte(`{"object":"chat.completion"}`), "m", "stop", 3, 4, true
		if err := s.CompleteIfRunning(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Cancel(t.Context(), c.Job.ID+1, "test"); err != nil {
			t.Fatal(err)
		}
		read := func(status string) []store.BatchJob {
			var out []store.BatchJob
			if err := s.BatchEnded(t.Context(), b.ID, status, func(bj store.BatchJob) error { out = append(out, bj); return nil }); err != nil {
				t.Fatal(err)
			}
			return out
		}
		done, failed := read(inkwell.StatusDone), read(inkwell.StatusFailed)
		if len(done) != 1 || done[0].CustomID != "ok" || done[0].Result == nil || string(done[0].Result.Response) != `{"object":"chat.completion"}` ||
			done[0].Result.Model != "m" || *done[0].Result.CompletionTokens != 4 || done[0].Charge == nil || done[0].Charge.ProviderRequestID != p.ProviderRequestID {
			t.Errorf("done lines %+v; want ok with its whole answer and charge", done)
		}
		if len(failed) != 1 || failed[0].CustomID != "bad" || failed[0].Job.ErrorClass != inkwell.ClassCancelled || failed[0].Result != nil {
			t.Errorf("failed lines %+v; want bad, cancelled", failed)
		}
		if err := s.BatchEnded(t.Context(), b.ID, inkwell.StatusQueued, func(store.BatchJob) error { return nil }); inkwell.ErrorCode(err) != inkwell.EINVALID {
			t.Errorf("BatchEnded of queued: %v, want invalid", err)
		}
	})
}
