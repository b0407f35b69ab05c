package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// `inkwell accounts` and `inkwell tokens` (docs/design.md §10) from the outside,
// on both dialects: words and exit codes; bad input exits 2 and writes
// nothing; a refusal (a name taken, an unknown account or id) exits 1 and
// writes nothing.

// authRows is every row of accounts and api_tokens, as text.
func authRows(t *testing.T, st *store.Store) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, table := range []string{"accounts", "api_tokens"} {
		rows, err := st.DB().QueryContext(t.Context(), `SELECT * FROM `+table+` ORDER BY 1`)
		if err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("dump %s: %v", table, err)
			}
			var line strings.Builder
			for i, v := range vals {
				line.WriteString(cols[i] + "=" + strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(fmtValue(v), "\n", " "), "\t", " ")) + " ")
			}
			out[table] = append(out[table], line.String())
		}
		rows.Close()
	}
	return out
}

func fmtValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return string(v)
	}
	return fmt.Sprintf("%T:%v", v, v)
}

func TestCLI_Accounts(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		st := storetest.MustOpen(t, b.DSN, store.Options{})
		code, out, errOut := runCLI(t, "accounts", "add", "acme", "--budget", "12.50", "--rpm", "60", "--db", b.DSN)
		if code != 0 || !strings.Contains(out, "account acme added (budget 12.50, rpm 60)") {
			t.Fatalf("accounts add = %d\n%s%s", code, out, errOut)
		}
		a, err := st.Account(t.Context(), "acme")
		if err != nil || a.BudgetMicros == nil || *a.BudgetMicros != 12_500_000 || a.RPM != 60 {
			t.Fatalf("stored %+v, %v; want budget 12500000 micros, rpm 60", a, err)
		}
		before := authRows(t, st)
		for _, args := range [][]string{
			{"add"}, {"add", "a", "b"}, {"add", "bad name"}, {"add", "x", "--budget", "-1"}, {"add", "x", "--budget", "1.2345678"},
			{"add", "x", "--budget", "abc"}, {"add", "x", "--budget", "1."}, {"add", "x", "--budget", "1e3"}, {"add", "x", "--rpm", "-1"},
			{"add", "x", "--rpm", "many"}, {}, {"remove", "acme"},
		} {
			all := append(append([]string{"accounts"}, args...), "--db", b.DSN)
			if code, out, errOut := runCLI(t, all...); code != 2 || errOut == "" {
				t.Errorf("inkwell %q = %d, want 2 with a reason on stderr\n%s%s", all, code, out, errOut)
			}
		}
		if code, _, errOut := runCLI(t, "accounts", "add", "acme", "--db", b.DSN); code != 1 || !strings.Contains(errOut, `account "acme" already exists`) {
			t.Errorf("a second acme = %d %s, want 1, already exists", code, errOut)
		}
		if diff := cmp.Diff(before, authRows(t, st)); diff != "" {
			t.Errorf("refused input changed the database (-before +after):\n%s", diff)
		}
		code, out, errOut = runCLI(t, "accounts", "list", "--db", b.DSN)
		if code != 0 || !strings.Contains(out, "NAME") {
			t.Fatalf("accounts list = %d\n%s%s", code, out, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		// default has no budget: its reserved and spent are not kept, and
		// say so ("-" and a note), where 0.00 read as nothing spent.
		if len(lines) != 4 || !strings.HasPrefix(lines[1], "acme ") || !strings.Contains(lines[1], "12.50") || !strings.Contains(lines[1], " 60 ") ||
			!strings.HasPrefix(lines[2], "default ") || !strings.Contains(lines[2], "none") || !strings.Contains(lines[2], "unlimited") ||
			!strings.Contains(lines[2], " -  ") || strings.Contains(lines[2], "0.00") || !strings.HasPrefix(lines[3], "-: not kept") {
			t.Errorf("accounts list:\n%s", out)
		}
	})
}

// TestCLI_AccountsBadInputCreatesNoFile: input refused before the database
// is opened leaves no file behind (accounts add and tokens create create
// a missing database otherwise).
func TestCLI_AccountsBadInputCreatesNoFile(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "none.db")
	for _, args := range [][]string{
		{"accounts", "add", "x", "--budget", "lots"},
		{"tokens", "create", "--account", "default", "--role", "root"},
		{"tokens", "create"},
	} {
		if code, _, _ := runCLI(t, append(args, "--db", db)...); code != 2 {
			t.Errorf("inkwell %q = %d, want 2", args, code)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("bad input created %s (%v)", db, err)
	}
}

// TestCLI_TokensForAMissingAccountCreatesNoFile: 'inkwell tokens create
// --account acme --db PATH' where PATH does not exist (a typo in --db, the
// usual way this happens) is refused: a database that does not exist yet
// has only the account 'default', so no other account can be found in it.
// The refusal used to leave a brand-new migrated database at the mistyped
// path, and the error's own advice ('create it first with inkwell accounts
// add acme') then sent the operator to add the account, and its tokens,
// to that stray file instead of the real one. Right behaviour (docs: "bad
// input gets a clear error and writes nothing";
// TestCLI_AccountsBadInputCreatesNoFile's rule): a refused 'tokens create'
// leaves no file behind; only a token for 'default' may create the
// database (docs/security.md's first-token recipe). tokens create now
// opens an existing database for any account but default.
func TestCLI_TokensForAMissingAccountCreatesNoFile(t *testing.T) {
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

func TestCLI_Tokens(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		st := storetest.MustOpen(t, b.DSN, store.Options{})
		code, out, errOut := runCLI(t, "tokens", "create", "--account", inkwell.DefaultAccount, "--role", "operator", "--db", b.DSN)
		text := strings.TrimSpace(out)
		if code != 0 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(text, "ink_") || !strings.Contains(errOut, "will not be shown again") {
			t.Fatalf("tokens create = %d\nstdout %q\nstderr %q; want the token alone on stdout and the notice on stderr", code, out, errOut)
		}
		tok, err := st.VerifyToken(t.Context(), text)
		if err != nil || tok.Role != store.RoleOperator || tok.Account != inkwell.DefaultAccount {
			t.Fatalf("the printed token: %+v, %v", tok, err)
		}
		secret := text[len("ink_"+tok.ID+"_"):]
		if code, out, _ := runCLI(t, "tokens", "create", "--account", inkwell.DefaultAccount, "--db", b.DSN); code != 0 {
			t.Fatalf("tokens create (client by default) = %d", code)
		} else if c, err := st.VerifyToken(t.Context(), strings.TrimSpace(out)); err != nil || c.Role != store.RoleClient {
			t.Errorf("default role: %+v, %v; want client", c, err)
		}

		before := authRows(t, st)
		for _, args := range [][]string{
			{"create"}, {"create", "--account", "default", "--role", "admin"}, {"create", "--account", "bad name"},
			{"create", "default"}, {"revoke"}, {"revoke", "a", "b"}, {"list", "extra"}, {}, {"rotate"},
		} {
			all := append(append([]string{"tokens"}, args...), "--db", b.DSN)
			if code, out, errOut := runCLI(t, all...); code != 2 || errOut == "" {
				t.Errorf("inkwell %q = %d, want 2 with a reason on stderr\n%s%s", all, code, out, errOut)
			}
		}
		if code, _, errOut := runCLI(t, "tokens", "create", "--account", "nobody", "--db", b.DSN); code != 1 || !strings.Contains(errOut, "inkwell accounts add nobody") {
			t.Errorf("a token for an unknown account = %d %s, want 1 and how to add it", code, errOut)
		}
		if code, _, errOut := runCLI(t, "tokens", "revoke", "0000000000000000", "--db", b.DSN); code != 1 || !strings.Contains(errOut, "not found") {
			t.Errorf("revoke an unknown id = %d %s, want 1, not found", code, errOut)
		}
		if diff := cmp.Diff(before, authRows(t, st)); diff != "" {
			t.Errorf("refused input changed the database (-before +after):\n%s", diff)
		}

		code, out, errOut = runCLI(t, "tokens", "list", "--db", b.DSN)
		if code != 0 || !strings.Contains(out, tok.ID) || strings.Contains(out, secret) || strings.Count(strings.TrimSpace(out), "\n") != 2 {
			t.Errorf("tokens list = %d (want two tokens, ids only)\n%s%s", code, out, errOut)
		}
		code, out, _ = runCLI(t, "tokens", "revoke", tok.ID, "--db", b.DSN)
		if code != 0 || !strings.Contains(out, "revoked") {
			t.Errorf("tokens revoke = %d %s", code, out)
		}
		if _, err := st.VerifyToken(t.Context(), text); inkwell.ErrorCode(err) != inkwell.EUNAUTHENTICATED {
			t.Errorf("the revoked token still verifies: %v", err)
		}
		if code, out, _ := runCLI(t, "tokens", "revoke", tok.ID, "--db", b.DSN); code != 0 || !strings.Contains(out, "already revoked") {
			t.Errorf("revoke again = %d %s, want 0, already revoked", code, out)
		}
	})
}

func TestParseAmount(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"12.50": 12_500_000, "0": 0, "7": 7_000_000, "0.000001": 1, "1.5": 1_500_000} {
		if got, err := parseAmount(in); err != nil || got != want {
			t.Errorf("parseAmount(%q) = %d, %v; want %d", in, got, err, want)
		}
		if got := formatAmount(want); in != "0.000001" && in != "1.5" && in != "0" && in != "7" && got != in {
			t.Errorf("formatAmount(%d) = %q, want %q", want, got, in)
		}
	}
	for _, in := range []string{"", "-1", "+1", "1.", ".5", "1.1234567", "1e6", "12,50", " 1", "99999999999999999999"} {
		if _, err := parseAmount(in); err == nil {
			t.Errorf("parseAmount(%q) accepted", in)
		}
	}
	if got := formatAmount(1_500_000); got != "1.50" {
		t.Errorf("formatAmount(1500000) = %q, want 1.50", got)
	}
}
