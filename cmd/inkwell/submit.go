package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
)

func init() {
	register("submit", "send a writing request to a running server", runSubmit)
}

const submitHelp = `
Submit sends POST /v1/jobs with an Idempotency-Key and prints the job id
and the key. Without --key it makes a new one; to re-send the same request
safely (after a timeout, say), run submit again with the printed --key: the
server answers with the same job and never makes a second one.

With --wait it polls the job until it is done or failed and prints the text.

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
	if strings.TrimSpace(*prompt) == "" {
		fmt.Fprintln(stderr, "inkwell submit: --prompt is required")
		return 2
	}
	if *key == "" {
		*key = newKey()
	}
	body, _ := json.Marshal(inkwell.Request{Prompt: *prompt, Account: *account, MaxWords: *maxWords})
	var d inkwell.JobDetail
	status, err := postJSON(ctx, strings.TrimRight(*server, "/")+"/v1/jobs", *key, body, &d)
	if err != nil {
		fmt.Fprintf(stderr, "inkwell submit: %v\n  the request may or may not have been stored: re-send it with --key %s\n", err, *key)
		return 1
	}
	how := "accepted"
	if status == http.StatusOK {
		how = "already accepted under this key"
	}
	fmt.Fprintf(stdout, "job %d %s (status %s)\nkey %s\n", d.Job.ID, how, d.Job.Status, *key)
	if !*wait {
		return 0
	}
	wctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	d, err = waitJob(wctx, strings.TrimRight(*server, "/"), d.Job.ID)
	if err != nil {
		return fail(stderr, "submit", err)
	}
	if d.Job.Status == inkwell.StatusFailed {
		fmt.Fprintf(stdout, "job %d failed: %s\nretry it with: inkwell retry %d\n", d.Job.ID, d.Job.Error, d.Job.ID)
		return 1
	}
	fmt.Fprintf(stdout, "job %d done\n\n%s\n", d.Job.ID, d.Result.Text)
	return 0
}

func newKey() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "cli-" + hex.EncodeToString(b)
}

// postJSON posts body with the key; any answer other than 200/201 is an
// error carrying the server's message.
func postJSON(ctx context.Context, url, key string, body []byte, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return doJSON(req, out)
}

// submitClient bounds each request: a server that hangs must not hang the
// command (the outcome is then unknown, and the key makes a re-send safe).
var submitClient = &http.Client{Timeout: 30 * time.Second}

func doJSON(req *http.Request, out any) (int, error) {
	if tok := os.Getenv("INKWELL_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := submitClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		var e struct{ Error inkwell.Error }
		if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
			return resp.StatusCode, &e.Error
		}
		return resp.StatusCode, fmt.Errorf("server answered %s", resp.Status)
	}
	return resp.StatusCode, json.Unmarshal(b, out)
}

func waitJob(ctx context.Context, server string, id int64) (inkwell.JobDetail, error) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/jobs/%d", server, id), nil)
		if err != nil {
			return inkwell.JobDetail{}, err
		}
		var d inkwell.JobDetail
		if _, err := doJSON(req, &d); err != nil {
			return d, err
		}
		if d.Job.Status == inkwell.StatusDone || d.Job.Status == inkwell.StatusFailed {
			return d, nil
		}
		select {
		case <-ctx.Done():
			return d, fmt.Errorf("job %d still %s: %w", id, d.Job.Status, ctx.Err())
		case <-t.C:
		}
	}
}
