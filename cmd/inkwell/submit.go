package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/client"
)

func init() {
	register("submit", "send a writing request to a running server", runSubmit)
}

const submitHelp = `
Submit sends POST /v1/jobs with an Idempotency-Key (through the Go client,
package client) and prints the job id and the key. Without --key it makes
a new one. When the answer is lost (a network error, a server restart) or
the server asks to come back later (429, 503), it re-sends the request
under the same key, a few times, honouring Retry-After: the server answers
a re-send with the job the first send made, never a second one.

If it still cannot tell whether the request was stored (no answer, or a
5xx), it says so and prints the command that re-sends it safely with the
same --key. If the server refused the request (400, 413, 422), nothing was
stored, and it says which flag to fix and why.

With --wait it waits (long-poll, docs/client.md) until the job is done or
failed and prints the text.

Environment: INKWELL_TOKEN, an API token (ink_...) sent as
'Authorization: Bearer' when the server requires tokens (docs/security.md).`

func runSubmit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("submit", "--prompt TEXT [flags]", submitHelp, stdout, stderr)
	prompt := fs.String("prompt", "", "what to write (required)")
	key := fs.String("key", "", "idempotency key; a new random key when empty")
	server := fs.String("server", "http://127.0.0.1:8080", "the Inkwell server's base URL")
	account := fs.String("account", "", "account charged (default \"default\")")
	maxWords := fs.Int("max-words", 0, "longest answer in words (default 50)")
	wait := fs.Bool("wait", false, "wait until the job is done or failed and print its text")
	timeout := fs.Duration("timeout", 2*time.Minute, "with --wait: how long to wait")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if !flagsOnly(fs, stderr, "the text is --prompt TEXT") {
		return 2
	}
	if strings.TrimSpace(*prompt) == "" {
		fmt.Fprintln(stderr, "inkwell submit: --prompt is required")
		return 2
	}
	if err := checkServerURL(*server); err != nil {
		fmt.Fprintf(stderr, "inkwell submit: %v\n", err)
		return 2
	}
	if *key == "" {
		*key = client.NewKey()
	}
	c := client.New(*server, client.WithToken(os.Getenv("INKWELL_TOKEN")), client.WithOnRetry(func(e client.RetryEvent) {
		fmt.Fprintf(stderr, "inkwell submit: %v; re-sending under the same key in %s\n", e.Err, e.Delay.Round(100*time.Millisecond))
	}))
	req := inkwell.Request{Prompt: *prompt, Account: *account, MaxWords: *maxWords}
	sub, err := c.SubmitKey(ctx, *key, req)
	if err != nil {
		explainSubmitError(stderr, err, *key, *server)
		return 1
	}
	how := "accepted"
	if !sub.Created {
		how = "already accepted under this key"
	}
	fmt.Fprintf(stdout, "job %d %s (status %s)\nkey %s\n", sub.Job.ID, how, sub.Job.Status, *key)
	if !*wait {
		return 0
	}
	wctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	d, err := c.Wait(wctx, sub.Job.ID)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		last := "never read"
		if d.Job.Status != "" {
			last = string(d.Job.Status)
		}
		fmt.Fprintf(stderr, "inkwell submit: job %d did not end within --timeout %s (last seen: %s); it is stored and goes on: follow it with inkwell show %d\n",
			sub.Job.ID, *timeout, last, sub.Job.ID)
		return 1
	}
	if err != nil {
		return fail(stderr, "submit", fmt.Errorf("%w\n  the job is stored; follow it with: inkwell show %d", err, sub.Job.ID))
	}
	if d.Job.Status == inkwell.StatusFailed {
		fmt.Fprintf(stdout, "job %d failed: %s\n", d.Job.ID, d.Job.Error)
		if a, ok := billedAttempt(d.Attempts); ok {
			// As inkwell retry warns: a provider that ignores keys bills
			// a retry that succeeds once more.
			fmt.Fprintf(stdout, "attempt #%d (%s) may have been billed by the provider: check its usage before a retry, which a provider ignoring idempotency keys bills again: inkwell retry %d\n",
				a.AttemptNumber, a.ErrorClass, d.Job.ID)
		} else {
			fmt.Fprintf(stdout, "retry it with: inkwell retry %d\n", d.Job.ID)
		}
		return 1
	}
	fmt.Fprintf(stdout, "job %d done\n\n%s\n", d.Job.ID, d.Result.Text)
	return 0
}

// explainSubmitError says what a failed submit means for the user: re-send
// (same key) only when the outcome is unknown; otherwise what to fix.
func explainSubmitError(w io.Writer, err error, key, server string) {
	var e *client.Error
	if client.OutcomeUnknown(err) {
		fmt.Fprintf(w, "inkwell submit: %v\n  the request may or may not have been stored: re-send it, safely, with the same key:\n"+
			"  inkwell submit --server %s --key %s --prompt ... (the same prompt and flags)\n", err, server, key)
		return
	}
	if !errors.As(err, &e) {
		fmt.Fprintf(w, "inkwell submit: %v\n", err)
		return
	}
	fmt.Fprintf(w, "inkwell submit: the server refused the request (%d %s): %s\n", e.Status, e.Code, e.Message)
	switch e.Code {
	case inkwell.EINVALID, inkwell.ETOOLARGE:
		fmt.Fprintf(w, "  nothing was stored; fix %s and send it again\n", flagOf(e.Message))
	case inkwell.EKEYREUSED:
		fmt.Fprintf(w, "  nothing was stored: key %s belongs to a different request; leave out --key (a new key is made) "+
			"or re-send that request unchanged\n", key)
	case inkwell.EUNAUTHENTICATED:
		fmt.Fprintln(w, "  nothing was stored; set INKWELL_TOKEN to an API token (inkwell tokens create --account NAME)")
	case inkwell.ETOOMANY:
		fmt.Fprintf(w, "  nothing was stored: the server is full; send it again later with --key %s\n", key)
	default:
		if e.Status < http.StatusInternalServerError {
			fmt.Fprintln(w, "  nothing was stored")
		}
	}
}

// flagOf names the submit flag a 400's message is about: the server's
// message starts with the field (prompt, account, max_words, the
// Idempotency-Key header).
func flagOf(msg string) string {
	for _, f := range []struct{ field, flag string }{
		{"prompt", "--prompt"}, {"body is over", "--prompt (it is too long)"}, {"account", "--account"},
		{"max_words", "--max-words"}, {"Idempotency-Key", "--key"}, {"header Idempotency-Key", "--key"},
	} {
		if strings.HasPrefix(msg, f.field) {
			return f.flag
		}
	}
	return "the request"
}

// billedAttempt is the last failed attempt whose class does not show that
// nothing was billed (a timeout, a worker restart, a cancel in flight, or
// no class at all), as inkwell retry's mayHaveBilled reads the store.
func billedAttempt(atts []inkwell.Attempt) (inkwell.Attempt, bool) {
	for i := len(atts) - 1; i >= 0; i-- {
		if a := atts[i]; a.Status == inkwell.StatusFailed && !a.ErrorClass.NotBilled() {
			if a.ErrorClass == "" {
				a.ErrorClass = inkwell.ClassLegacy
			}
			return a, true
		}
	}
	return inkwell.Attempt{}, false
}

// checkServerURL refuses a --server that is not an http(s) URL with a
// host: nothing could be sent to it, so it is bad input, said at once
// (not a network failure retried, whose outcome would be "unknown").
func checkServerURL(raw string) error {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--server %q: want the server's base URL, http(s)://host:port (e.g. http://127.0.0.1:8080)", raw)
	}
	return nil
}
