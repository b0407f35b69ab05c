package store_test

import (
	"context"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_AcceptGroupRefusalFailsOnlyItsOwnMember: since ce285c4 the API
// hands the catalog's refusal (EINVALID: an unknown model, a body its
// provider cannot carry) to the store as AcceptParams.Refuse, so that a
// re-send of a stored job is still answered. A NEW key so refused makes
// acceptOne return the EINVALID refusal. When this test was written,
// groupErr (accept.go) counted only EKEYREUSED, ETOOMANY and EBUDGET as a
// member's own answer: any other code "failed the whole group". So one bad
// request that shared a group commit with others rolled back their
// transaction and answered every one of them with ITS 400 (another
// client's "unknown model"): good new jobs were not stored, a re-send of a
// paid job was refused.
//
// Right behaviour: a refusal given in AcceptParams.Refuse is that member's
// own answer, whatever its code; the rest of the group is stored/answered
// as if it had come alone.
func TestStore_AcceptGroupRefusalFailsOnlyItsOwnMember(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		stored := mustAccept(t, s, acceptParams("refuse-stored", "a stored poem"))
		bad := acceptParams("refuse-bad", "a body the catalog refuses")
		bad.Refuse = inkwell.Errorf(inkwell.EINVALID, "model %q is not in the catalog", "gone")
		ps := []store.AcceptParams{bad, acceptParams("refuse-stored", "a stored poem"), acceptParams("refuse-good", "a good poem")}
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
		if n := count(t, s, `SELECT COUNT(*) FROM jobs WHERE idempotency_key = 'refuse-bad'`); n != 0 {
			t.Errorf("refused key stored %d rows, want 0", n)
		}
		// A budgeted account's new job (the transaction path on PostgreSQL
		// too) beside a refused one.
		budget := int64(1_000_000)
		if _, err := s.CreateAccount(ctx, store.Account{Name: "refuse-acct", BudgetMicros: &budget}); err != nil {
			t.Fatalf("create account: %v", err)
		}
		good := acceptParams("refuse-budgeted", "a budgeted poem")
		good.Account, good.ReserveMicros = "refuse-acct", 10
		bad2 := bad
		bad2.IdempotencyKey = "refuse-bad-2"
		res = store.AcceptBatch(s, []context.Context{ctx, ctx}, []store.AcceptParams{bad2, good})
		if res[1].Err != nil || !res[1].Created {
			t.Errorf("budgeted account's new job beside a refused one: created %t err %v; want created", res[1].Created, res[1].Err)
		}
	})
}
