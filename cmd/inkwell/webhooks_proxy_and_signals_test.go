package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/webhook"
)

// envWithProxy is childEnv with every proxy variable replaced by proxy.
func envWithProxy(proxy string) []string {
	var env []string
	for _, kv := range childEnv() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "REQUEST_METHOD":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HTTP_PROXY="+proxy, "HTTPS_PROXY="+proxy, "http_proxy="+proxy, "https_proxy="+proxy)
}

// TestServe_WebhookToLoopbackGoesThroughTheProxy: docs/webhooks.md and
// docs/security.md tell the operator to keep webhook traffic off internal
// networks by running serve with HTTP_PROXY/HTTPS_PROXY pointing at a
// filtering proxy ("the sender honours them"). Here the proxy refuses
// everything (403) and records what it was asked for; the accounts' webhook
// URLs point at services on this host (http://127.0.0.1:PORT and
// http://localhost:PORT). Every delivery goes to the proxy and is refused,
// none to the local service: Go's ProxyFromEnvironment never proxies
// "localhost" or a loopback IP, so the sender uses its own rule
// (internal/webhook proxy.go), which does unless NO_PROXY names the host.
func TestServe_WebhookToLoopbackGoesThroughTheProxy(t *testing.T) {
	t.Parallel()
	db := storetest.SQLitePath(t)
	var mu sync.Mutex
	var proxied, direct []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		proxied = append(proxied, r.Method+" "+r.URL.String())
		mu.Unlock()
		http.Error(w, "filtered: internal address", http.StatusForbidden)
	}))
	t.Cleanup(proxy.Close)
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		direct = append(direct, r.Method+" "+r.Host+r.URL.String())
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(internal.Close)
	_, port, _ := net.SplitHostPort(internal.Listener.Addr().String())
	for name, u := range map[string]string{"ip": "http://127.0.0.1:" + port + "/admin", "named": "http://localhost:" + port + "/admin"} {
		if code, out, errOut := runCLI(t, "accounts", "add", name, "--webhook-url", u, "--db", db); code != 0 {
			t.Fatalf("accounts add %s = %d\n%s%s", name, code, out, errOut)
		}
	}
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	srv := StartChild(t, inkwellBin, envWithProxy(proxy.URL), waitLimit, "serve", "--db", db, "--addr", "127.0.0.1:0", "--sim-latency", "0s", "--webhook-timeout", "2s")
	submit(t, srv.URL, "k-ip", `{"prompt":"ink","account":"ip"}`)
	submit(t, srv.URL, "k-named", `{"prompt":"ink","account":"named"}`)
	storetest.WaitFor(t, waitLimit, "both deliveries sent once", func() bool {
		ds, err := st.WebhookDeliveries(t.Context(), store.WebhookFilter{})
		if err != nil {
			t.Fatal(err)
		}
		sent := 0
		for _, d := range ds {
			if d.Attempts > 0 && (d.LastStatus != 0 || d.LastError != "" || d.DeliveredAt != nil) {
				sent++
			}
		}
		return len(ds) == 2 && sent == 2
	})
	ds, err := st.WebhookDeliveries(t.Context(), store.WebhookFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.LastStatus != http.StatusForbidden || d.DeliveredAt != nil {
			t.Errorf("delivery %d of %s: last status %d, delivered %v, error %q; want the proxy's 403 refusal", d.ID, d.Account, d.LastStatus, d.DeliveredAt, d.LastError)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(direct) > 0 {
		t.Errorf("serve ran with HTTP_PROXY/HTTPS_PROXY=%s (a filtering proxy), yet posted webhook deliveries straight to a loopback service, bypassing the proxy: %q (the proxy saw %q). "+
			"Go's ProxyFromEnvironment never proxies localhost or loopback IPs; the docs promise the proxy keeps webhook traffic off internal addresses", proxy.URL, direct, proxied)
	}
	for _, u := range []string{"http://127.0.0.1:" + port + "/admin", "http://localhost:" + port + "/admin"} {
		if !slices.Contains(proxied, "POST "+u) {
			t.Errorf("the proxy saw %q; want a POST of %s", proxied, u)
		}
	}
}

// TestServe_WebhookSigkillMidSendResentSameID: serve is SIGKILLed while a post is
// in flight (the receiver holds the request, no answer yet): not the
// crash point after the 2xx that TestServe_WebhookCrashAfterSend covers,
// but a kill in the middle of the send. After a restart the delivery is
// sent again once its lease ends, with the same webhook-id and the same
// body, both attempts verify with the official Standard Webhooks library,
// and it is marked delivered.
func TestServe_WebhookSigkillMidSendResentSameID(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		type got struct {
			id   string
			body []byte
			err  error
		}
		var mu sync.Mutex
		var reqs []got
		var secret string
		hang := true
		inFlight := make(chan struct{}, 4)
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			g := got{id: r.Header.Get(webhook.HeaderID), body: body}
			if wh, err := standardwebhooks.NewWebhook(secret); err != nil {
				g.err = err
			} else {
				g.err = wh.Verify(body, r.Header)
			}
			reqs = append(reqs, g)
			h := hang
			mu.Unlock()
			if h {
				inFlight <- struct{}{}
				<-r.Context().Done() // the sender dies: the connection closes
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(rcv.Close)
		if code, out, errOut := runCLI(t, "accounts", "add", "acme", "--webhook-url", rcv.URL, "--db", b.DSN); code != 0 {
			t.Fatalf("accounts add = %d\n%s%s", code, out, errOut)
		}
		st := storetest.MustOpen(t, b.DSN, store.Options{NoMigrate: true})
		sec, err := st.WebhookSecret(t.Context(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		secret = sec
		mu.Unlock()
		first := startServe(t, b.DSN, "--sim-latency", "0s", "--webhook-timeout", "2s")
		submit(t, first.URL, "k1", `{"prompt":"ink","account":"acme"}`)
		select {
		case <-inFlight:
		case <-time.After(waitLimit):
			t.Fatal("the receiver never got the first post")
		}
		if err := first.Signal(t, syscall.SIGKILL); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("SIGKILL: the child exited with %v", err)
		}
		mu.Lock()
		hang = false
		mu.Unlock()
		ds, err := st.WebhookDeliveries(t.Context(), store.WebhookFilter{})
		if err != nil || len(ds) != 1 || ds[0].State() != "pending" || ds[0].Attempts != 1 {
			t.Fatalf("after SIGKILL mid-send: %+v, %v; want one pending delivery after 1 attempt", ds, err)
		}
		startServe(t, b.DSN, "--sim-latency", "0s", "--webhook-timeout", "2s")
		storetest.WaitFor(t, waitLimit, "the delivery delivered after the restart", func() bool {
			d, err := st.WebhookDelivery(t.Context(), ds[0].ID)
			return err == nil && d.State() == "delivered"
		})
		mu.Lock()
		defer mu.Unlock()
		if len(reqs) != 2 {
			t.Fatalf("receiver got %d posts, want 2 (the killed one and the re-send)", len(reqs))
		}
		if reqs[0].id != reqs[1].id || !bytes.Equal(reqs[0].body, reqs[1].body) {
			t.Errorf("re-send after SIGKILL: id %s body %s; first: id %s body %s", reqs[1].id, reqs[1].body, reqs[0].id, reqs[0].body)
		}
		for i, g := range reqs {
			if g.err != nil {
				t.Errorf("post %d does not verify with the official library: %v", i, g.err)
			}
		}
	})
}

// TestServe_WebhookSigtermMidSendLeftDueAtOnce: serve gets SIGTERM while a post
// hangs at a receiver (webhook time-out 30 s). It exits without waiting
// for the time-out, and the delivery is left pending, due at once, its
// last error saying the send was cut short (docs/webhooks.md: "On SIGTERM
// a send in flight is cut short and left due at once, for the next
// start"); the next serve delivers it with the same webhook-id.
func TestServe_WebhookSigtermMidSendLeftDueAtOnce(t *testing.T) {
	t.Parallel()
	db := storetest.SQLitePath(t)
	var mu sync.Mutex
	var ids []string
	hang := true
	inFlight := make(chan struct{}, 4)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		ids = append(ids, r.Header.Get(webhook.HeaderID))
		h := hang
		mu.Unlock()
		if h {
			inFlight <- struct{}{}
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)
	if code, out, errOut := runCLI(t, "accounts", "add", "acme", "--webhook-url", rcv.URL, "--db", db); code != 0 {
		t.Fatalf("accounts add = %d\n%s%s", code, out, errOut)
	}
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	first := startServe(t, db, "--sim-latency", "0s", "--webhook-timeout", "30s")
	submit(t, first.URL, "k1", `{"prompt":"ink","account":"acme"}`)
	select {
	case <-inFlight:
	case <-time.After(waitLimit):
		t.Fatal("the receiver never got the post")
	}
	start := time.Now()
	if err := first.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("serve after SIGTERM: %v\n%s", err, first.Log())
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("serve took %s to stop with a webhook send in flight", took)
	}
	ds, err := st.WebhookDeliveries(t.Context(), store.WebhookFilter{})
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries %+v, %v", ds, err)
	}
	if d := ds[0]; d.State() != "pending" || d.Attempts != 1 || time.Until(d.NextAttemptAt) > time.Second || !strings.Contains(d.LastError, "cut short") {
		t.Errorf("after SIGTERM mid-send: %+v; want pending, 1 attempt, due now, 'cut short'", d)
	}
	mu.Lock()
	hang = false
	mu.Unlock()
	startServe(t, db, "--sim-latency", "0s", "--webhook-timeout", "30s")
	storetest.WaitFor(t, 10*time.Second, "delivered by the next serve at once (not after a lease)", func() bool {
		d, err := st.WebhookDelivery(t.Context(), ds[0].ID)
		return err == nil && d.State() == "delivered"
	})
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || ids[0] != ids[1] {
		t.Errorf("receiver got webhook-ids %v; want the same id twice", ids)
	}
}
