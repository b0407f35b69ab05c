package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

func init() {
	register("accounts", "the accounts that pay for jobs: budgets, rpm and webhooks (add, set, list, release, webhook)", runAccounts)
}

const accountsHelp = `
Accounts pay for jobs (docs/design.md §10). Every API token belongs to one
account, and with tokens in use the token's account pays for the jobs it
submits. The account 'default' always exists.

  inkwell accounts add NAME [--budget AMOUNT] [--rpm N] [--webhook-url URL]
  inkwell accounts set NAME [--budget AMOUNT|none] [--rpm N]
  inkwell accounts list
  inkwell accounts release JOB…
  inkwell accounts webhook NAME (--url URL | --remove | --rotate-secret)

Run 'inkwell accounts add --help' for its flags. Each accepted job
reserves its worst-case cost against its account's budget (past it: 402
budget_exceeded); its completion turns the reservation into the charge.
rpm limits each account's new requests per minute (429 too_many).`

// runAccounts dispatches to add, set, list, release or webhook.
func runAccounts(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "add":
			return runAccountsAdd(ctx, args[1:], stdout, stderr)
		case "list":
			return runAccountsList(ctx, args[1:], stdout, stderr)
		case "set":
			return runAccountsSet(ctx, args[1:], stdout, stderr)
		case "release":
			return runAccountsRelease(ctx, args[1:], stdout, stderr)
		case "webhook":
			return runAccountsWebhook(ctx, args[1:], stdout, stderr) // webhooks.go
		}
	}
	return subcommandMissing("accounts", "add NAME [--budget AMOUNT] [--rpm N] [--webhook-url URL] | set NAME … | list | release JOB… | webhook NAME …", accountsHelp, "add, set, list, release, webhook", args, stdout, stderr)
}

// subcommandMissing answers a command that needs a subcommand and got
// none (or an unknown one): --help prints the usage, anything else is a
// mistake (exit 2).
func subcommandMissing(name, synopsis, help, subs string, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(name, synopsis, help, stdout, stderr)
	dbFlag(fs) // listed in the help: every subcommand takes it
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, "inkwell %s: give a subcommand: %s\n", name, subs)
	} else {
		fmt.Fprintf(stderr, "inkwell %s: unknown subcommand %q: want %s\n", name, fs.Arg(0), subs)
	}
	return 2
}

const accountsAddHelp = `
Add creates an account. AMOUNT is in currency units with at most six
decimals (12.50); it is stored in micros (12500000). Without --budget the
account has no budget; --rpm 0 (the default) means no limit.

The database is created and migrated if needed, so that accounts and
tokens can be set up before the first 'inkwell serve'. Bad input writes
nothing (exit 2); a name already taken is refused (exit 1).`

func runAccountsAdd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("accounts add", "NAME [--budget AMOUNT] [--rpm N] [--webhook-url URL] [--db PATH]", accountsAddHelp, stdout, stderr)
	db := dbFlag(fs)
	budget := fs.String("budget", "", "the account's budget in currency units, e.g. 12.50 (empty: no budget)")
	rpm := fs.Int("rpm", 0, "new requests per minute the account may send (0: no limit)")
	webhookURL := fs.String("webhook-url", "", webhookURLFlagHelp)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "inkwell accounts add: give exactly one account NAME (got %d arguments)\n", fs.NArg())
		return 2
	}
	a := store.Account{Name: fs.Arg(0), RPM: *rpm, WebhookURL: *webhookURL}
	if err := store.ValidateAccountName(a.Name); err != nil {
		fmt.Fprintf(stderr, "inkwell accounts add: %s\n", inkwell.ErrorMessage(err))
		return 2
	}
	if err := checkWebhookURL(a.WebhookURL); err != nil {
		fmt.Fprintf(stderr, "inkwell accounts add: %s\n", inkwell.ErrorMessage(err))
		return 2
	}
	if *rpm < 0 {
		fmt.Fprintf(stderr, "inkwell accounts add: --rpm must be 0 (no limit) or more, not %d\n", *rpm)
		return 2
	}
	if *budget != "" {
		micros, err := parseAmount(*budget)
		if err != nil {
			fmt.Fprintf(stderr, "inkwell accounts add: --budget: %v\n", err)
			return 2
		}
		a.BudgetMicros = &micros
	}
	st, err := openCreating(ctx, *db, stderr)
	if err != nil {
		return fail(stderr, "accounts add", err)
	}
	defer st.Close()
	a, err = st.CreateAccount(ctx, a)
	if err != nil {
		return fail(stderr, "accounts add", err)
	}
	fmt.Fprintf(stdout, "account %s added (budget %s, rpm %s)\n", a.Name, budgetText(a.BudgetMicros), rpmText(a.RPM))
	printWebhookSecret(stdout, a.Name, a.WebhookURL, a.WebhookSecret) // webhooks.go
	fmt.Fprintf(stdout, "give it a token: inkwell tokens create --account %s --role client\n", a.Name)
	return 0
}

const accountsListHelp = `
List prints every account: its budget, what is reserved and spent
(in currency units), its rpm and when it was created. RESERVED is the
worst-case cost of its unfinished jobs, and of failed jobs that may have
been billed ('inkwell accounts release JOB' closes those). Only an
account with a budget keeps RESERVED and SPENT up to date.`

func runAccountsList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("accounts list", "[--db PATH]", accountsListHelp, stdout, stderr)
	db := dbFlag(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "inkwell accounts list: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	st, err := openAccountsDB(ctx, *db)
	if err != nil {
		return fail(stderr, "accounts list", err)
	}
	defer st.Close()
	all, err := st.Accounts(ctx)
	if err != nil {
		return fail(stderr, "accounts list", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tBUDGET\tRESERVED\tSPENT\tRPM\tCREATED\tWEBHOOK")
	unkept := false
	for _, a := range all {
		reserved, spent := formatAmount(a.ReservedMicros), formatAmount(a.SpentMicros)
		if a.BudgetMicros == nil {
			// Not kept without a budget: 0.00 would read as nothing spent.
			reserved, spent, unkept = "-", "-", true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Name, budgetText(a.BudgetMicros), reserved, spent,
			rpmText(a.RPM), inkwell.FormatTime(a.CreatedAt), webhookText(a.WebhookURL))
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	if unkept {
		fmt.Fprintln(stdout, "-: not kept for an account without a budget; its charges are in the charges table (SELECT account, SUM(amount_micros) FROM charges GROUP BY account)")
	}
	return 0
}

func exitOf(err error) int {
	if err != nil {
		return 1
	}
	return 0
}

// openAccountsDB opens an existing database whose schema has accounts and
// tokens (migration 7) and the accounts' webhooks (migration 10).
func openAccountsDB(ctx context.Context, dsn string) (*store.Store, error) {
	st, err := openExisting(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if v, err := st.SchemaVersion(ctx); err != nil || v < 10 {
		st.Close()
		shown := store.RedactDSN(dsn)
		return nil, inkwell.Errorf(inkwell.EINVALID, "database %s is at schema version %d and has no accounts, tokens or webhooks yet: run 'inkwell migrate --db %s'", shown, v, shown)
	}
	return st, nil
}

// parseAmount reads a currency amount (12, 12.5, 12.50, 0.000001) into
// micros. No sign, no exponent, at most six decimals.
func parseAmount(s string) (int64, error) {
	whole, frac, _ := strings.Cut(s, ".")
	bad := fmt.Errorf("%q is not an amount like 12.50 (digits, at most six decimals, not negative)", s)
	if whole == "" || len(frac) > 6 || strings.HasSuffix(s, ".") {
		return 0, bad
	}
	for _, part := range []string{whole, frac} {
		for _, c := range part {
			if c < '0' || c > '9' {
				return 0, bad
			}
		}
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > (1<<63-1)/1_000_000-1 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	return w*1_000_000 + f, nil
}

// formatAmount writes micros in currency units with at least two decimals.
func formatAmount(micros int64) string {
	s := fmt.Sprintf("%d.%06d", micros/1_000_000, micros%1_000_000)
	for strings.HasSuffix(s, "0") && len(s)-strings.IndexByte(s, '.') > 3 {
		s = s[:len(s)-1]
	}
	return s
}

func budgetText(micros *int64) string {
	if micros == nil {
		return "none"
	}
	return formatAmount(*micros)
}

func rpmText(rpm int) string {
	if rpm == 0 {
		return "unlimited"
	}
	return strconv.Itoa(rpm)
}
