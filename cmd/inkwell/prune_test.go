package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Tests of retention (docs/design.md §9) from the outside: inkwell prune's flags
// and words, and serve --retention over real HTTP: a re-send of a pruned
// job's key answers 200 with the pruned job and never runs it again, and a
// retry of a pruned failed job is refused and says why.

// finishedJob stores one job run to done, straight through the store, on
// a clock an hour behind: the job finished before any cut-off of 0s, and
// after one of 30d, without waiting for the real clock to move.
func finishedJob(t *testing.T, db, key string) int64 {
	t.Helper()
	st, err := store.Open(t.Context(), db, store.Options{NowFunc: func() time.Time { return time.Now().Add(-time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	payload, _ := json.Marshal(inkwell.Request{Prompt: "the prompt of " + key, Account: inkwell.DefaultAccount, MaxWords: 5})
	var job inkwell.Job
	job, _, err = st.Accept(t.Context(), store.AcceptParams{IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	l, err := st.LockLane(t.Context(), "local")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	cs, err := st.ClaimUpTo(t.Context(), l, 1)
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %v %v", cs, err)
	}
	if err := st.CompleteIfRunning(t.Context(), store.CompleteParams{JobID: job.ID, AttemptID: cs[0].Attempt.ID, Text: "the text",
		Account: inkwell.DefaultAccount, AmountMicros: 10, ProviderRequestID: "req-" + key}); err != nil {
		t.Fatal(err)
	}
	return job.ID
}

// TestPrune_BadInputWritesNothing: every mistake exits 2 with a line that
// names it, before the database is opened.
func TestPrune_BadInputWritesNothing(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	id := finishedJob(t, db, "k1")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--older-than DURATION"},
		{[]string{"--dry-run"}, "--older-than DURATION"},
		{[]string{"--older-than", "abc"}, `"abc" is not a duration`},
		{[]string{"--older-than", ""}, "empty"},
		{[]string{"--older-than", "-1h"}, "negative"},
		{[]string{"--older-than", "1.5d"}, "whole number"},
		{[]string{"--older-than", "0s", "extra"}, `unexpected argument "extra"`},
		{[]string{"--older-than", "0s", "--dry-run", "--vacuum"}, "cannot be part of a --dry-run"},
	} {
		args := append([]string{"prune", "--db", db}, c.args...)
		code, stdout, stderr := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, c.want) || stdout != "" {
			t.Errorf("inkwell %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(args, " "), code, stdout, stderr, c.want)
		}
	}
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	if d := show(t, st, id); d.Job.PrunedAt != nil || !strings.Contains(string(d.Job.Payload), "prompt") || d.Result.Text == "" {
		t.Errorf("after bad input the job changed: %+v", d)
	}
	code, _, stderr := runCLI(t, "prune", "--older-than", "0s", "--db", filepath.Join(t.TempDir(), "none.db"))
	if code != 1 || !strings.Contains(stderr, "inkwell serve") {
		t.Errorf("prune of a missing database: exit %d, %q; want 1 and how to create it", code, stderr)
	}
}

// TestPrune_CLI: a dry run counts and writes nothing; prune prunes, says
// what it did and the file's size; a second run finds nothing.
func TestPrune_CLI(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	id := finishedJob(t, db, "k1")
	finishedJob(t, db, "k2")

	code, stdout, stderr := runCLI(t, "prune", "--older-than", "0s", "--dry-run", "--db", db)
	if code != 0 || !strings.Contains(stdout, "dry run: 2 jobs finished before") || !strings.Contains(stdout, "(2 done, 0 failed); nothing was written") {
		t.Errorf("dry run: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "prune", "--older-than", "30d", "--db", db)
	if code != 0 || !strings.Contains(stdout, "pruned 0 jobs") {
		t.Errorf("prune --older-than 30d of new jobs: exit %d\n%s%s", code, stdout, stderr)
	}
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	if d := show(t, st, id); d.Job.PrunedAt != nil {
		t.Fatalf("dry run or a too-young cut-off pruned job %d", id)
	}
	code, stdout, stderr = runCLI(t, "prune", "--older-than", "0s", "--db", db)
	if code != 0 || !strings.Contains(stdout, "pruned 2 jobs") || !strings.Contains(stdout, "2 done, 0 failed") || !strings.Contains(stdout, "MB after") {
		t.Errorf("prune: exit %d\n%s%s", code, stdout, stderr)
	}
	d := show(t, st, id)
	if d.Job.PrunedAt == nil || string(d.Job.Payload) != `{"account":"default","max_words":5}` || d.Result.Text != "" || d.Charge == nil || len(d.Attempts) != 1 {
		t.Errorf("pruned job %+v: want pruned_at, no prompt, no text, its charge and attempt kept", d)
	}
	code, stdout, _ = runCLI(t, "prune", "--older-than", "0s", "--db", db)
	if code != 0 || !strings.Contains(stdout, "pruned 0 jobs") {
		t.Errorf("second prune: exit %d\n%s", code, stdout)
	}
	code, stdout, stderr = runCLI(t, "prune", "--vacuum", "--db", db)
	if code != 0 || !strings.Contains(stdout, "auto_vacuum incremental (was incremental)") {
		t.Errorf("prune --vacuum: exit %d\n%s%s", code, stdout, stderr)
	}
}

// countingProvider answers with the sim, except a prompt holding "refuse",
// which the provider refuses (400: class rejected, never retried
// automatically); it counts every call.
type countingProvider struct {
	sim   *provider.Sim
	calls atomic.Int64
}

func (p *countingProvider) Generate(ctx context.Context, req inkwell.ProviderRequest) (inkwell.ProviderResponse, error) {
	p.calls.Add(1)
	if strings.Contains(req.Prompt, "refuse") {
		return inkwell.ProviderResponse{}, &provider.CallError{Class: provider.ClassClient, Status: 400, Msg: "400 refused", Reached: true}
	}
	return p.sim.Generate(ctx, req)
}

func post(t *testing.T, url, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestRetention_ResendPrunedOverHTTP runs serve --retention in process:
// the loop prunes a done and a failed job and logs it; a re-send of either
// key answers 200 with the pruned job and never calls the provider again;
// a retry of the pruned failed job is refused (HTTP 409 and inkwell retry),
// saying it was pruned; the loop stops with serve.
func TestRetention_ResendPrunedOverHTTP(t *testing.T) {
	// Not parallel: it shortens the loop's timing for the Mains it starts
	// (other tests' Mains run with --retention 0, which starts no loop).
	retentionFirst.Store(int64(10 * time.Millisecond))
	retentionEvery.Store(int64(50 * time.Millisecond))
	t.Cleanup(func() { // after both subtests, which run in parallel
		retentionFirst.Store(int64(time.Minute))
		retentionEvery.Store(int64(time.Hour))
	})
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		prov := &countingProvider{sim: provider.NewSim(0)}
		var logs lockedBuffer
		m, err := OpenMain(t.Context(), MainConfig{DB: b.DSN, Addr: "127.0.0.1:0", Lane: "local", Grace: 5 * time.Second, Heartbeat: 100 * time.Millisecond,
			Poll: 20 * time.Millisecond, Rescue: time.Second, Provider: prov, ProviderName: "sim", Retention: time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("OpenMain: %v", err)
		}
		defer m.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ran := make(chan error, 1)
		go func() { ran <- m.Run(ctx) }()
		url := "http://" + m.Addr()
		st := storetest.MustOpen(t, b.DSN, store.Options{NoMigrate: true})

		okBody, refuseBody := `{"prompt":"a haiku about ink"}`, `{"prompt":"please refuse this"}`
		done := submit(t, url, "keep-ok", okBody).Job.ID
		failed := submit(t, url, "keep-refused", refuseBody).Job.ID
		storetest.WaitFor(t, waitLimit, "both jobs pruned", func() bool {
			return show(t, st, done).Job.PrunedAt != nil && show(t, st, failed).Job.PrunedAt != nil
		})
		// The line comes when the prune returns, after its vacuum steps.
		storetest.WaitFor(t, waitLimit, "the retention line in the log", func() bool {
			return strings.Contains(logs.String(), "msg=\"retention: pruned the prompt and text of finished jobs\" component=retention jobs=")
		})
		// An upload past its expiry (stored two hours ago to go after one):
		// the loop deletes it too, and says so.
		past := storetest.MustOpen(t, b.DSN, store.Options{NoMigrate: true, NowFunc: func() time.Time { return time.Now().Add(-2 * time.Hour) }})
		expired, err := past.CreateFile(t.Context(), store.FileParams{Account: "default", Purpose: store.FilePurposeBatch, Filename: "in.jsonl",
			Bytes: 3, Lines: 1, Content: strings.NewReader("{}\n"), ExpiresAfter: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		storetest.WaitFor(t, waitLimit, "the expired upload deleted, and the log saying so", func() bool {
			var parts int
			if err := st.DB().QueryRowContext(t.Context(), st.Rebind(`SELECT COUNT(*) FROM file_parts WHERE file_id = $1`), expired.ID).Scan(&parts); err != nil {
				t.Fatal(err)
			}
			return parts == 0 && strings.Contains(logs.String(), "expired_uploads_deleted=1 expired_upload_bytes=3")
		})
		calls := prov.calls.Load()
		if calls != 2 {
			t.Errorf("provider calls = %d, want 2", calls)
		}

		for _, c := range []struct {
			key, body, status string
			id                int64
		}{{"keep-ok", okBody, inkwell.StatusDone, done}, {"keep-refused", refuseBody, inkwell.StatusFailed, failed}} {
			code, body := post(t, url+"/v1/jobs", c.key, c.body)
			var d inkwell.JobDetail
			_ = json.Unmarshal(body, &d)
			if code != http.StatusOK || d.Job.ID != c.id || d.Job.Status != c.status || d.Job.PrunedAt == nil ||
				strings.Contains(string(d.Job.Payload), "prompt") || len(d.Attempts) != 1 {
				t.Errorf("re-send of pruned %s: %d %s; want 200 with the pruned %s job, no prompt, its one attempt", c.key, code, body, c.status)
			}
			if c.status == inkwell.StatusDone && (d.Result == nil || d.Result.Text != "" || d.Charge == nil) {
				t.Errorf("re-send of pruned %s: result %+v charge %+v; want the result row with its text removed, and the charge", c.key, d.Result, d.Charge)
			}
		}

		code, body := post(t, url+"/v1/jobs/"+strconv.FormatInt(failed, 10)+"/retry", "", "")
		if code != http.StatusConflict || !strings.Contains(string(body), "pruned by retention") {
			t.Errorf("POST retry of a pruned failed job: %d %s; want 409 saying it was pruned", code, body)
		}
		if code, _, stderr := runCLI(t, "retry", strconv.FormatInt(failed, 10), "--db", b.DSN); code != 1 || !strings.Contains(stderr, "pruned by retention") {
			t.Errorf("inkwell retry of a pruned failed job: exit %d, %q; want 1 saying it was pruned", code, stderr)
		}

		// A job submitted now is claimed after anything the re-sends or
		// retries queued: once it is done, the lane has been past them.
		marker := submit(t, url, "marker", `{"prompt":"a haiku after the re-sends"}`).Job.ID
		storetest.WaitFor(t, waitLimit, "the job submitted after the re-sends done", func() bool {
			return show(t, st, marker).Job.Status == inkwell.StatusDone
		})
		if got := prov.calls.Load(); got != calls+1 {
			t.Errorf("provider calls %d after the re-sends, the retries and one new job, want %d: a pruned job ran again", got, calls+1)
		}
		for _, id := range []int64{done, failed} {
			if d := show(t, st, id); len(d.Attempts) != 1 || d.Job.Status == inkwell.StatusQueued {
				t.Errorf("job %d after re-send and retry: %s with %d attempts, want it as it was", id, d.Job.Status, len(d.Attempts))
			}
		}

		cancel()
		select {
		case err := <-ran:
			if err != nil {
				t.Errorf("Run after a stop = %v, want nil", err)
			}
		case <-time.After(waitLimit):
			t.Fatalf("Run did not return within %v of its stop (is the retention loop stuck?)", waitLimit)
		}
	})
}

// TestCounted: prune's counts read as words ("in 1 batch", not "in 1
// batches").
func TestCounted(t *testing.T) {
	for _, c := range []struct {
		n    int64
		noun string
		want string
	}{{0, "job", "0 jobs"}, {1, "job", "1 job"}, {2, "job", "2 jobs"}, {1, "batch", "1 batch"}, {3, "batch", "3 batches"}} {
		if got := counted(c.n, c.noun); got != c.want {
			t.Errorf("counted(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
