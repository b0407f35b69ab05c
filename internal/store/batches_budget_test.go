package store_test

import (
	"encoding/json"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// acmeBatch is a batch of acme's, each line reserving cost.
func acmeBatch(key string, cost int64, customIDs ...string) store.BatchParams {
	p := store.BatchParams{Account: budgetAccount, IdempotencyKey: key}
	for _, id := range customIDs {
		payload, _ := json.Marshal(inkwell.Request{Prompt: "a poem for " + id, Account: budgetAccount, MaxWords: 5})
		p.Lines = append(p.Lines, store.BatchLine{CustomID: id, RequestHash: inkwell.RequestHash(payload), Payload: payload, ReserveMicros: cost})
	}
	p.RequestHash = store.BatchHash(p.Lines)
	return p
}

// TestBudget_BatchReservesWholeOrNothing: a batch reserves every line's
// worst case in its one transaction, each job holding its own; a batch
// the budget cannot cover whole is refused (budget_exceeded) and writes
// nothing, not even its batch row; a re-send never reserves again; the
// books add up.
func TestBudget_BatchReservesWholeOrNothing(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		withBudget(t, s, ptr[int64](10_000))
		b := mustAcceptBatch(t, s, acmeBatch("fits", 3_000, "a", "b", "c"))
		if a := account(t, s); a.ReservedMicros != 9_000 {
			t.Fatalf("reserved %d after a 3-line batch of 3000 each; want 9000", a.ReservedMicros)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM jobs WHERE reservation_state = 'open' AND reservation_micros = 3000 AND reservation_account = 'acme'`); n != 3 {
			t.Errorf("%d jobs hold their own 3000 reservation on acme; want 3", n)
		}
		if again, created, err := s.AcceptBatch(t.Context(), acmeBatch("fits", 3_000, "a", "b", "c")); err != nil || created || again.ID != b.ID {
			t.Errorf("re-send: batch %d, created %t, %v; want batch %d, not created", again.ID, created, err, b.ID)
		}
		tables := append([]string{"batches"}, budgetTables...)
		before := dumpOf(t, s.DB(), tables...)
		_, created, err := s.AcceptBatch(t.Context(), acmeBatch("too-much", 600, "d", "e"))
		if inkwell.ErrorCode(err) != inkwell.EBUDGET || created {
			t.Fatalf("a batch of 1200 with 1000 left: created %t, %v; want %s", created, err, inkwell.EBUDGET)
		}
		assertSameDump(t, before, dumpOf(t, s.DB(), tables...))
		mustAcceptBatch(t, s, acmeBatch("last", 500, "f", "g"))
		if a := account(t, s); a.ReservedMicros != 10_000 {
			t.Errorf("reserved %d; want the whole budget, 10000", a.ReservedMicros)
		}
		assertBooks(t, s)
	})
}
