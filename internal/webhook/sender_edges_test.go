package webhook_test

// The sender at its edges: deliveries checked with the official Standard
// Webhooks library, redirects, Retry-After and 410, a job pruned before
// its delivery, a receiver that hangs or is dead, two senders on one
// database.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/webhook"
)

// endJobOf accepts one job of account under key, claims it and ends it:
// done when errText is "", failed (rejected) with errText otherwise.
// It returns the job's id.
func endJobOf(t *testing.T, st *store.Store, account, key, errText string) int64 {
	t.Helper()
	ctx := t.Context()
	payload, _ := json.Marshal(inkwell.Request{Prompt: "p", Account: account, MaxWords: 10})
	if _, _, err := st.Accept(ctx, store.AcceptParams{Account: account, IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload}); err != nil {
		t.Fatal(err)
	}
	c := storetest.ClaimAs(t, st, "local")
	var err error
	if errText == "" {
		err = st.CompleteIfRunning(ctx, store.CompleteParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Text: "t", Account: account, AmountMicros: 1, ProviderRequestID: "r"})
	} else {
		err = st.FailIfRunning(ctx, store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: errText, Class: inkwell.ClassRejected})
	}
	if err != nil {
		t.Fatal(err)
	}
	return c.Job.ID
}

// swReceiver verifies every request with the official Standard Webhooks
// Go library, under whatever secret it holds at the time.
type swReceiver struct {
	srv         *httptest.Server
	mu          sync.Mutex
	secret, old string // the secret now, and the one before the last setSecret
	got         []swGot
}

type swGot struct {
	id     string
	body   []byte
	err    error // Verify with the current secret
	oldErr error // Verify with the secret before the last rotation ("" none)
}

func newSWReceiver(t *testing.T) *swReceiver {
	r := &swReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		g := swGot{id: req.Header.Get(webhook.HeaderID), body: body}
		wh, err := standardwebhooks.NewWebhook(r.secret)
		if err != nil {
			g.err = err
		} else {
			g.err = wh.Verify(body, req.Header)
		}
		if r.old != "" && r.old != r.secret {
			if wo, err := standardwebhooks.NewWebhook(r.old); err == nil {
				g.oldErr = wo.Verify(body, req.Header)
			}
		}
		r.got = append(r.got, g)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *swReceiver) setSecret(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.old, r.secret = r.secret, s
}

func (r *swReceiver) requests() []swGot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]swGot(nil), r.got...)
}

// TestSender_StandardLibraryVerifiesEveryDelivery: every delivery verifies
// with the official Standard Webhooks Go library (not only with the
// spec-written verifier of sender_test.go): bodies with non-ASCII keys and
// errors (including U+2028, HTML characters, an emoji) and a
// 200 KB error; after --rotate-secret the next deliveries verify with the
// new secret only.
func TestSender_StandardLibraryVerifiesEveryDelivery(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		rcv := newSWReceiver(t)
		a, err := st.CreateAccount(ctx, store.Account{Name: "acme", WebhookURL: rcv.srv.URL + "/hooks?x=1"})
		if err != nil {
			t.Fatal(err)
		}
		rcv.setSecret(a.WebhookSecret)
		big := strings.Repeat("ошибка 模型拒绝 ", 200_000/24)
		endJobOf(t, st, "acme", "заказ-№7-😀", "")
		endJobOf(t, st, "acme", "k<&>\u2028\u2029", "провайдер сказал «нет» <script>&amp;\u2028 end")
		endJobOf(t, st, "acme", "big", big)
		snd := webhook.New(st, webhook.Config{Concurrency: 8, Logger: storetest.TestLogger(t)})
		if n, err := snd.SendDue(ctx); err != nil || n != 3 {
			t.Fatalf("SendDue: %d, %v", n, err)
		}
		_, newSecret, err := st.SetWebhook(ctx, store.SetWebhookParams{Account: "acme", RotateSecret: true})
		if err != nil || newSecret == "" || newSecret == a.WebhookSecret {
			t.Fatalf("rotate: %q, %v", newSecret, err)
		}
		rcv.setSecret(newSecret)
		endJobOf(t, st, "acme", "after-rotation", "")
		if n, err := snd.SendDue(ctx); err != nil || n != 1 {
			t.Fatalf("SendDue after rotation: %d, %v", n, err)
		}
		got := rcv.requests()
		if len(got) != 4 {
			t.Fatalf("receiver got %d requests, want 4", len(got))
		}
		for i, g := range got {
			if g.err != nil {
				t.Errorf("request %d (%s, %d bytes): the official library refuses it: %v", i, g.id, len(g.body), g.err)
			}
			var p webhook.Payload
			if err := json.Unmarshal(g.body, &p); err != nil {
				t.Errorf("request %d: body is not JSON: %v", i, err)
			}
		}
		if got[3].oldErr == nil {
			t.Errorf("a delivery after rotation still verifies with the old secret")
		}
		for _, d := range deliveries(t, st) {
			if d.State() != "delivered" {
				t.Errorf("delivery %d: %s (%s)", d.ID, d.State(), d.LastError)
			}
		}
	})
}

// TestSender_RedirectsNeverFollowed: a receiver answering 301, 302, 303,
// 307 or 308 towards an internal address (a second loopback server
// standing in for 169.254.169.254) fails the attempt; the internal address
// is never requested, and the delivery's last error names the redirect.
func TestSender_RedirectsNeverFollowed(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		var internalHits atomic.Int32
		internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			internalHits.Add(1)
			w.WriteHeader(http.StatusOK)
		}))
		t.Cleanup(internal.Close)
		var code atomic.Int32
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			http.Redirect(w, r, internal.URL+"/latest/meta-data/iam/security-credentials/", int(code.Load()))
		}))
		t.Cleanup(rcv.Close)
		if _, err := st.CreateAccount(ctx, store.Account{Name: "acme", WebhookURL: rcv.URL}); err != nil {
			t.Fatal(err)
		}
		endJobOf(t, st, "acme", "k", "")
		snd := webhook.New(st, webhook.Config{RetryBase: time.Millisecond, RetryCap: 2 * time.Millisecond, Logger: storetest.TestLogger(t)})
		for _, c := range []int{301, 302, 303, 307, 308} {
			code.Store(int32(c))
			storetest.WaitFor(t, 10*time.Second, "a send", func() bool {
				n, err := snd.SendDue(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return n == 1
			})
			d := deliveries(t, st)[0]
			if d.State() != "pending" || d.LastStatus != c || !strings.Contains(d.LastError, "not followed") {
				t.Errorf("after a %d: %+v", c, d)
			}
		}
		if n := internalHits.Load(); n != 0 {
			t.Errorf("the redirect target was requested %d times", n)
		}
	})
}

// TestSender_RetryAfterAnd410: a 429 with Retry-After (seconds, and an HTTP
// date) sets the next attempt that far out (up to the cap); 410 Gone is a
// failure like any other status: retried with the ordinary back-off.
func TestSender_RetryAfterAnd410(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		var mode atomic.Value
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			switch mode.Load().(string) {
			case "secs":
				w.Header().Set("Retry-After", "120")
				w.WriteHeader(http.StatusTooManyRequests)
			case "date":
				w.Header().Set("Retry-After", time.Now().Add(10*time.Minute).UTC().Format(http.TimeFormat))
				w.WriteHeader(http.StatusServiceUnavailable)
			case "huge":
				w.Header().Set("Retry-After", "99999999999")
				w.WriteHeader(http.StatusTooManyRequests)
			case "gone":
				w.WriteHeader(http.StatusGone)
			}
		}))
		t.Cleanup(rcv.Close)
		if _, err := st.CreateAccount(ctx, store.Account{Name: "acme", WebhookURL: rcv.URL}); err != nil {
			t.Fatal(err)
		}
		endJobOf(t, st, "acme", "k", "")
		snd := webhook.New(st, webhook.Config{RetryBase: time.Second, RetryCap: time.Hour, Logger: storetest.TestLogger(t)})
		id := deliveries(t, st)[0].ID
		for _, c := range []struct {
			mode     string
			status   int
			min, max time.Duration
		}{
			{"secs", 429, 115 * time.Second, 125 * time.Second},
			{"date", 503, 9 * time.Minute, 11 * time.Minute},
			{"huge", 429, 59 * time.Minute, 61 * time.Minute},
			{"gone", 410, 3 * time.Second, 9 * time.Second}, // 4th failure: RetryBase·2^3, upper half random
		} {
			mode.Store(c.mode)
			// make it due now (an operator replay of a pending delivery)
			if _, _, err := st.ReplayWebhook(ctx, id); err != nil {
				t.Fatal(err)
			}
			if n, err := snd.SendDue(ctx); err != nil || n != 1 {
				t.Fatalf("%s: SendDue %d, %v", c.mode, n, err)
			}
			d, _ := st.WebhookDelivery(ctx, id)
			wait := time.Until(d.NextAttemptAt)
			if d.State() != "pending" || d.LastStatus != c.status || wait < c.min || wait > c.max {
				t.Errorf("%s: state %s status %d, next attempt in %s; want pending, %d, in [%s, %s]", c.mode, d.State(), d.LastStatus, wait, c.status, c.min, c.max)
			}
		}
	})
}

// TestSender_PrunedJobStillDelivered: a delivery whose job was pruned
// before it was sent is still sent, with the same body as before the
// prune (key, account, error), and marked delivered.
func TestSender_PrunedJobStillDelivered(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		rcv := newReceiver(t)
		a, err := st.CreateAccount(ctx, store.Account{Name: "acme", WebhookURL: rcv.srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		rcv.secret = a.WebhookSecret
		endJobOf(t, st, "acme", "pruned-key", "")
		endJobOf(t, st, "acme", "pruned-fail", "provider said no")
		before := deliveries(t, st)
		bodies := map[int64]string{}
		for _, d := range before {
			b, _ := webhook.Body(d)
			bodies[d.ID] = string(b)
		}
		rep, err := st.Prune(ctx, time.Now().Add(time.Hour), store.PruneOptions{NoVacuum: true})
		if err != nil || rep.Pruned != 2 {
			t.Fatalf("prune: %+v, %v", rep, err)
		}
		snd := webhook.New(st, webhook.Config{Logger: storetest.TestLogger(t)})
		if n, err := snd.SendDue(ctx); err != nil || n != 2 {
			t.Fatalf("SendDue after prune: %d, %v", n, err)
		}
		in, _ := st.Installation(ctx)
		got := map[string]string{}
		for _, r := range rcv.requests() {
			if r.verified != nil {
				t.Errorf("request %s: %v", r.id, r.verified)
			}
			got[r.id] = string(r.body)
		}
		for _, d := range deliveries(t, st) {
			if d.State() != "delivered" {
				t.Errorf("delivery %d after prune: %s %s", d.ID, d.State(), d.LastError)
			}
			if got[d.MessageID(in.ID)] != bodies[d.ID] {
				t.Errorf("delivery %d: body after prune\n%s\nbefore\n%s", d.ID, got[d.MessageID(in.ID)], bodies[d.ID])
			}
		}
	})
}

// TestSender_HangingReceiverHoldsOnlyItsSlot: one account's receiver
// hangs (no answer until the time-out). Another account's job ends while a
// send to the hanging receiver is in flight, and the lane wakes the sender
// (as serve's OnEnded does). The sender has Concurrency 4, so three slots
// are free, and the healthy account's delivery goes out on one of them at
// once (docs/webhooks.md: it "sends a job's delivery as soon as its lane
// has stored the job's end"). Run used to claim in batches and wait for a
// batch's every send, so it waited for the hanging send's whole time-out.
func TestSender_HangingReceiverHoldsOnlyItsSlot(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		dead, live := deadAndLive(t, st)
		const timeout = 4 * time.Second
		snd := webhook.New(st, webhook.Config{Timeout: timeout, Concurrency: 4, Poll: 100 * time.Millisecond, Logger: storetest.TestLogger(t)})
		done := make(chan struct{})
		go func() { defer close(done); _ = snd.Run(ctx) }()
		defer func() { cancel(); <-done }()

		endJobOf(t, st, "dead", "d1", "")
		storetest.WaitFor(t, 10*time.Second, "the hanging receiver to get its request", func() bool { return len(dead.requests()) == 1 })
		start := time.Now()
		endJobOf(t, st, "live", "l1", "")
		snd.Wake()
		storetest.WaitFor(t, 3*timeout, "the live account's delivery", func() bool { return len(live.requests()) == 1 })
		if took := time.Since(start); took > timeout/2 {
			t.Errorf("the healthy account's delivery reached its receiver %s after its job ended, with 3 of 4 send slots free: "+
				"it waited for another account's hanging receiver (time-out %s)", took.Round(10*time.Millisecond), timeout)
		}
	})
}

// deadAndLive makes two accounts: "dead", whose receiver hangs until the
// send's time-out, and "live", whose receiver answers 204 and verifies.
func deadAndLive(t *testing.T, st *store.Store) (dead, live *receiver) {
	t.Helper()
	dead = newReceiver(t)
	dead.setMode("hang")
	live = newReceiver(t)
	if _, err := st.CreateAccount(t.Context(), store.Account{Name: "dead", WebhookURL: dead.srv.URL}); err != nil {
		t.Fatal(err)
	}
	la, err := st.CreateAccount(t.Context(), store.Account{Name: "live", WebhookURL: live.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	live.secret = la.WebhookSecret
	return dead, live
}

// TestSender_TwoServesNeverPostOneDeliveryAtOnce: two senders on two store
// handles of one database (two serves; on PostgreSQL two processes claim
// with SKIP LOCKED), each with Concurrency 4 and running its Run loop,
// against a slow receiver (150 ms an answer) and 40 deliveries of three
// accounts: every delivery is delivered, and no webhook-id is ever posted
// twice, let alone at once.
func TestSender_TwoServesNeverPostOneDeliveryAtOnce(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		st1 := storetest.MustOpen(t, b.DSN, store.Options{})
		st2 := storetest.MustOpen(t, b.DSN, store.Options{NoMigrate: true})
		ctx, cancel := context.WithCancel(t.Context())
		var mu sync.Mutex
		posts := map[string]int{}
		active := map[string]int{}
		var overlaps []string
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			id := r.Header.Get(webhook.HeaderID)
			mu.Lock()
			posts[id]++
			active[id]++
			if active[id] > 1 {
				overlaps = append(overlaps, id)
			}
			mu.Unlock()
			time.Sleep(150 * time.Millisecond)
			mu.Lock()
			active[id]--
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(rcv.Close)
		for _, a := range []string{"a1", "a2", "a3"} {
			if _, err := st1.CreateAccount(ctx, store.Account{Name: a, WebhookURL: rcv.URL + "/" + a}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 40 {
			endJobOf(t, st1, []string{"a1", "a2", "a3"}[i%3], fmt.Sprintf("k%d", i), "")
		}
		var wg sync.WaitGroup
		for _, st := range []*store.Store{st1, st2} {
			snd := webhook.New(st, webhook.Config{Timeout: 5 * time.Second, Poll: 20 * time.Millisecond, Logger: storetest.TestLogger(t)})
			wg.Add(1)
			go func() { defer wg.Done(); _ = snd.Run(ctx) }()
		}
		storetest.WaitFor(t, 60*time.Second, "all 40 delivered", func() bool {
			ds, err := st1.WebhookDeliveries(t.Context(), store.WebhookFilter{Pending: true})
			if err != nil {
				t.Fatal(err)
			}
			return len(ds) == 0
		})
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(posts) != 40 {
			t.Errorf("%d webhook-ids posted, want 40", len(posts))
		}
		for id, n := range posts {
			if n != 1 {
				t.Errorf("webhook-id %s posted %d times", id, n)
			}
		}
		if len(overlaps) > 0 {
			t.Errorf("posted twice at once: %v", overlaps)
		}
	})
}

// TestSender_DeadReceiversBacklogDoesNotHoldTheOthers: twenty deliveries
// of an account whose receiver hangs until the time-out are due, older
// than one of a healthy account's, and the sender has two slots. Claimed
// oldest first, the backlog used to take both slots one time-out after
// another (ten rounds) before the healthy one's turn. Now the first failed
// send holds the dead account's other due deliveries until its next try:
// the healthy delivery goes out while most of the backlog has never been
// sent (an order, not a time).
func TestSender_DeadReceiversBacklogDoesNotHoldTheOthers(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		dead, live := deadAndLive(t, st)
		const backlog = 20
		for i := range backlog {
			endJobOf(t, st, "dead", fmt.Sprintf("d%d", i), "")
		}
		endJobOf(t, st, "live", "l1", "")
		snd := webhook.New(st, webhook.Config{Timeout: time.Second, Concurrency: 2, Poll: 50 * time.Millisecond, Logger: storetest.TestLogger(t)})
		done := make(chan struct{})
		go func() { defer close(done); _ = snd.Run(ctx) }()
		defer func() { cancel(); <-done }()

		storetest.WaitFor(t, backlog*time.Second, "the live account's delivery", func() bool { return len(live.requests()) == 1 })
		if n := len(dead.requests()); n > backlog/2 {
			t.Errorf("the dead receiver had %d of its %d deliveries posted (each a whole time-out of a slot) before the healthy account's one went out: its backlog held the slots", n, backlog)
		}
		var held int
		for _, d := range deliveries(t, st) {
			if d.Account == "dead" && d.Attempts == 0 && d.NextAttemptAt.After(time.Now()) {
				held++
			}
		}
		if held < backlog/2 {
			t.Errorf("%d of the dead account's deliveries wait, never sent, for the failed send's next try; want most of its %d", held, backlog)
		}
	})
}
