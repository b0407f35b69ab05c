package store_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_KeysPerAccountSameKeyManyAccountsAtOnce: the same
// Idempotency-Key and the same words, sent at once by many accounts (half
// with a budget, so that PostgreSQL's group commit takes both its
// one-statement path and its locked path), several times each, in one
// burst so that they share accept groups. Each account gets exactly one
// job of its own, every re-send answers that job (never another
// account's, never key_reused), and exactly one of an account's sends says
// created. A guard of per-account keys on both dialects.
func TestStore_KeysPerAccountSameKeyManyAccountsAtOnce(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		const accounts, sends = 8, 4
		for i := 0; i < accounts; i++ {
			a := store.Account{Name: fmt.Sprintf("acct-%d", i)}
			if i%2 == 0 {
				budget := int64(1_000_000)
				a.BudgetMicros = &budget
			}
			if _, err := s.CreateAccount(t.Context(), a); err != nil {
				t.Fatal(err)
			}
		}
		type res struct {
			account string
			job     inkwell.Job
			created bool
			err     error
		}
		out := make(chan res, accounts*sends)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := 0; i < accounts; i++ {
			for j := 0; j < sends; j++ {
				account := fmt.Sprintf("acct-%d", i)
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					payload := fmt.Sprintf(`{"prompt":"same words","account":%q}`, account)
					p := store.AcceptParams{Account: account, IdempotencyKey: "shared-key", RequestHash: inkwell.RequestHash([]byte(payload)),
						Payload: []byte(payload), ReserveMicros: 10}
					job, created, err := s.Accept(t.Context(), p)
					out <- res{account, job, created, err}
				}()
			}
		}
		close(start)
		wg.Wait()
		close(out)
		jobOf := map[string]int64{}
		createdOf := map[string]int{}
		owner := map[int64]string{}
		for r := range out {
			if r.err != nil {
				t.Errorf("%s: %v; want its job", r.account, r.err)
				continue
			}
			if r.job.Account != r.account {
				t.Errorf("%s was answered job %d of account %q", r.account, r.job.ID, r.job.Account)
			}
			if prev, ok := jobOf[r.account]; ok && prev != r.job.ID {
				t.Errorf("%s got two jobs for one key: %d and %d", r.account, prev, r.job.ID)
			}
			jobOf[r.account] = r.job.ID
			if o, ok := owner[r.job.ID]; ok && o != r.account {
				t.Errorf("job %d answered to %s and %s", r.job.ID, o, r.account)
			}
			owner[r.job.ID] = r.account
			if r.created {
				createdOf[r.account]++
			}
		}
		for i := 0; i < accounts; i++ {
			a := fmt.Sprintf("acct-%d", i)
			if createdOf[a] != 1 {
				t.Errorf("%s: %d sends said created, want exactly 1", a, createdOf[a])
			}
		}
		if len(owner) != accounts {
			t.Errorf("%d jobs for %d accounts, want one each", len(owner), accounts)
		}
	})
}
