package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

func init() {
	register("tokens", "create, list and revoke API tokens (create, list, revoke)", runTokens)
}

const tokensHelp = `
API tokens let clients and operators in (docs/security.md). A token
belongs to one account and has a role: client (submits and reads its own
account's jobs) or operator (also retries, cancels, and reads every job,
the overview, the metrics and the dashboard).

  inkwell tokens create --account NAME [--role client|operator]
  inkwell tokens list
  inkwell tokens revoke ID

A token is printed once, by create, and never again: only the SHA-256 of
its secret is stored. To rotate a token, create a new one, move the
clients to it, then revoke the old one. With 'serve --auth auto' (the
default) the server requires tokens as soon as one exists.`

func runTokens(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "create":
			return runTokensCreate(ctx, args[1:], stdout, stderr)
		case "list":
			return runTokensList(ctx, args[1:], stdout, stderr)
		case "revoke":
			return runTokensRevoke(ctx, args[1:], stdout, stderr)
		}
	}
	return subcommandMissing("tokens", "create --account NAME [--role client|operator] | list | revoke ID", tokensHelp, "create, list, revoke", args, stdout, stderr)
}

const tokensCreateHelp = `
Create makes a token for an existing account and prints it once, on
stdout alone (TOKEN=$(inkwell tokens create ...) keeps it); the notice
goes to stderr. It is not stored: only the SHA-256 of its secret is. If
it is lost, create another and revoke the lost one.

Clients send it as 'Authorization: Bearer ink_...'. The database is
created and migrated if needed, so a token can exist before the first
'inkwell serve' (one listening beyond loopback needs one). Bad input
writes nothing (exit 2); an unknown account is refused (exit 1).`

func runTokensCreate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tokens create", "--account NAME [--role client|operator] [--db PATH]", tokensCreateHelp, stdout, stderr)
	db := dbFlag(fs)
	account := fs.String("account", "", "the account the token acts for and charges (required; 'default' always exists)")
	role := fs.String("role", store.RoleClient, "client (its own account's jobs) or operator (also retry, cancel, and read everything)")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	switch {
	case fs.NArg() != 0:
		fmt.Fprintf(stderr, "inkwell tokens create: unexpected argument %q (the account is --account NAME)\n", fs.Arg(0))
		return 2
	case *account == "":
		fmt.Fprintln(stderr, "inkwell tokens create: --account NAME is required (see 'inkwell accounts list')")
		return 2
	case !store.ValidRole(*role):
		fmt.Fprintf(stderr, "inkwell tokens create: --role must be client or operator, not %q\n", *role)
		return 2
	}
	if err := store.ValidateAccountName(*account); err != nil {
		fmt.Fprintf(stderr, "inkwell tokens create: %s\n", inkwell.ErrorMessage(err))
		return 2
	}
	open := func() (*store.Store, error) { return openCreating(ctx, *db, stderr) }
	if *account != inkwell.DefaultAccount {
		// Only 'default' exists in a new database: a token for another
		// account needs one that exists, and a mistyped --db must not
		// leave a new file behind its refusal.
		open = func() (*store.Store, error) {
			st, err := openExistingMigrated(ctx, *db)
			if inkwell.ErrorCode(err) == inkwell.EINVALID {
				err = inkwell.Errorf(inkwell.EINVALID, "account %s: %s (a new database holds only the account 'default'; check --db)", *account, inkwell.ErrorMessage(err))
			}
			return st, err
		}
	}
	st, err := open()
	if err != nil {
		return fail(stderr, "tokens create", err)
	}
	defer st.Close()
	tok, text, err := st.CreateToken(ctx, *account, *role)
	if err != nil {
		return fail(stderr, "tokens create", err)
	}
	fmt.Fprintln(stdout, text)
	fmt.Fprintf(stderr, "token %s created: account %s, role %s.\n", tok.ID, tok.Account, tok.Role)
	fmt.Fprintln(stderr, "This is the only time it is shown: it will not be shown again (only its SHA-256 is stored). Keep it now.")
	return 0
}

const tokensListHelp = `
List prints every token, revoked ones too: its id, account, role, when
it was created, last used (written in batches: it may lag a few seconds)
and revoked. Never a secret: none is stored.`

func runTokensList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tokens list", "[--db PATH]", tokensListHelp, stdout, stderr)
	db := dbFlag(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "inkwell tokens list: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	st, err := openAccountsDB(ctx, *db)
	if err != nil {
		return fail(stderr, "tokens list", err)
	}
	defer st.Close()
	all, err := st.Tokens(ctx)
	if err != nil {
		return fail(stderr, "tokens list", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tACCOUNT\tROLE\tCREATED\tLAST USED\tREVOKED")
	for _, t := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Account, t.Role, inkwell.FormatTime(t.CreatedAt), timeOrDash(t.LastUsedAt), timeOrDash(t.RevokedAt))
	}
	return exitOf(tw.Flush())
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return inkwell.FormatTime(*t)
}

const tokensRevokeHelp = `
Revoke stops a token at once: every request reads the token's row, so
the next request with it is refused (401), in every serving process. The
row stays (listed as revoked) so that its id is never reused. ID is the
id 'inkwell tokens list' shows (a whole ink_... token works too).`

func runTokensRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tokens revoke", "ID [--db PATH]", tokensRevokeHelp, stdout, stderr)
	db := dbFlag(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		fmt.Fprintf(stderr, "inkwell tokens revoke: give exactly one token ID (got %d arguments)\n", fs.NArg())
		return 2
	}
	st, err := openAccountsDB(ctx, *db)
	if err != nil {
		return fail(stderr, "tokens revoke", err)
	}
	defer st.Close()
	t, already, err := st.RevokeToken(ctx, fs.Arg(0))
	if err != nil {
		return fail(stderr, "tokens revoke", err)
	}
	if already {
		fmt.Fprintf(stdout, "token %s (account %s, role %s) was already revoked at %s\n", t.ID, t.Account, t.Role, t.RevokedAt.Format(time.RFC3339))
		return 0
	}
	fmt.Fprintf(stdout, "token %s (account %s, role %s) revoked: refused from the next request on\n", t.ID, t.Account, t.Role)
	return 0
}
