package store_test

import (
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_AccountNamesThatDifferOnlyInCase: "Acme" beside "acme" is
// refused (two accounts every listing and token would make look like one),
// naming the account that exists, and writes nothing; the same name again
// is "already exists", as before; a name that differs otherwise is fine.
func TestStore_AccountNamesThatDifferOnlyInCase(t *testing.T) {
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		if _, err := s.CreateAccount(ctx, store.Account{Name: "acme"}); err != nil {
			t.Fatal(err)
		}
		count := func() int {
			accounts, err := s.Accounts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return len(accounts)
		}
		before := count()
		for _, name := range []string{"Acme", "ACME"} {
			_, err := s.CreateAccount(ctx, store.Account{Name: name})
			if inkwell.ErrorCode(err) != inkwell.ECONFLICT || !strings.Contains(err.Error(), `differs from account "acme" only in case`) {
				t.Errorf("CreateAccount(%q) beside acme = %v; want a conflict naming acme", name, err)
			}
		}
		if _, err := s.CreateAccount(ctx, store.Account{Name: "acme"}); inkwell.ErrorCode(err) != inkwell.ECONFLICT || !strings.Contains(err.Error(), "already exists") {
			t.Errorf("CreateAccount(acme) again = %v; want already exists", err)
		}
		if n := count(); n != before {
			t.Errorf("%d accounts after refused creations, want %d", n, before)
		}
		if _, err := s.CreateAccount(ctx, store.Account{Name: "acme-2"}); err != nil {
			t.Errorf("CreateAccount(acme-2) = %v, want it made", err)
		}
	})
}
