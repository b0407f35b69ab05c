package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/webhook"
)

// receiver is a real HTTP receiver on loopback whose behaviour the test
// switches: fail (500), hang (no answer until the test ends), or ok (204).
type receiver struct {
	srv     *httptest.Server
	secret  string
	mu      sync.Mutex
	mode    string
	got     []received // every request, in order
	release chan struct{}
}

type received struct {
	id, ts, sig string
	body        []byte
	verified    error
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{mode: "ok", release: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		close(r.release)
		r.srv.Close()
	})
	return r
}

func (r *receiver) setMode(m string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mode = m
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	rec := received{id: req.Header.Get("webhook-id"), ts: req.Header.Get("webhook-timestamp"), sig: req.Header.Get("webhook-signature"), body: body}
	rec.verified = verify(r.secret, rec)
	r.got = append(r.got, rec)
	mode := r.mode
	r.mu.Unlock()
	switch mode {
	case "fail":
		http.Error(w, "receiver down", http.StatusInternalServerError)
	case "hang":
		select {
		case <-r.release:
		case <-req.Context().Done():
		}
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// verify checks a request as a receiver following the Standard Webhooks
// spec would, written from the spec, not from the sender's code: the
// secret's base64 part after whsec_ is the key; the signed content is
// "{webhook-id}.{webhook-timestamp}.{body}"; the header is a space
// separated list of "v1,<base64>"; the timestamp is within 5 minutes.
func verify(secret string, r received) error {
	if r.id == "" || r.ts == "" || r.sig == "" {
		return fmt.Errorf("missing headers: id %q ts %q sig %q", r.id, r.ts, r.sig)
	}
	ts, err := strconv.ParseInt(r.ts, 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp %q", r.ts)
	}
	if d := time.Since(time.Unix(ts, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("timestamp %d out of tolerance", ts)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", r.id, r.ts, r.body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(r.sig) {
		version, b64, ok := strings.Cut(s, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("no v1 signature matches in %q", r.sig)
}

// endJobs stores one done and one failed job of account.
func endJobs(t *testing.T, st *store.Store, account string) {
	t.Helper()
	endJobOf(t, st, account, "job-done", "")
	endJobOf(t, st, account, "job-failed", "provider said no")
}

func deliveries(t *testing.T, st *store.Store) []store.WebhookDelivery {
	t.Helper()
	ds, err := st.WebhookDeliveries(t.Context(), store.WebhookFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestSender_FailsHangsRecovers: against a real receiver that answers
// 500, then hangs past the time-out, then recovers, every delivery is
// retried with back-off and delivered once the receiver is up; each
// request verifies with an independent implementation of the scheme, and
// a delivery's webhook-id and body are the same on every attempt.
func TestSender_FailsHangsRecovers(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		rcv := newReceiver(t)
		a, err := st.CreateAccount(ctx, store.Account{Name: "acme", WebhookURL: rcv.srv.URL + "/hooks"})
		if err != nil {
			t.Fatal(err)
		}
		rcv.secret = a.WebhookSecret
		endJobs(t, st, "acme")
		snd := webhook.New(st, webhook.Config{Timeout: 300 * time.Millisecond, RetryBase: time.Millisecond, RetryCap: 5 * time.Millisecond, Logger: storetest.TestLogger(t)})

		rcv.setMode("fail")
		if n, err := snd.SendDue(ctx); err != nil || n != 2 {
			t.Fatalf("SendDue against a failing receiver: %d, %v; want 2 claimed", n, err)
		}
		for _, d := range deliveries(t, st) {
			if d.State() != "pending" || d.Attempts != 1 || d.LastStatus != 500 || !strings.Contains(d.LastError, "HTTP 500: receiver down") {
				t.Errorf("after a 500: %+v", d)
			}
		}

		rcv.setMode("hang")
		storetest.WaitFor(t, 10*time.Second, "a send against the hanging receiver", func() bool {
			n, err := snd.SendDue(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return n > 0
		})
		hung := 0
		for _, d := range deliveries(t, st) {
			if d.Attempts == 2 {
				hung++
				if d.LastStatus != 0 || !strings.Contains(d.LastError, "no answer within 300ms") {
					t.Errorf("after a time-out: %+v", d)
				}
			}
		}
		if hung == 0 {
			t.Errorf("no delivery records the time-out: %+v", deliveries(t, st))
		}

		rcv.setMode("ok")
		storetest.WaitFor(t, 10*time.Second, "both deliveries delivered", func() bool {
			if _, err := snd.SendDue(ctx); err != nil {
				t.Fatal(err)
			}
			for _, d := range deliveries(t, st) {
				if d.State() != "delivered" {
					return false
				}
			}
			return true
		})
		in, _ := st.Installation(ctx)
		bodies := map[string]string{}
		for _, r := range rcv.requests() {
			if r.verified != nil {
				t.Errorf("request %s: %v", r.id, r.verified)
			}
			if b, seen := bodies[r.id]; seen && b != string(r.body) {
				t.Errorf("webhook-id %s sent with two bodies:\n%s\n%s", r.id, b, r.body)
			}
			bodies[r.id] = string(r.body)
		}
		for _, d := range deliveries(t, st) {
			b, ok := bodies[d.MessageID(in.ID)]
			if !ok {
				t.Errorf("delivery %d (%s) never reached the receiver", d.ID, d.MessageID(in.ID))
				continue
			}
			var p webhook.Payload
			if err := json.Unmarshal([]byte(b), &p); err != nil {
				t.Fatal(err)
			}
			if p.Type != d.Event || p.Data.JobID != d.JobID || p.Data.IdempotencyKey != d.IdempotencyKey || p.Data.Account != "acme" ||
				p.Data.Path != fmt.Sprintf("/v1/jobs/%d", d.JobID) || !p.Timestamp.Equal(d.OccurredAt) {
				t.Errorf("payload %+v for delivery %+v", p, d)
			}
			if p.Type == "job.failed" && (p.Data.ErrorClass != "rejected" || p.Data.Error != "provider said no") {
				t.Errorf("failed payload %+v; want the class and the error", p.Data)
			}
		}
		if len(bodies) != 2 {
			t.Errorf("%d webhook-ids, want 2: %v", len(bodies), bodies)
		}
	})
}

// TestSender_GivesUpAndReplays: after MaxAttempts failures a delivery is
// given up; a replay sends it again, with the same webhook-id.
func TestSender_GivesUpAndReplays(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		rcv := newReceiver(t)
		a, err := st.CreateAccount(ctx, store.Account{Name: "acme", WebhookURL: rcv.srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		rcv.secret = a.WebhookSecret
		endJobs(t, st, "acme")
		snd := webhook.New(st, webhook.Config{MaxAttempts: 1, Logger: storetest.TestLogger(t)})
		rcv.setMode("fail")
		if n, err := snd.SendDue(ctx); err != nil || n != 2 {
			t.Fatalf("SendDue: %d, %v", n, err)
		}
		ds := deliveries(t, st)
		for _, d := range ds {
			if d.State() != "gave_up" || !strings.HasPrefix(d.LastError, "gave up after 1 attempts: HTTP 500") {
				t.Errorf("after the last attempt: %+v", d)
			}
		}
		rcv.setMode("ok")
		r, created, err := st.ReplayWebhook(ctx, ds[0].ID)
		if err != nil || !created {
			t.Fatalf("replay: %v", err)
		}
		if n, err := snd.SendDue(ctx); err != nil || n != 1 {
			t.Fatalf("SendDue after replay: %d, %v", n, err)
		}
		got := rcv.requests()
		last := got[len(got)-1]
		in, _ := st.Installation(ctx)
		if last.verified != nil || last.id != ds[0].MessageID(in.ID) || last.id != r.MessageID(in.ID) {
			t.Errorf("replayed request id %s (%v); want %s", last.id, last.verified, ds[0].MessageID(in.ID))
		}
		if d, _ := st.WebhookDelivery(ctx, r.ID); d.State() != "delivered" {
			t.Errorf("replay row %+v, want delivered", d)
		}
	})
}

// TestSign_KnownVector checks Sign against a vector computed by hand
// with the scheme's definition (the independent verify above).
func TestSign_KnownVector(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	body := []byte(`{"type":"job.done"}`)
	sig, err := webhook.Sign(secret, "msg_1", 1674087231, body)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(secret, received{id: "msg_1", ts: "1674087231", sig: sig, body: body}); err == nil || !strings.Contains(err.Error(), "tolerance") {
		t.Fatalf("an old timestamp must be refused by the receiver's tolerance: %v", err)
	}
	now := strconv.FormatInt(time.Now().Unix(), 10)
	ts, _ := strconv.ParseInt(now, 10, 64)
	sig, _ = webhook.Sign(secret, "msg_1", ts, body)
	if err := verify(secret, received{id: "msg_1", ts: now, sig: sig, body: body}); err != nil {
		t.Errorf("signature %s: %v", sig, err)
	}
	if err := verify(secret, received{id: "msg_2", ts: now, sig: sig, body: body}); err == nil {
		t.Errorf("a signature verified under another webhook-id")
	}
	for _, bad := range []string{"", "whsec_", "whsec_!!!", "sk_" + secret[6:], "whsec_" + base64.StdEncoding.EncodeToString([]byte("short"))} {
		if _, err := webhook.Sign(bad, "msg_1", ts, body); err == nil {
			t.Errorf("Sign with secret %q: no error", bad)
		}
	}
}
