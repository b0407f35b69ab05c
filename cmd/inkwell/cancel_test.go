package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// `inkwell cancel` from the outside (docs/design.md §9), on both dialects: its
// words and exit codes, bad input and refusals that write nothing, and a
// cancel from another process while `inkwell serve` runs a slow call as a
// real child process: the child's lane aborts the call at its next look.

// cancelJob accepts a job straight through the store.
func cancelJob(t *testing.T, st *store.Store, key string) inkwell.Job {
	t.Helper()
	payload, _ := json.Marshal(inkwell.Request{Prompt: "a line about " + key, Account: inkwell.DefaultAccount, MaxWords: 5})
	job, _, err := st.Accept(t.Context(), store.AcceptParams{IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload})
	if err != nil {
		t.Fatalf("Accept %s: %v", key, err)
	}
	return job
}

// cancelRows is every row of Inkwell's tables, as text, in id order.
func cancelRows(t *testing.T, db *sql.DB) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, table := range []string{"jobs", "job_attempts", "results", "charges", "lanes", "recovery_runs"} {
		rows, err := db.QueryContext(t.Context(), `SELECT * FROM `+table+` ORDER BY 1`)
		if err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("dump %s: %v", table, err)
			}
			out[table] = append(out[table], fmt.Sprint(vals))
		}
		rows.Close()
	}
	return out
}

func assertRowsUnchanged(t *testing.T, db *sql.DB, what string, before map[string][]string) {
	t.Helper()
	if diff := cmp.Diff(before, cancelRows(t, db)); diff != "" {
		t.Errorf("%s changed the database (-before +after):\n%s", what, diff)
	}
}

// TestCLI_Cancel: a queued job is cancelled; a second cancel says it
// already is; a done job and an unknown id are refused (exit 1, every ID
// still tried, each refusal on stderr, nothing written for them); bad
// input exits 2 and writes nothing.
func TestCLI_Cancel(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		st := storetest.MustOpen(t, b.DSN, store.Options{})
		l, err := st.LockLane(t.Context(), "test")
		if err != nil {
			t.Fatal(err)
		}
		done := cancelJob(t, st, "done")
		cs, err := st.ClaimUpTo(t.Context(), l, 1)
		if err != nil || len(cs) != 1 || cs[0].Job.ID != done.ID {
			t.Fatalf("claim: %v, %v; want job %d", cs, err, done.ID)
		}
		if err := st.CompleteIfRunning(t.Context(), store.CompleteParams{JobID: done.ID, AttemptID: cs[0].Attempt.ID, Text: "t",
			Account: inkwell.DefaultAccount, AmountMicros: 1, ProviderRequestID: "req-done"}); err != nil {
			t.Fatal(err)
		}
		l.Release()
		queued := cancelJob(t, st, "queued")
		other := cancelJob(t, st, "other")

		before := cancelRows(t, st.DB())
		for _, args := range [][]string{
			{},
			{"abc"},
			{"0"},
			{"-1"},
			{strconv.FormatInt(queued.ID, 10), "1.5"}, // one bad ID: none is tried
			{strconv.FormatInt(queued.ID, 10), "--no-such-flag"},
		} {
			code, stdout, stderr := runCLI(t, append([]string{"cancel", "--db", b.DSN}, args...)...)
			if code != 2 || stdout != "" || stderr == "" {
				t.Errorf("cancel %q: exit %d, stdout %q, stderr %q; want 2, nothing on stdout, why on stderr", args, code, stdout, stderr)
			}
		}
		assertRowsUnchanged(t, st.DB(), "bad input", before)

		code, stdout, stderr := runCLI(t, "cancel", "--help")
		if code != 0 || !strings.Contains(stdout+stderr, "Usage: inkwell cancel ID...") {
			t.Errorf("cancel --help: exit %d\n%s%s", code, stdout, stderr)
		}

		code, stdout, stderr = runCLI(t, "cancel", strconv.FormatInt(queued.ID, 10), "--db", b.DSN)
		if want := fmt.Sprintf("job %d: queued -> failed (cancelled)\n", queued.ID); code != 0 || stdout != want || stderr != "" {
			t.Errorf("cancel queued: exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, want)
		}
		if d := show(t, st, queued.ID); d.Job.Status != inkwell.StatusFailed || d.Job.ErrorClass != inkwell.ClassCancelled ||
			d.Job.Error != "cancelled by cli" || len(d.Attempts) != 0 {
			t.Errorf("after cancel: %+v; want failed, cancelled by cli, no attempt", d)
		}

		before = cancelRows(t, st.DB())
		code, stdout, stderr = runCLI(t, "cancel", strconv.FormatInt(queued.ID, 10), "--db", b.DSN)
		if want := fmt.Sprintf("job %d: already cancelled\n", queued.ID); code != 0 || stdout != want {
			t.Errorf("cancel twice: exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, want)
		}
		code, stdout, stderr = runCLI(t, "cancel", strconv.FormatInt(done.ID, 10), "999", "--db", b.DSN)
		if code != 1 || stdout != "" || !strings.Contains(stderr, fmt.Sprintf("job %d is done", done.ID)) || !strings.Contains(stderr, "999") {
			t.Errorf("cancel done and unknown: exit %d, stdout %q, stderr %q; want 1, each refusal on stderr", code, stdout, stderr)
		}
		assertRowsUnchanged(t, st.DB(), "a second cancel and refused cancels", before)

		// Several IDs: the refused one does not stop the others.
		code, stdout, stderr = runCLI(t, "cancel", "999", strconv.FormatInt(other.ID, 10), "--db", b.DSN)
		if want := fmt.Sprintf("job %d: queued -> failed (cancelled)\n", other.ID); code != 1 || stdout != want || !strings.Contains(stderr, "999") {
			t.Errorf("cancel 999 and a queued job: exit %d, stdout %q, stderr %q; want 1, %q", code, stdout, stderr, want)
		}
	})
}

// TestCLI_CancelWhileServeRuns: `inkwell serve` runs as a child process
// with a provider that takes a minute; `inkwell cancel`, another process,
// cancels the running job. The child's lane aborts the call at its next
// look (its heartbeat, 200 ms): the simulator bills nothing, the child
// logs the abort at info, and its slot takes the next job. Then
// POST /v1/jobs/{id}/cancel on the child aborts the next call at once.
func TestCLI_CancelWhileServeRuns(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		sim := simtest.MustStart(t, providersim.Config{Latency: time.Minute})
		srv := startServe(t, b.DSN, "--provider", "openai", "--provider-url", sim.URL, "--concurrency", "1", "--heartbeat", "200ms",
			"--poll", "50ms")
		st := storetest.MustOpen(t, b.DSN, store.Options{NoMigrate: true})
		job := submit(t, srv.URL, "slow", `{"prompt":"a slow line","max_words":5}`)
		storetest.WaitFor(t, waitLimit, "the job running", func() bool { return show(t, st, job.Job.ID).Job.Status == inkwell.StatusRunning })

		start := time.Now()
		code, stdout, stderr := runCLI(t, "cancel", strconv.FormatInt(job.Job.ID, 10), "--db", b.DSN)
		if code != 0 || !strings.Contains(stdout, fmt.Sprintf("job %d: running -> failed (cancelled)", job.Job.ID)) {
			t.Fatalf("cancel running: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		storetest.WaitFor(t, waitLimit, "the child to abort the call", func() bool {
			return strings.Contains(srv.Log(), `msg="call aborted: job cancelled"`)
		})
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("the child aborted the call %v after the cancel; want within a few heartbeats", took)
		}
		d := show(t, st, job.Job.ID)
		if d.Job.Status != inkwell.StatusFailed || d.Job.ErrorClass != inkwell.ClassCancelled || d.Result != nil || d.Charge != nil ||
			len(d.Attempts) != 1 || !strings.HasPrefix(d.Attempts[0].Error, "cancelled by cli") {
			t.Errorf("after the abort: %+v; want failed, cancelled by cli, no result or charge", d)
		}
		for _, line := range strings.Split(srv.Log(), "\n") {
			if strings.Contains(line, "job_id="+strconv.FormatInt(job.Job.ID, 10)) && (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) {
				t.Errorf("the abort logged a warning or error: %s", line)
			}
		}

		// The slot is free: the next job runs; the child's own API cancels
		// it and its lane aborts the call at once.
		next := submit(t, srv.URL, "next", `{"prompt":"another slow line","max_words":5}`)
		storetest.WaitFor(t, waitLimit, "the next job running", func() bool { return show(t, st, next.Job.ID).Job.Status == inkwell.StatusRunning })
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/jobs/%d/cancel", srv.URL, next.Job.ID), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"error_class": "cancelled"`) {
			t.Fatalf("POST cancel on the child: %d %s", resp.StatusCode, body)
		}
		storetest.WaitFor(t, waitLimit, "the child to abort the second call", func() bool {
			return strings.Count(srv.Log(), `msg="call aborted: job cancelled"`) == 2
		})
		if !strings.Contains(srv.Log(), "aborting the provider call of a cancelled job") {
			t.Errorf("the child's lane was not told by its API (serve's OnCancelled wiring):\n%s", srv.Log())
		}
		if l := sim.MustLedger(t); len(l.Entries) != 0 {
			t.Errorf("the simulator billed %+v; want nothing: both calls were aborted before their answer", l.Entries)
		}
	})
}
