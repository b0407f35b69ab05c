package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIsoadv_TokenForMissingAccountCreatesNoDatabase: 'inkwell tokens
// create --account acme --db PATH' where PATH does not exist (a typo in
// --db, the usual way this happens) is refused: a database that does not
// exist yet has only the account 'default', so no other account can be
// found in it. The refusal is right, but it leaves a brand-new migrated
// database at the mistyped path, and the error's own advice ('create it
// first with inkwell accounts add acme') then sends the operator to add
// the account, and its tokens, to that stray file instead of the real one.
// Right behaviour (docs: "bad input gets a clear error and writes
// nothing"; TestCLI_AccountsBadInputCreatesNoFile's rule): a refused
// 'tokens create' leaves no file behind; only a token for 'default' may
// create the database (docs/security.md's first-token recipe).
//
// Found in review (fixed: tokens create opens an existing database for any account but default).
func TestIsoadv_TokenForMissingAccountCreatesNoDatabase(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "typo.db")
	code, out, errOut := runCLI(t, "tokens", "create", "--account", "acme", "--db", db)
	if code == 0 || strings.Contains(out, "ink_") {
		t.Fatalf("tokens create for an account that does not exist = %d, stdout %q; want a refusal and no token", code, out)
	}
	if !strings.Contains(errOut, "acme") {
		t.Errorf("the refusal does not name the account: %q", errOut)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("a refused 'tokens create' left a new database at %s (%v); want no file", db, err)
	}
}
