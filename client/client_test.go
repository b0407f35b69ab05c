package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/client"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

func dbPath(t *testing.T) string { return filepath.Join(t.TempDir(), "inkwell.db") }

func TestClient_SubmitWaitGet(t *testing.T) {
	t.Parallel()
	srv := startServe(t, dbPath(t), "127.0.0.1:0", nil, "--sim-latency", "500ms")
	c := client.New(srv.URL, client.WithPollWait(time.Minute))
	ctx := t.Context()
	req := inkwell.Request{Prompt: "a haiku about ink"}
	sub, err := c.Submit(ctx, req)
	if err != nil || !sub.Created || sub.Job.ID == 0 || !strings.HasPrefix(sub.Key, "ik-") {
		t.Fatalf("Submit = %+v, %v; want a new job under a generated key", sub, err)
	}
	// The lane's completion wakes the long-poll: a wait that ran out
	// would answer after its full minute, past this context.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	d, err := c.Wait(wctx, sub.Job.ID)
	if err != nil || d.Job.Status != inkwell.StatusDone || d.Result == nil || d.Result.Text == "" {
		t.Fatalf("Wait = %+v, %v; want the job done with its text", d.Job, err)
	}
	again, err := c.SubmitKey(ctx, sub.Key, req)
	if err != nil || again.Created || again.Job.ID != sub.Job.ID || again.Job.Status != inkwell.StatusDone {
		t.Fatalf("re-send under the same key = %+v (created %v), %v; want job %d, done, not created", again.Job, again.Created, err, sub.Job.ID)
	}
	got, err := c.Get(ctx, sub.Job.ID)
	if err != nil || got.Job.Status != inkwell.StatusDone || len(got.Attempts) != 1 {
		t.Fatalf("Get = %+v, %v; want done with one attempt", got, err)
	}
}

func TestClient_Refusals(t *testing.T) {
	t.Parallel()
	srv := startServe(t, dbPath(t), "127.0.0.1:0", nil, "--sim-latency", "1h")
	c := client.New(srv.URL)
	ctx := t.Context()
	sub, err := c.SubmitKey(ctx, "k-1", inkwell.Request{Prompt: "one"})
	if err != nil {
		t.Fatal(err)
	}
	_, reused := c.SubmitKey(ctx, "k-1", inkwell.Request{Prompt: "another"})
	_, blank := c.Submit(ctx, inkwell.Request{Prompt: "  "})
	_, missing := c.Get(ctx, 999)
	_, notFailed := c.Retry(ctx, sub.Job.ID)
	tests := []struct {
		name    string
		err     error
		status  int
		code    string
		mention string
	}{
		{"KeyReused", reused, http.StatusUnprocessableEntity, inkwell.EKEYREUSED, "key"},
		{"Invalid", blank, http.StatusBadRequest, inkwell.EINVALID, "prompt"},
		{"NotFound", missing, http.StatusNotFound, inkwell.ENOTFOUND, "999"},
		{"Conflict", notFailed, http.StatusConflict, inkwell.ECONFLICT, "failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e *client.Error
			if !errors.As(tt.err, &e) {
				t.Fatalf("err = %v, want a *client.Error", tt.err)
			}
			if e.Status != tt.status || e.Code != tt.code || client.Code(tt.err) != tt.code || !strings.Contains(e.Message, tt.mention) {
				t.Errorf("err = %+v, want status %d, code %s, a message naming %q", e, tt.status, tt.code, tt.mention)
			}
			if client.OutcomeUnknown(tt.err) {
				t.Errorf("OutcomeUnknown(%v) = true; a 4xx is a known refusal", tt.err)
			}
		})
	}
	d, err := c.Cancel(ctx, sub.Job.ID)
	if err != nil || d.Job.Status != inkwell.StatusFailed || d.Job.ErrorClass != inkwell.ClassCancelled {
		t.Fatalf("Cancel = %+v, %v; want failed, cancelled", d.Job, err)
	}
	if _, err := c.Retry(ctx, sub.Job.ID); err != nil {
		t.Fatalf("Retry of a cancelled job: %v", err)
	}
}

// TestClient_WaitResumesAcrossRestart: a Wait under way when the server is
// SIGKILLed keeps asking until a new server on the same address answers,
// and returns the job's end as the new server tells it.
func TestClient_WaitResumesAcrossRestart(t *testing.T) {
	t.Parallel()
	db := dbPath(t)
	srv := startServe(t, db, "127.0.0.1:0", nil, "--sim-latency", "1h")
	c := client.New(srv.URL, client.WithPollWait(5*time.Second))
	ctx, cancel := context.WithTimeout(t.Context(), 2*limit)
	defer cancel()
	sub, err := c.Submit(ctx, inkwell.Request{Prompt: "interrupted"})
	if err != nil {
		t.Fatal(err)
	}
	waitRunning(t, c, sub.Job.ID)
	type waited struct {
		d   inkwell.JobDetail
		err error
	}
	got := make(chan waited, 1)
	go func() {
		d, err := c.Wait(ctx, sub.Job.ID)
		got <- waited{d, err}
	}()
	srv.kill(t)
	startServe(t, db, srv.addr(), nil, "--sim-latency", "0s")
	w := <-got
	if w.err != nil || w.d.Job.Status != inkwell.StatusFailed || w.d.Job.ErrorClass != inkwell.ClassWorkerRestarted {
		t.Fatalf("Wait across the restart = %+v, %v; want failed, worker_restarted (closed by the new server's recovery)", w.d.Job, w.err)
	}
	if _, err := c.Retry(ctx, sub.Job.ID); err != nil {
		t.Fatal(err)
	}
	d, err := c.Wait(ctx, sub.Job.ID)
	if err != nil || d.Job.Status != inkwell.StatusDone || len(d.Attempts) != 2 {
		t.Fatalf("Wait after retry = %+v, %v; want done on attempt 2", d.Job, err)
	}
}

// TestClient_ResendAfterResetMakesOneJob: the server commits the job and
// dies before it answers (crash point accept.after-commit), so the client
// sees its connection cut; it re-sends under the same key until the
// restarted server answers with that job. One job exists.
func TestClient_ResendAfterResetMakesOneJob(t *testing.T) {
	t.Parallel()
	db := dbPath(t)
	srv := startServe(t, db, "127.0.0.1:0", []string{"INKWELL_CRASH_AT=accept.after-commit"}, "--sim-latency", "0s")
	var mu sync.Mutex
	var events []client.RetryEvent
	c := client.New(srv.URL, client.WithTries(200), client.WithMaxDelay(300*time.Millisecond),
		client.WithOnRetry(func(e client.RetryEvent) { mu.Lock(); events = append(events, e); mu.Unlock() }))
	type submitted struct {
		sub client.Submission
		err error
	}
	got := make(chan submitted, 1)
	go func() {
		sub, err := c.Submit(t.Context(), inkwell.Request{Prompt: "sent twice, made once"})
		got <- submitted{sub, err}
	}()
	srv.waitExit(t) // killed itself after the commit, before answering
	startServe(t, db, srv.addr(), nil, "--sim-latency", "0s")
	s := <-got
	if s.err != nil || s.sub.Created || s.sub.Job.ID != 1 {
		t.Fatalf("Submit = job %d created %v, %v; want job 1 answered to a re-send (200, not created)", s.sub.Job.ID, s.sub.Created, s.err)
	}
	mu.Lock()
	first := events[0]
	mu.Unlock()
	if first.Try != 1 || !client.OutcomeUnknown(first.Err) || client.Code(first.Err) != "" {
		t.Errorf("first re-send after %+v; want after try 1's network error", first)
	}
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	var jobs int
	if err := st.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM jobs`).Scan(&jobs); err != nil || jobs != 1 {
		t.Fatalf("jobs in the database: %d (%v), want 1", jobs, err)
	}
}

// TestClient_TooManyHonoursRetryAfter: a 429 (the queue is full) is
// re-sent after the server's Retry-After, under the same key, and gets
// the job once there is room.
func TestClient_TooManyHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	srv := startServe(t, dbPath(t), "127.0.0.1:0", nil, "--sim-latency", "1h", "--concurrency", "1", "--max-queued", "1")
	c := client.New(srv.URL)
	ctx := t.Context()
	running, err := c.Submit(ctx, inkwell.Request{Prompt: "running"})
	if err != nil {
		t.Fatal(err)
	}
	waitRunning(t, c, running.Job.ID)
	queued, err := c.Submit(ctx, inkwell.Request{Prompt: "queued"})
	if err != nil {
		t.Fatal(err)
	}
	var events []client.RetryEvent
	c = client.New(srv.URL, client.WithOnRetry(func(e client.RetryEvent) {
		events = append(events, e)
		if len(events) == 1 { // make room while the client pauses
			if _, err := c.Cancel(ctx, queued.Job.ID); err != nil {
				t.Errorf("cancel: %v", err)
			}
		}
	}))
	sub, err := c.Submit(ctx, inkwell.Request{Prompt: "third"})
	if err != nil || !sub.Created {
		t.Fatalf("Submit past the limit = %+v, %v; want created after a re-send", sub.Job, err)
	}
	if len(events) != 1 || client.Code(events[0].Err) != inkwell.ETOOMANY || events[0].Delay != 5*time.Second {
		t.Fatalf("re-sends %+v; want one, after a 429 too_many and its Retry-After of 5s", events)
	}
}

func TestClient_Token(t *testing.T) {
	t.Parallel()
	db := dbPath(t)
	runInkwell(t, "accounts", "add", "acme", "--db", db)
	token := runInkwell(t, "tokens", "create", "--account", "acme", "--db", db)
	srv := startServe(t, db, "127.0.0.1:0", nil, "--sim-latency", "0s")
	_, err := client.New(srv.URL).Submit(t.Context(), inkwell.Request{Prompt: "who pays?"})
	if client.Code(err) != inkwell.EUNAUTHENTICATED {
		t.Fatalf("Submit without a token: %v, want %s", err, inkwell.EUNAUTHENTICATED)
	}
	c := client.New(srv.URL, client.WithToken(token))
	sub, err := c.Submit(t.Context(), inkwell.Request{Prompt: "who pays?"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Wait(t.Context(), sub.Job.ID)
	if err != nil || d.Charge == nil || d.Charge.Account != "acme" {
		t.Fatalf("Wait = %+v, %v; want done, charged to acme", d, err)
	}
}

// TestClient_WaitWokenByAnotherProcess: a job ended by another process
// (`inkwell cancel` on the command line) wakes the server's long-poll:
// through data_version on SQLite, LISTEN/NOTIFY on PostgreSQL.
func TestClient_WaitWokenByAnotherProcess(t *testing.T) {
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		srv := startServe(t, b.DSN, "127.0.0.1:0", nil, "--sim-latency", "1h", "--lane", "lane-"+b.Name)
		c := client.New(srv.URL, client.WithPollWait(time.Minute))
		sub, err := c.Submit(t.Context(), inkwell.Request{Prompt: "cancelled elsewhere"})
		if err != nil {
			t.Fatal(err)
		}
		waitRunning(t, c, sub.Job.ID)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // below the minute a wait that runs out takes
		defer cancel()
		got := make(chan error, 1)
		var d inkwell.JobDetail
		go func() {
			var err error
			d, err = c.Wait(ctx, sub.Job.ID)
			got <- err
		}()
		runInkwell(t, "cancel", "--db", b.DSN, fmt.Sprint(sub.Job.ID))
		if err := <-got; err != nil || d.Job.Status != inkwell.StatusFailed || d.Job.ErrorClass != inkwell.ClassCancelled {
			t.Fatalf("Wait = %+v, %v; want failed, cancelled, woken by the other process's cancel", d.Job, err)
		}
	})
}

// waitRunning waits until the job's call is in flight.
func waitRunning(t *testing.T, c *client.Client, id int64) {
	t.Helper()
	storetest.WaitFor(t, limit, "job running", func() bool {
		d, err := c.Get(t.Context(), id)
		return err == nil && d.Job.Status == inkwell.StatusRunning
	})
}

// TestClient_WaitThatRunsOutSaysWhatItSaw: a Wait whose context ends
// before the job does (the poll wait far longer) asks the server to answer
// before the deadline, so it returns the job as it was then (running),
// with ctx's error; it used to return no job at all ("last seen ").
func TestClient_WaitThatRunsOutSaysWhatItSaw(t *testing.T) {
	t.Parallel()
	srv := startServe(t, dbPath(t), "127.0.0.1:0", nil, "--sim-latency", "1h")
	c := client.New(srv.URL, client.WithPollWait(time.Minute))
	sub, err := c.Submit(t.Context(), inkwell.Request{Prompt: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	storetest.WaitFor(t, 10*time.Second, "job running", func() bool {
		d, err := c.Get(t.Context(), sub.Job.ID)
		return err == nil && d.Job.Status == inkwell.StatusRunning
	})
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	d, err := c.Wait(ctx, sub.Job.ID)
	if !errors.Is(err, context.DeadlineExceeded) || d.Job.ID != sub.Job.ID || d.Job.Status != inkwell.StatusRunning || !strings.Contains(err.Error(), "last seen running") {
		t.Errorf("Wait past its deadline = %+v, %v; want job %d as last seen, running, and the deadline's error", d.Job, err, sub.Job.ID)
	}
}
