package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// Webhooks (docs/design.md §11, docs/webhooks.md): an account's webhook URL and
// secret ('inkwell accounts add --webhook-url', 'inkwell accounts
// webhook'), and the deliveries ('inkwell webhooks list|replay').

func init() {
	register("webhooks", "list webhook deliveries and replay one (list, replay)", runWebhooks)
}

const webhookURLFlagHelp = "where the account's job events are posted (http:// or https://), signed as Standard Webhooks do; the signing secret is printed once"

// checkWebhookURL refuses a bad --webhook-url before any file is opened
// ("" is no webhook).
func checkWebhookURL(u string) error {
	if u == "" {
		return nil
	}
	return store.ValidateWebhookURL(u)
}

// printWebhookSecret prints a new signing secret, once, with what to do
// with it. Nothing when there is none.
func printWebhookSecret(w io.Writer, account, url, secret string) {
	if secret == "" {
		return
	}
	fmt.Fprintf(w, "webhook %s: job events of account %s are posted there\n", url, account)
	fmt.Fprintf(w, "signing secret (shown once; give it to the receiver, which verifies webhook-signature with it):\n%s\n", secret)
}

func webhookText(url string) string {
	if url == "" {
		return "-"
	}
	return url
}

const accountsWebhookHelp = `
Webhook sets, changes or removes the URL an account's job events are
posted to, or rotates its signing secret (docs/webhooks.md).

  --url URL         set or change the URL; an account's first URL comes
                    with a new signing secret, printed once
  --remove          no webhook from now on; deliveries not sent yet wait
                    until a URL is set again
  --rotate-secret   a new signing secret, printed once (the old one stops
                    at once: update the receiver)

Jobs that end while an account has a URL get a delivery each; jobs that
ended before it was set get none. Bad input writes nothing (exit 2).`

func runAccountsWebhook(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("accounts webhook", "NAME (--url URL | --remove | --rotate-secret) [--db PATH]", accountsWebhookHelp, stdout, stderr)
	db := dbFlag(fs)
	url := fs.String("url", "", webhookURLFlagHelp)
	remove := fs.Bool("remove", false, "remove the account's webhook")
	rotate := fs.Bool("rotate-secret", false, "make a new signing secret (printed once)")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "inkwell accounts webhook: give exactly one account NAME (got %d arguments)\n", fs.NArg())
		return 2
	}
	p := store.SetWebhookParams{Account: fs.Arg(0), URL: *url, Remove: *remove, RotateSecret: *rotate}
	if err := checkWebhookURL(p.URL); err != nil {
		fmt.Fprintf(stderr, "inkwell accounts webhook: %s\n", inkwell.ErrorMessage(err))
		return 2
	}
	st, err := openAccountsDB(ctx, *db)
	if err != nil {
		return fail(stderr, "accounts webhook", err)
	}
	defer st.Close()
	a, secret, err := st.SetWebhook(ctx, p)
	if inkwell.ErrorCode(err) == inkwell.EINVALID {
		fmt.Fprintf(stderr, "inkwell accounts webhook: %s\n", inkwell.ErrorMessage(err))
		return 2
	}
	if err != nil {
		return fail(stderr, "accounts webhook", err)
	}
	if a.WebhookURL == "" {
		fmt.Fprintf(stdout, "account %s has no webhook now; deliveries not sent yet wait for a URL\n", a.Name)
		return 0
	}
	if secret == "" {
		fmt.Fprintf(stdout, "webhook of account %s: %s (signing secret unchanged)\n", a.Name, a.WebhookURL)
		return 0
	}
	printWebhookSecret(stdout, a.Name, a.WebhookURL, secret)
	return 0
}

const webhooksHelp = `
Webhooks: when a job of an account with a webhook URL ends (done, or
failed for good), a delivery is stored with the job's end, and serve posts
it, signed, until the receiver answers 2xx (docs/webhooks.md).

  inkwell webhooks list [--account A] [--pending] [--job ID] [--limit N]
  inkwell webhooks replay ID

Set an account's URL with 'inkwell accounts webhook NAME --url URL'. Run
'inkwell webhooks list --help' for the flags of list.`

func runWebhooks(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "list":
			return runWebhooksList(ctx, args[1:], stdout, stderr)
		case "replay":
			return runWebhooksReplay(ctx, args[1:], stdout, stderr)
		}
	}
	return subcommandMissing("webhooks", "list [--account A] [--pending] | replay ID", webhooksHelp, "list, replay", args, stdout, stderr)
}

const webhooksListHelp = `
List prints webhook deliveries, newest first: the job and its key, the
event, the state (pending, delivered, gave_up), the sends so far, when the
next send is due (pending) or when it was delivered or given up, and the
receiver's last answer.`

func runWebhooksList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("webhooks list", "[--account A] [--pending] [--job ID] [--limit N] [--db PATH]", webhooksListHelp, stdout, stderr)
	db := dbFlag(fs)
	account := fs.String("account", "", "only this account's deliveries")
	pending := fs.Bool("pending", false, "only deliveries not delivered and not given up")
	job := fs.Int64("job", 0, "only this job's deliveries")
	limit := fs.Int("limit", 100, "at most this many, newest first")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "inkwell webhooks list: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *limit < 1 {
		fmt.Fprintf(stderr, "inkwell webhooks list: --limit %d: say how many deliveries to list, at least 1\n", *limit)
		return 2
	}
	if *job < 0 {
		fmt.Fprintf(stderr, "inkwell webhooks list: --job %d: a job id is a positive whole number (leave --job out for every job)\n", *job)
		return 2
	}
	st, err := openAccountsDB(ctx, *db)
	if err != nil {
		return fail(stderr, "webhooks list", err)
	}
	defer st.Close()
	ds, err := st.WebhookDeliveries(ctx, store.WebhookFilter{Account: *account, Pending: *pending, JobID: *job, Limit: *limit})
	if err != nil {
		return fail(stderr, "webhooks list", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tJOB\tKEY\tACCOUNT\tEVENT\tSTATE\tSENDS\tWHEN\tLAST ANSWER")
	for _, d := range ds {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.JobID, d.IdempotencyKey, d.Account, d.Event, stateText(d), d.Attempts, whenText(d), lastAnswer(d))
	}
	return exitOf(tw.Flush())
}

func stateText(d store.WebhookDelivery) string {
	if d.ReplayOf != 0 {
		return d.State() + " (replay of " + strconv.FormatInt(d.ReplayOf, 10) + ")"
	}
	return d.State()
}

func whenText(d store.WebhookDelivery) string {
	switch {
	case d.DeliveredAt != nil:
		return "delivered " + timeOrDash(d.DeliveredAt)
	case d.GaveUpAt != nil:
		return "gave up " + timeOrDash(d.GaveUpAt)
	}
	if d.Parked() {
		return "waits for a URL"
	}
	next := d.NextAttemptAt.UTC()
	return "next " + next.Format(time.RFC3339)
}

func lastAnswer(d store.WebhookDelivery) string {
	switch {
	case d.LastError != "":
		return d.LastError
	case d.LastStatus != 0:
		return "HTTP " + strconv.Itoa(d.LastStatus)
	}
	return "-"
}

const webhooksReplayHelp = `
Replay sends a delivery again. A delivered or given-up one is copied into
a new pending delivery (replay_of names it) with the same event and the
same webhook-id, so a receiver that keeps the ids it processed skips it; a
pending one is made due now. serve sends it within a second. The account
must have a webhook URL.`

func runWebhooksReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("webhooks replay", "ID [--db PATH]", webhooksReplayHelp, stdout, stderr)
	db := dbFlag(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "inkwell webhooks replay: give exactly one delivery ID (got %d arguments)\n", fs.NArg())
		return 2
	}
	id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
	if err != nil || id < 1 {
		fmt.Fprintf(stderr, "inkwell webhooks replay: %q is not a delivery id (see 'inkwell webhooks list')\n", fs.Arg(0))
		return 2
	}
	st, err := openAccountsDB(ctx, *db)
	if err != nil {
		return fail(stderr, "webhooks replay", err)
	}
	defer st.Close()
	d, created, err := st.ReplayWebhook(ctx, id)
	if err != nil {
		return fail(stderr, "webhooks replay", err)
	}
	if created {
		fmt.Fprintf(stdout, "delivery %d replays %d (job %d, %s): pending, sent by serve within a second\n", d.ID, id, d.JobID, d.Event)
	} else {
		fmt.Fprintf(stdout, "delivery %d (job %d, %s) is pending: due now\n", d.ID, d.JobID, d.Event)
	}
	return 0
}
