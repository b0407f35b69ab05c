package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// `inkwell accounts set` and `inkwell accounts release`: an operator's
// hands on budgets and rpm (docs/design.md §10, docs/operations.md#budgets-and-per-account-rpm).

const accountsSetHelp = `
Set changes an account's budget and rpm. AMOUNT is in currency units with
at most six decimals (12.50); --budget none removes the budget. --rpm 0
means no limit. A running 'inkwell serve' applies a new budget at the next
accept and a new rpm within 5 seconds.

A budget below what the account has spent and reserved already is
allowed: the jobs already accepted keep their reservations and new ones
are refused (402 budget_exceeded) until the account is under it again.
Bad input writes nothing (exit 2); an unknown account exits 1.`

func runAccountsSet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("accounts set", "NAME [--budget AMOUNT|none] [--rpm N] [--db PATH]", accountsSetHelp, stdout, stderr)
	db := dbFlag(fs)
	budget := fs.String("budget", "", "the account's budget in currency units, e.g. 12.50; none removes it")
	rpm := fs.String("rpm", "", "new requests per minute the account may send (0: no limit)")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "inkwell accounts set: give exactly one account NAME (got %d arguments)\n", fs.NArg())
		return 2
	}
	name := fs.Arg(0)
	if err := store.ValidateAccountName(name); err != nil {
		fmt.Fprintf(stderr, "inkwell accounts set: %s\n", inkwell.ErrorMessage(err))
		return 2
	}
	var c store.AccountChange
	switch *budget {
	case "":
	case "none":
		c.NoBudget = true
	default:
		micros, err := parseAmount(*budget)
		if err != nil {
			fmt.Fprintf(stderr, "inkwell accounts set: --budget: %v\n", err)
			return 2
		}
		c.BudgetMicros = &micros
	}
	if *rpm != "" {
		n, err := strconv.Atoi(*rpm)
		if err != nil || n < 0 {
			fmt.Fprintf(stderr, "inkwell accounts set: --rpm must be 0 (no limit) or more, not %q\n", *rpm)
			return 2
		}
		c.RPM = &n
	}
	if c.BudgetMicros == nil && !c.NoBudget && c.RPM == nil {
		fmt.Fprintln(stderr, "inkwell accounts set: nothing to change: give --budget and/or --rpm")
		return 2
	}
	st, err := openAccountsDB(ctx, *db)
	if err != nil {
		return fail(stderr, "accounts set", err)
	}
	defer st.Close()
	a, err := st.UpdateAccount(ctx, name, c)
	if err != nil {
		return fail(stderr, "accounts set", err)
	}
	fmt.Fprintf(stdout, "account %s: budget %s (spent %s, reserved %s), rpm %s\n", a.Name, budgetText(a.BudgetMicros),
		formatAmount(a.SpentMicros), formatAmount(a.ReservedMicros), rpmText(a.RPM))
	return 0
}

const accountsReleaseHelp = `
Release closes the open budget reservation of failed jobs whose provider
call may have been billed (a timeout, a shutdown, a worker restart, a
cancel while running, an answer Inkwell could not read or store): Inkwell
keeps their reservation because it cannot know. Check with the provider
first (its records for the job's idempotency key); release when it
did not bill, or when you accept the risk. A later retry of the job
reserves again.

Only a failed job's reservation can be released: a queued or running job
may still spend it (exit 1, nothing written). A job with no open
reservation (released, settled, or none) is reported as it is.`

func runAccountsRelease(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("accounts release", "JOB… [--db PATH]", accountsReleaseHelp, stdout, stderr)
	db := dbFlag(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	ids, ok := jobIDs(fs, "accounts release", stderr)
	if !ok {
		return 2
	}
	st, err := openAccountsDB(ctx, *db)
	if err != nil {
		return fail(stderr, "accounts release", err)
	}
	defer st.Close()
	code := 0
	for _, id := range ids {
		before, err := st.Reservation(ctx, id)
		if err == nil {
			var after store.Reservation
			after, err = st.ReleaseReservation(ctx, id)
			switch {
			case err != nil:
			case before.State == store.ReservationOpen:
				fmt.Fprintf(stdout, "job %d: released %s reserved on account %s\n", id, formatAmount(after.Micros), after.Account)
			case before.State == "":
				fmt.Fprintf(stdout, "job %d: holds no reservation\n", id)
			default:
				fmt.Fprintf(stdout, "job %d: its reservation was %s already\n", id, before.State)
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "inkwell accounts release: job %d: %s\n", id, inkwell.ErrorMessage(err))
			code = 1
		}
	}
	return code
}

// jobIDs reads fs's arguments as job ids: at least one, each a positive
// whole number. It says why on stderr when they are not. An id named
// twice is acted on once ("retry 15 15" used to retry 15, then fail on
// it as no longer failed).
func jobIDs(fs *flag.FlagSet, cmd string, stderr io.Writer) ([]int64, bool) {
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, "inkwell %s: give at least one job ID\n", cmd)
		return nil, false
	}
	ids, seen := make([]int64, 0, fs.NArg()), make(map[int64]bool, fs.NArg())
	for _, a := range fs.Args() {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id < 1 {
			fmt.Fprintf(stderr, "inkwell %s: job ID %q must be a positive whole number\n", cmd, a)
			return nil, false
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, true
}
