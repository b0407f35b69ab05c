package store_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Two creators of names that differ only in case, at the same time: the
// look-alike check (a SELECT, then an INSERT) must not let both in. On
// PostgreSQL (READ COMMITTED, no lock between the two) both can pass the
// SELECT before either inserts.
func TestStore_AccountCaseRaceBothCreated(t *testing.T) {
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		both := 0
		var example string
		for i := 0; i < 60; i++ {
			lower := fmt.Sprintf("race%d", i)
			names := []string{lower, strings.ToUpper(lower[:1]) + lower[1:]}
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make([]error, 2)
			for k, n := range names {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, errs[k] = s.CreateAccount(ctx, store.Account{Name: n})
				}()
			}
			close(start)
			wg.Wait()
			if errs[0] == nil && errs[1] == nil {
				both++
				example = fmt.Sprintf("%q and %q", names[0], names[1])
			}
		}
		if both > 0 {
			accounts, _ := s.Accounts(ctx)
			t.Errorf("%d of 60 races created both look-alike names (e.g. %s); %d accounts now", both, example, len(accounts))
		}
	})
}
