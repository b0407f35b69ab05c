package store_test

// A reviewer's tests of the day's last changes (lastrev). Every bug they
// showed is fixed (see git log); where a comment below says what the code
// does wrong, it tells how it was when the test was written.

import (
	"context"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestLastrev_CatalogRefusalFailsOnlyItsOwnMember: since ce285c4 the API
// hands the catalog's refusal (EINVALID: an unknown model, a body its
// provider cannot carry) to the store as AcceptParams.Refuse, so that a
// re-send of a stored job is still answered. A NEW key so refused makes
// acceptOne return the EINVALID refusal, and groupErr (accept.go) counts
// only EKEYREUSED, ETOOMANY and EBUDGET as a member's own answer: any other
// code "fails the whole group". So one bad request that shares a group
// commit with others rolls back their transaction and answers every one of
// them with ITS 400 (another client's "unknown model"): good new jobs are
// not stored, a re-send of a paid job is refused.
//
// Right behaviour: a refusal given in AcceptParams.Refuse is that member's
// own answer, whatever its code; the rest of the group is stored/answered
// as if it had come alone.
func TestLastrev_CatalogRefusalFailsOnlyItsOwnMember(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		stored := mustAccept(t, s, acceptParams("lastrev-stored", "a stored poem"))
		bad := acceptParams("lastrev-bad", "a body the catalog refuses")
		bad.Refuse = inkwell.Errorf(inkwell.EINVALID, "model %q is not in the catalog", "gone")
		ps := []store.AcceptParams{bad, acceptParams("lastrev-stored", "a stored poem"), acceptParams("lastrev-good", "a good poem")}
		res := store.AcceptBatch(s, []context.Context{ctx, ctx, ctx}, ps)
		if inkwell.ErrorCode(res[0].Err) != inkwell.EINVALID || res[0].Created {
			t.Errorf("refused member: created %t, err %v; want its own EINVALID", res[0].Created, res[0].Err)
		}
		if res[1].Err != nil || res[1].Created || res[1].Job.ID != stored.ID {
			t.Errorf("re-send of job %d in the same group: job %d created %t err %v; want job %d answered (another member's refusal is not its answer)",
				stored.ID, res[1].Job.ID, res[1].Created, res[1].Err, stored.ID)
		}
		if res[2].Err != nil || !res[2].Created {
			t.Errorf("new good member in the same group: created %t err %v; want created", res[2].Created, res[2].Err)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM jobs WHERE idempotency_key = 'lastrev-bad'`); n != 0 {
			t.Errorf("refused key stored %d rows, want 0", n)
		}
		// A budgeted account's new job (the transaction path on PostgreSQL
		// too) beside a refused one.
		budget := int64(1_000_000)
		if _, err := s.CreateAccount(ctx, store.Account{Name: "lastrev-acct", BudgetMicros: &budget}); err != nil {
			t.Fatalf("create account: %v", err)
		}
		good := acceptParams("lastrev-budgeted", "a budgeted poem")
		good.Account, good.ReserveMicros = "lastrev-acct", 10
		bad2 := bad
		bad2.IdempotencyKey = "lastrev-bad-2"
		res = store.AcceptBatch(s, []context.Context{ctx, ctx}, []store.AcceptParams{bad2, good})
		if res[1].Err != nil || !res[1].Created {
			t.Errorf("budgeted account's new job beside a refused one: created %t err %v; want created", res[1].Created, res[1].Err)
		}
	})
}
