package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/client"
	"github.com/inkwell/inkwell/internal/api"
)

func init() {
	register("batch", "send a JSONL file of requests at once; read its counts and output", runBatch)
}

const batchHelp = `
batch submit FILE sends FILE (JSON Lines in the OpenAI batch input form:
{"custom_id", "method": "POST", "url": "/v1/jobs", "body": {"prompt", ...}}
one per line) as POST /v1/batches under an Idempotency-Key and prints the
batch id and the key. Every line is checked before any is stored; the
first bad line refuses the whole batch and is named. Without --key it makes
a new key; to re-send safely, run it again with the printed --key.

batch status ID prints how many of the batch's jobs are in each status.
batch output ID prints the done jobs in the OpenAI batch output form
(JSONL) to stdout; the failed ones are at GET /v1/batches/ID/errors.

See docs/batches.md. Environment: INKWELL_TOKEN, an API token (ink_...)
sent as 'Authorization: Bearer' when the server requires tokens.`

func runBatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("batch", "submit FILE | status ID | output ID [flags]", batchHelp, stdout, stderr)
	key := fs.String("key", "", "with submit: the batch's idempotency key; a new random key when empty")
	server := fs.String("server", "http://127.0.0.1:8080", "the Inkwell server's base URL")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, "inkwell batch: want 'submit FILE', 'status ID' or 'output ID' (see --help)")
		return 2
	}
	if err := checkServerURL(*server); err != nil {
		fmt.Fprintf(stderr, "inkwell batch: %v\n", err)
		return 2
	}
	base := strings.TrimRight(*server, "/")
	switch verb, arg := fs.Arg(0), fs.Arg(1); verb {
	case "submit":
		return batchSubmit(ctx, base, arg, *key, stdout, stderr)
	case "status", "output":
		id, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || id < 1 {
			fmt.Fprintf(stderr, "inkwell batch %s: batch id %q must be a positive whole number\n", verb, arg)
			return 2
		}
		if verb == "status" {
			return batchStatus(ctx, base, id, stdout, stderr)
		}
		return batchOutput(ctx, base, id, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "inkwell batch: unknown %q: want submit, status or output\n", verb)
		return 2
	}
}

func batchSubmit(ctx context.Context, base, file, key string, stdout, stderr io.Writer) int {
	f, err := os.Open(file)
	if err != nil {
		return fail(stderr, "batch submit", err)
	}
	defer f.Close()
	if key == "" {
		key = client.NewKey()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/batches", f)
	if err != nil {
		return fail(stderr, "batch submit", err)
	}
	if fi, err := f.Stat(); err == nil {
		req.ContentLength = fi.Size()
	}
	req.Header.Set("Content-Type", "application/jsonl")
	req.Header.Set("Idempotency-Key", key)
	var b api.BatchResponse
	status, err := doJSON(req, &b)
	if status == 0 || status >= 500 {
		fmt.Fprintf(stderr, "inkwell batch submit: %v\n  the batch may or may not have been stored: re-send it with --key %s\n", err, key)
		return 1
	}
	if err != nil {
		return fail(stderr, "batch submit", err) // refused: nothing was stored; the message says what to fix
	}
	how := "accepted"
	if status == http.StatusOK {
		how = "already accepted under this key"
	}
	fmt.Fprintf(stdout, "batch %d %s: %d lines\nkey %s\n", b.ID, how, b.Lines, key)
	return 0
}

func batchStatus(ctx context.Context, base string, id int64, stdout, stderr io.Writer) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/batches/%d", base, id), nil)
	if err != nil {
		return fail(stderr, "batch status", err)
	}
	var b api.BatchResponse
	if _, err := doJSON(req, &b); err != nil {
		return fail(stderr, "batch status", err)
	}
	fmt.Fprintf(stdout, "batch %d (key %s, account %s, %d lines, created %s)\n", b.ID, b.IdempotencyKey, b.Account, b.Lines, b.CreatedAt.Format(time.RFC3339))
	fmt.Fprintf(stdout, "queued %d  running %d  done %d  failed %d", b.Counts["queued"], b.Counts["running"], b.Counts["done"], b.Counts["failed"])
	if b.Ended {
		fmt.Fprintf(stdout, "  (ended: inkwell batch output %d)", b.ID)
	}
	fmt.Fprintln(stdout)
	return 0
}

func batchOutput(ctx context.Context, base string, id int64, stdout, stderr io.Writer) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/batches/%d/output", base, id), nil)
	if err != nil {
		return fail(stderr, "batch output", err)
	}
	if tok := os.Getenv("INKWELL_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fail(stderr, "batch output", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error inkwell.Error }
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
			e.Error = inkwell.Error{Code: inkwell.EINTERNAL, Message: "server answered " + resp.Status}
		}
		return fail(stderr, "batch output", &e.Error)
	}
	if _, err := io.Copy(stdout, resp.Body); err != nil {
		return fail(stderr, "batch output", err)
	}
	return 0
}
