package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/inkwell/inkwell/internal/metrics/metricstest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/webhook"
)

// hookLog is a real receiver on loopback that answers 204 and keeps
// every request's webhook-id and body.
type hookLog struct {
	mu  sync.Mutex
	ids []string
	srv *httptest.Server
}

func newHookLog(t *testing.T) *hookLog {
	h := &hookLog{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.ids = append(h.ids, r.Header.Get(webhook.HeaderID))
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookLog) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ids...)
}

// TestServe_WebhookCrashAfterSend: serve is killed (SIGKILL, crash point
// webhook.after-send) between the receiver's 2xx and the commit that marks
// the delivery delivered. After a restart the delivery is sent again, with
// the same webhook-id, and then marked delivered: at least once. The CLI
// sets the webhook up, lists the delivery and replays it.
func TestServe_WebhookCrashAfterSend(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		hooks := newHookLog(t)
		code, out, errOut := runCLI(t, "accounts", "add", "acme", "--webhook-url", hooks.srv.URL+"/inkwell", "--db", b.DSN)
		if code != 0 || !strings.Contains(out, "signing secret (shown once") || !strings.Contains(out, store.WebhookSecretPrefix) {
			t.Fatalf("accounts add --webhook-url = %d\n%s%s", code, out, errOut)
		}
		st := storetest.MustOpen(t, b.DSN, store.Options{NoMigrate: true})
		env := append(childEnv(), crashpoint.EnvVar+"="+crashpoint.WebhookAfterSend)
		first := StartChild(t, inkwellBin, env, waitLimit, "serve", "--db", b.DSN, "--addr", "127.0.0.1:0", "--sim-latency", "0s", "--webhook-timeout", "500ms")
		job := submit(t, first.URL, "k1", `{"prompt":"ink","account":"acme"}`).Job
		<-first.exited // killed by the crash point after the 2xx
		if !strings.Contains(first.Log(), "crashpoint: webhook.after-send") {
			t.Fatalf("first serve exited without the crash point:\n%s", first.Log())
		}
		ids := hooks.got()
		ds, err := st.WebhookDeliveries(t.Context(), store.WebhookFilter{})
		if err != nil || len(ds) != 1 || len(ids) != 1 {
			t.Fatalf("after the crash: deliveries %+v (%v), receiver got %v; want one each", ds, err, ids)
		}
		if d := ds[0]; d.JobID != job.ID || d.State() != "pending" || d.Attempts != 1 {
			t.Fatalf("after the crash: %+v; want job %d's delivery pending after 1 send", d, job.ID)
		}

		second := startServe(t, b.DSN, "--sim-latency", "0s", "--webhook-timeout", "500ms")
		storetest.WaitFor(t, waitLimit, "the delivery marked delivered after the restart", func() bool {
			d, err := st.WebhookDelivery(t.Context(), ds[0].ID)
			return err == nil && d.State() == "delivered"
		})
		ids = hooks.got()
		if len(ids) != 2 || ids[0] != ids[1] {
			t.Errorf("receiver got webhook-ids %v; want the same id twice (sent again after the crash)", ids)
		}

		code, out, errOut = runCLI(t, "webhooks", "list", "--account", "acme", "--db", b.DSN)
		if code != 0 || !strings.Contains(out, "job.done") || !strings.Contains(out, "delivered") || !strings.Contains(out, "k1") {
			t.Errorf("webhooks list = %d\n%s%s", code, out, errOut)
		}
		code, out, errOut = runCLI(t, "webhooks", "replay", fmt.Sprint(ds[0].ID), "--db", b.DSN)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("replays %d", ds[0].ID)) {
			t.Fatalf("webhooks replay = %d\n%s%s", code, out, errOut)
		}
		storetest.WaitFor(t, waitLimit, "the replay delivered", func() bool { return len(hooks.got()) == 3 })
		if ids = hooks.got(); ids[2] != ids[0] {
			t.Errorf("the replay's webhook-id %s, want %s", ids[2], ids[0])
		}
		for _, args := range [][]string{{"replay"}, {"replay", "x"}, {"replay", "0"}, {"list", "--limit", "0"}, {"list", "extra"}} {
			all := append(append([]string{"webhooks"}, args...), "--db", b.DSN)
			if code, _, errOut := runCLI(t, all...); code != 2 || errOut == "" {
				t.Errorf("inkwell %q = %d, want 2 with a reason", all, code)
			}
		}
		if strings.Contains(second.Log(), "level=ERROR") {
			t.Errorf("the second serve logged errors:\n%s", second.Log())
		}
	})
}

// TestCLI_AccountsWebhook: set, change, rotate and remove an account's
// webhook; bad input is refused with exit 2 and writes nothing, and
// creates no file.
func TestCLI_AccountsWebhook(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "new.db")
	if code, _, _ := runCLI(t, "accounts", "add", "acme", "--webhook-url", "ftp://x", "--db", db); code != 2 {
		t.Errorf("accounts add with a bad --webhook-url = %d, want 2", code)
	}
	if m, _ := filepath.Glob(db + "*"); len(m) != 0 {
		t.Errorf("a refused accounts add left %v", m)
	}
	if code, out, errOut := runCLI(t, "accounts", "add", "acme", "--db", db); code != 0 || strings.Contains(out, "secret") {
		t.Fatalf("accounts add without a webhook = %d\n%s%s", code, out, errOut)
	}
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	before := authRows(t, st)
	for _, args := range [][]string{{"acme"}, {"acme", "--url", "nope"}, {"acme", "--remove", "--url", "http://x/"}, {"acme", "--rotate-secret"}, {}, {"a", "b", "--remove"}} {
		all := append(append([]string{"accounts", "webhook"}, args...), "--db", db)
		if code, out, errOut := runCLI(t, all...); code != 2 || errOut == "" {
			t.Errorf("inkwell %q = %d, want 2 with a reason\n%s%s", all, code, out, errOut)
		}
	}
	if diff := cmp.Diff(before, authRows(t, st)); diff != "" {
		t.Errorf("refused input changed the accounts (-before +after):\n%s", diff)
	}
	code, out, errOut := runCLI(t, "accounts", "webhook", "acme", "--url", "https://example.com/a", "--db", db)
	if code != 0 || !strings.Contains(out, store.WebhookSecretPrefix) {
		t.Fatalf("first URL = %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "accounts", "webhook", "acme", "--url", "https://example.com/b", "--db", db)
	if code != 0 || !strings.Contains(out, "signing secret unchanged") {
		t.Errorf("change URL = %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "accounts", "webhook", "acme", "--rotate-secret", "--db", db)
	if code != 0 || !strings.Contains(out, store.WebhookSecretPrefix) {
		t.Errorf("rotate = %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "accounts", "list", "--db", db)
	if code != 0 || !strings.Contains(out, "https://example.com/b") || strings.Contains(out, store.WebhookSecretPrefix) {
		t.Errorf("accounts list shows the URL, never the secret:\n%s", out)
	}
	if code, out, _ = runCLI(t, "accounts", "webhook", "acme", "--remove", "--db", db); code != 0 || !strings.Contains(out, "no webhook now") {
		t.Errorf("remove = %d\n%s", code, out)
	}
}

// TestServe_WebhookRemovedURLParksThenSends: a delivery whose send failed
// is pending when the operator removes the account's URL; the running
// serve's sender parks it when it falls due (its log says so, the parked
// gauge counts it, 'webhooks list' shows it waiting for a URL, and no
// poll reads it again), and a URL set again with the CLI makes it due:
// the same serve sends it, once.
func TestServe_WebhookRemovedURLParksThenSends(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		var mu sync.Mutex
		failing, sends := true, 0
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			mu.Lock()
			defer mu.Unlock()
			sends++
			if failing {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(hook.Close)
		sent := func() int { mu.Lock(); defer mu.Unlock(); return sends }
		if code, out, errOut := runCLI(t, "accounts", "add", "acme", "--webhook-url", hook.URL+"/h", "--db", b.DSN); code != 0 {
			t.Fatalf("accounts add = %d\n%s%s", code, out, errOut)
		}
		st := storetest.MustOpen(t, b.DSN, store.Options{NoMigrate: true})
		srv := startServe(t, b.DSN, "--sim-latency", "0s", "--webhook-retry-base", "300ms", "--webhook-retry-cap", "300ms")
		submit(t, srv.URL, "k1", `{"prompt":"ink","account":"acme"}`)
		storetest.WaitFor(t, waitLimit, "a first send, answered 500", func() bool { return sent() >= 1 })
		if code, out, errOut := runCLI(t, "accounts", "webhook", "acme", "--remove", "--db", b.DSN); code != 0 {
			t.Fatalf("accounts webhook --remove = %d\n%s%s", code, out, errOut)
		}
		var d store.WebhookDelivery
		storetest.WaitFor(t, waitLimit, "the delivery parked", func() bool {
			ds, err := st.WebhookDeliveries(t.Context(), store.WebhookFilter{Account: "acme"})
			if err == nil && len(ds) == 1 {
				d = ds[0]
			}
			return d.Parked()
		})
		if d.State() != "pending" {
			t.Errorf("parked delivery %+v; want pending", d)
		}
		storetest.WaitFor(t, waitLimit, "serve's log saying it parked a delivery", func() bool {
			return strings.Contains(srv.Log(), "parked the due deliveries of accounts without a webhook URL")
		})
		if got := metricstest.Must(t, srv.URL, "inkwell_webhook_deliveries_parked"); got != 1 {
			t.Errorf("inkwell_webhook_deliveries_parked = %v, want 1", got)
		}
		if got := metricstest.Must(t, srv.URL, "inkwell_webhook_oldest_pending_age_seconds"); got != 0 {
			t.Errorf("inkwell_webhook_oldest_pending_age_seconds = %v, want 0: a parked delivery waits for an operator", got)
		}
		if code, out, errOut := runCLI(t, "webhooks", "list", "--account", "acme", "--db", b.DSN); code != 0 || !strings.Contains(out, "waits for a URL") {
			t.Errorf("webhooks list = %d, want the delivery shown waiting for a URL\n%s%s", code, out, errOut)
		}
		before := sent()
		mu.Lock()
		failing = false
		mu.Unlock()
		if code, out, errOut := runCLI(t, "accounts", "webhook", "acme", "--url", hook.URL+"/back", "--db", b.DSN); code != 0 {
			t.Fatalf("accounts webhook --url = %d\n%s%s", code, out, errOut)
		}
		storetest.WaitFor(t, waitLimit, "the delivery sent once a URL is set", func() bool {
			got, err := st.WebhookDelivery(t.Context(), d.ID)
			return err == nil && got.State() == "delivered"
		})
		if n := sent() - before; n != 1 {
			t.Errorf("%d sends after the URL was set again, want 1", n)
		}
		if strings.Contains(srv.Log(), "level=ERROR") {
			t.Errorf("serve logged errors:\n%s", srv.Log())
		}
	})
}
