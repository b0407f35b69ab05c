package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell/client"
)

// waitServer answers GET /v1/jobs/1 at once with a running job, whatever
// ?wait= says (a server or proxy that ignores the long poll), and records
// each ?wait it was asked for.
func waitServer(t *testing.T) (*httptest.Server, *atomic.Int64, func() []string) {
	var n atomic.Int64
	var mu sync.Mutex
	var waits []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		mu.Lock()
		waits = append(waits, r.URL.Query().Get("wait"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"job":{"id":1,"status":"running","idempotency_key":"k"},"attempts":[]}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), waits...) }
}

// No ?wait is ever negative, and a Wait that runs out says what it saw.
func TestClient_WaitNeverSendsANegativeWait(t *testing.T) {
	t.Parallel()
	srv, _, waits := waitServer(t)
	c := client.New(srv.URL, client.WithPollWait(time.Minute))
	for _, d := range []time.Duration{-time.Second, 0, 100 * time.Millisecond, 251 * time.Millisecond, 400 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		_, err := c.Wait(ctx, 1)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait with %v: %v; want the deadline's error", d, err)
		}
	}
	for _, w := range waits() {
		if strings.HasPrefix(w, "-") {
			t.Errorf("sent ?wait=%s", w)
		}
	}
}

// A server that ignores ?wait (answers at once with the job running), as
// a proxy may, or serve while it stops: Wait pauses between polls that
// come back early (it used to ask again at once, thousands of times a
// second, for as long as ctx lasted).
func TestClient_WaitAgainstAServerThatIgnoresWait(t *testing.T) {
	t.Parallel()
	srv, n, _ := waitServer(t)
	c := client.New(srv.URL, client.WithPollWait(time.Minute))
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Wait(ctx, 1)
	if got := n.Load(); got > 50 {
		t.Errorf("Wait for %v against a server that ignores ?wait sent %d requests (err %v); want a pause between polls that end early", time.Since(start).Round(time.Millisecond), got, err)
	}
}

// No deadline: the poll waits pollWait, and ends with ctx.
func TestClient_WaitWithoutDeadline(t *testing.T) {
	t.Parallel()
	srv, _, waits := waitServer(t)
	c := client.New(srv.URL, client.WithPollWait(time.Minute))
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := c.Wait(ctx, 1)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Wait cancelled: %v", err)
	}
	if w := waits(); len(w) == 0 || w[0] != "60000ms" {
		t.Errorf("first ?wait without a deadline = %v; want 60000ms", w)
	}
}
