package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/jobwait"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// setupWaits is setup with the long-polls' hub in the test's hands.
func setupWaits(t *testing.T) (*env, *jobwait.Hub) {
	t.Helper()
	hub := jobwait.New()
	e := &env{t: t, st: storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})}
	e.api = api.New(api.Config{Store: e.st, Logger: storetest.TestLogger(t), Waits: hub})
	e.api.SetReady(true)
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	return e, hub
}

// waitGet sends GET /v1/jobs/{id}?wait= in the background.
func (e *env) waitGet(ctx context.Context, id int64, wait string) <-chan reply {
	out := make(chan reply, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/jobs/%d?wait=%s", e.srv.URL, id, wait), nil)
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			out <- reply{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		var r reply
		r.status, r.header = resp.StatusCode, resp.Header
		r.body, _ = io.ReadAll(resp.Body)
		out <- r
	}()
	return out
}

func TestShow_WaitAnswersWhenTheJobEnds(t *testing.T) {
	t.Parallel()
	e, hub := setupWaits(t)
	id := e.post("wait-cancel", `{"prompt":"wait for me"}`).detail(t).Job.ID
	got := e.waitGet(t.Context(), id, "60s")
	storetest.WaitFor(t, 10*time.Second, "the long-poll waiting", func() bool { return hub.Len() == 1 })
	if r := e.do(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/cancel", id), nil, nil); r.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	r := <-got // a wait that ran out would answer queued, 60 s later
	if r.status != http.StatusOK || r.detail(t).Job.Status != inkwell.StatusFailed {
		t.Fatalf("long-poll answered %d %s, want 200 with the job failed (cancelled)", r.status, r.body)
	}
	if n := hub.Len(); n != 0 {
		t.Errorf("hub holds %d jobs after the answer, want 0", n)
	}
}

func TestShow_WaitRunsOut(t *testing.T) {
	t.Parallel()
	e, hub := setupWaits(t)
	id := e.post("wait-out", `{"prompt":"nobody runs me"}`).detail(t).Job.ID
	r := <-e.waitGet(t.Context(), id, "50ms")
	if r.status != http.StatusOK || r.detail(t).Job.Status != inkwell.StatusQueued {
		t.Fatalf("long-poll answered %d %s, want 200 with the job as it is (queued)", r.status, r.body)
	}
	if n := hub.Len(); n != 0 {
		t.Errorf("hub holds %d jobs after the wait ran out, want 0", n)
	}
}

func TestShow_WaitEndedAnswersAtOnce(t *testing.T) {
	t.Parallel()
	e, _ := setupWaits(t)
	id := e.post("wait-ended", `{"prompt":"already over"}`).detail(t).Job.ID
	e.do(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/cancel", id), nil, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // far below the 60 s asked for
	defer cancel()
	if r := <-e.waitGet(ctx, id, "60s"); r.status != http.StatusOK || r.detail(t).Job.Status != inkwell.StatusFailed {
		t.Fatalf("long-poll on an ended job answered %d %s, want 200 failed at once", r.status, r.body)
	}
}

func TestShow_WaitClientGoneFreesTheWaiter(t *testing.T) {
	t.Parallel()
	e, hub := setupWaits(t)
	id := e.post("wait-gone", `{"prompt":"left behind"}`).detail(t).Job.ID
	ctx, cancel := context.WithCancel(t.Context())
	got := e.waitGet(ctx, id, "60s")
	storetest.WaitFor(t, 10*time.Second, "the long-poll waiting", func() bool { return hub.Len() == 1 })
	cancel()
	<-got
	storetest.WaitFor(t, 10*time.Second, "the waiter freed", func() bool { return hub.Len() == 0 })
}

func TestShow_WaitBadValueIsRefused(t *testing.T) {
	t.Parallel()
	e, hub := setupWaits(t)
	id := e.post("wait-bad", `{"prompt":"p"}`).detail(t).Job.ID
	before := e.contents()
	for _, bad := range []string{"abc", "-1s", "-3", "1h30x", ""} {
		t.Run(bad, func(t *testing.T) {
			r := e.do(http.MethodGet, fmt.Sprintf("/v1/jobs/%d?wait=%s", id, bad), nil, nil)
			assertError(t, r, http.StatusBadRequest, inkwell.EINVALID)
		})
	}
	assertError(t, e.do(http.MethodGet, "/v1/jobs/999?wait=60s", nil, nil), http.StatusNotFound, inkwell.ENOTFOUND)
	e.assertUnchanged(before)
	if n := hub.Len(); n != 0 {
		t.Errorf("hub holds %d jobs after refusals, want 0", n)
	}
}

// TestShow_WaitOutlivesTheServersTimeouts: serve's http.Server has read
// and write timeouts shorter than a long wait; the long-poll still answers
// with the job when the wait runs out (its write deadline pushed back; a
// read deadline that passed does not end it).
func TestShow_WaitOutlivesTheServersTimeouts(t *testing.T) {
	t.Parallel()
	e, _ := setupWaits(t)
	id := e.post("wait-long", `{"prompt":"longer than the timeouts"}`).detail(t).Job.ID
	e.srv.Close()
	e.srv = httptest.NewUnstartedServer(e.api)
	e.srv.Config.ReadTimeout, e.srv.Config.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond
	e.srv.Start()
	t.Cleanup(e.srv.Close)
	r := <-e.waitGet(t.Context(), id, "3s")
	if r.status != http.StatusOK || r.detail(t).Job.Status != inkwell.StatusQueued {
		t.Fatalf("long-poll past the server's timeouts answered %d %q, want 200 with the job queued", r.status, r.body)
	}
}

// TestShow_WaitAnswersAtShutdown: the hub closed (serve is stopping)
// answers every waiting request at once with the job as it is.
func TestShow_WaitAnswersAtShutdown(t *testing.T) {
	t.Parallel()
	e, hub := setupWaits(t)
	id := e.post("wait-stop", `{"prompt":"still queued"}`).detail(t).Job.ID
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // far below the 60 s asked for
	defer cancel()
	got := e.waitGet(ctx, id, "60s")
	storetest.WaitFor(t, 10*time.Second, "the long-poll waiting", func() bool { return hub.Len() == 1 })
	hub.Close()
	if r := <-got; r.status != http.StatusOK || r.detail(t).Job.Status != inkwell.StatusQueued {
		t.Fatalf("long-poll at shutdown answered %d %s, want 200 with the job queued", r.status, r.body)
	}
}
