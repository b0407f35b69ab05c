package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Adversarial tests of POST /v1/chat/completions, long polls and serve's
// graceful stop, against real `inkwell serve` children and the provider
// simulator.

// chatAnswer is one HTTP answer and when it came.
type chatAnswer struct {
	status int
	header http.Header
	body   string
	at     time.Time
	err    error
}

// timedPost sends one chat completion (key "" sends no header).
func timedPost(ctx context.Context, url, key, body string) chatAnswer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return chatAnswer{err: err, at: time.Now()}
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return chatAnswer{err: err, at: time.Now()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return chatAnswer{status: resp.StatusCode, header: resp.Header, body: string(b), at: time.Now(), err: err}
}

// timedGet sends one GET.
func timedGet(ctx context.Context, url string) chatAnswer {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return chatAnswer{err: err, at: time.Now()}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return chatAnswer{err: err, at: time.Now()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return chatAnswer{status: resp.StatusCode, header: resp.Header, body: string(b), at: time.Now(), err: err}
}

// countingProxy forwards to url and counts the requests that reached it:
// a call is in flight once the provider has it, not when its job is
// running (a stop between the claim and the send sends nothing, and the
// job goes back to queued, which is not what these tests stop).
func countingProxy(t *testing.T, url string) (string, *atomic.Int64) {
	t.Helper()
	target, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

func chatBodyN(i int) string {
	return fmt.Sprintf(`{"model":"writer","messages":[{"role":"user","content":"a haiku about ink %d"}],"max_tokens":20}`, i)
}

// TestServe_SIGTERMWithChatWaitsAndLongPoll: SIGTERM while two
// chat completions are in flight on a slow provider, a third waits queued
// behind them and a long poll waits on that queued job.
func TestServe_SIGTERMWithChatWaitsAndLongPoll(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{Latency: 4 * time.Second})
	simURL, calls := countingProxy(t, sim.URL)
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--config", chatConfig(t, simURL), "--concurrency", "2", "--grace", "20s", "--sync-wait", "2m")
	st := storetest.MustOpen(t, db, store.Options{})

	ctx := t.Context()
	answers := make([]chatAnswer, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { answers[i] = timedPost(ctx, srv.URL, fmt.Sprintf("shut-%d", i), chatBodyN(i)) })
		if i < 2 {
			storetest.WaitFor(t, waitLimit, "calls at the provider", func() bool { return calls.Load() == int64(i+1) })
		}
	}
	storetest.WaitFor(t, waitLimit, "third job queued", func() bool {
		return countWhere(t, st, `SELECT COUNT(*) FROM jobs WHERE status = 'queued'`) == 1
	})
	var queued int64
	if err := st.DB().QueryRow(`SELECT id FROM jobs WHERE status = 'queued'`).Scan(&queued); err != nil {
		t.Fatal(err)
	}
	var poll chatAnswer
	wg.Go(func() { poll = timedGet(ctx, fmt.Sprintf("%s/v1/jobs/%d?wait=60s", srv.URL, queued)) })
	time.Sleep(300 * time.Millisecond) // the long poll is waiting

	sigAt := time.Now()
	exitErr := srv.Signal(t, syscall.SIGTERM)
	wg.Wait()
	if exitErr != nil {
		t.Errorf("serve after SIGTERM: %v, want exit 0", exitErr)
	}
	// The two calls in flight finish within the grace: their waiting
	// clients get their completions, stored and billed once.
	led := sim.MustLedger(t)
	for i, a := range answers[:2] {
		var c struct {
			ID      string `json:"id"`
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if a.err != nil || a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &c) != nil || len(c.Choices) != 1 || c.Choices[0].Message.Content == "" {
			t.Errorf("chat %d in flight at SIGTERM: %d %s (err %v); want 200 with its completion", i, a.status, a.body, a.err)
			continue
		}
		if e, ok := led.Request(c.ID); !ok || e.Bills != 1 {
			t.Errorf("chat %d: ledger for %s: %+v (found %v), want billed once", i, c.ID, e, ok)
		}
	}
	if n := countWhere(t, st, `SELECT COUNT(*) FROM jobs WHERE status = 'done'`); n != 2 {
		t.Errorf("%d jobs done after the stop, want the 2 in flight", n)
	}
	if n := countWhere(t, st, `SELECT COUNT(*) FROM charges`); n != 2 {
		t.Errorf("%d charges after the stop, want 2", n)
	}
	// The queued job's waiting client: its wait (2m) did not run out, the
	// server is stopping. The answer must say so, not that --sync-wait ran
	// out, and tell the client when to come back.
	q := answers[2]
	t.Logf("queued chat at SIGTERM: %d after %v, Retry-After %q: %s", q.status, q.at.Sub(sigAt), q.header.Get("Retry-After"), q.body)
	if q.err != nil || strings.Contains(q.body, "after the server's --sync-wait") || q.header.Get("Retry-After") == "" {
		t.Errorf("queued chat at SIGTERM after %v: %d %s (Retry-After %q); want an answer that says the server is stopping (not that the 2m --sync-wait ran out, %v after it began), with Retry-After",
			q.at.Sub(sigAt), q.status, q.body, q.header.Get("Retry-After"), time.Since(sigAt))
	}
	// docs/client.md: "the server stops (SIGTERM) | every waiting request
	// is answered at once with the job as it is". The polled job is
	// queued and a stopping lane claims nothing: nothing can change it.
	if poll.err != nil || poll.status != http.StatusOK || !strings.Contains(poll.body, `"status": "queued"`) {
		t.Errorf("long poll: %d %.300s (err %v); want 200 with the queued job", poll.status, poll.body, poll.err)
	}
	// At once: before the calls in flight end (an order, not a time).
	for i, a := range answers[:2] {
		if !poll.at.Before(a.at) || !q.at.Before(a.at) {
			t.Errorf("long poll answered %v and queued chat %v after SIGTERM, the call in flight %d ended %v after it: a stopping server must answer waiters on queued jobs at once, not after its calls",
				poll.at.Sub(sigAt), q.at.Sub(sigAt), i, a.at.Sub(sigAt))
		}
	}
}

// TestChat_ConcurrentSameKey: twenty concurrent chat completions
// with one Idempotency-Key and one body are one job, one charge, one
// provider bill, and every caller gets the same completion; the same key
// with another body is 422 and writes nothing.
func TestChat_ConcurrentSameKey(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) { concurrentSameKey(t, b.DSN) })
}

func concurrentSameKey(t *testing.T, db string) {
	sim := simtest.MustStart(t, providersim.Config{Latency: 500 * time.Millisecond})
	srv := startServe(t, db, "--config", chatConfig(t, sim.URL))
	st := storetest.MustOpen(t, db, store.Options{})

	const n = 20
	answers := make([]chatAnswer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i] = timedPost(t.Context(), srv.URL, "same-key", chatBodyN(0))
		})
	}
	close(start)
	wg.Wait()
	for i, a := range answers {
		if a.err != nil || a.status != http.StatusOK || a.body != answers[0].body || a.header.Get("Inkwell-Job-Id") != answers[0].header.Get("Inkwell-Job-Id") {
			t.Errorf("caller %d: %d job %q %s (err %v); want 200, caller 0's job, the same completion as caller 0 (%s)", i, a.status, a.header.Get("Inkwell-Job-Id"), a.body, a.err, answers[0].body)
		}
	}
	if j, c, b := countWhere(t, st, `SELECT COUNT(*) FROM jobs`), countWhere(t, st, `SELECT COUNT(*) FROM charges`), sim.MustLedger(t).TotalBills; j != 1 || c != 1 || b != 1 {
		t.Errorf("%d jobs, %d charges, %d provider bills after %d concurrent sends of one key; want 1 each", j, c, b, n)
	}
	// The same key with another body: 422, nothing written; concurrently too.
	other := make([]chatAnswer, 5)
	for i := range other {
		wg.Go(func() { other[i] = timedPost(t.Context(), srv.URL, "same-key", chatBodyN(1)) })
	}
	wg.Wait()
	for i, a := range other {
		if a.status != http.StatusUnprocessableEntity {
			t.Errorf("same key, other body %d: %d %s; want 422", i, a.status, a.body)
		}
	}
	if j, c := countWhere(t, st, `SELECT COUNT(*) FROM jobs`), countWhere(t, st, `SELECT COUNT(*) FROM charges`); j != 1 || c != 1 {
		t.Errorf("%d jobs, %d charges after the refused sends; want 1, 1", j, c)
	}
	// Without a key each call is a job of its own (docs/api.md), and says its key.
	a := timedPost(t.Context(), srv.URL, "", chatBodyN(0))
	if a.status != http.StatusOK || !strings.HasPrefix(a.header.Get("Idempotency-Key"), "chatcmpl-") || a.header.Get("Inkwell-Job-Id") == answers[0].header.Get("Inkwell-Job-Id") {
		t.Errorf("keyless: %d key %q job %q; want 200, a generated key, a new job", a.status, a.header.Get("Idempotency-Key"), a.header.Get("Inkwell-Job-Id"))
	}
}

// TestChat_ClientGoneStillRunsOnce: a client that hangs up while
// waiting leaves its job to run and be charged once; a later re-send with
// the key gets the stored completion with no second provider call, and the
// hung-up wait is freed (inkwell_long_polls_waiting back to 0).
func TestChat_ClientGoneStillRunsOnce(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{Latency: 1500 * time.Millisecond})
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--config", chatConfig(t, sim.URL))
	st := storetest.MustOpen(t, db, store.Options{})

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	a := timedPost(ctx, srv.URL, "gone-1", chatBodyN(7))
	cancel()
	if a.err == nil {
		t.Fatalf("the hung-up request was answered: %d %s", a.status, a.body)
	}
	storetest.WaitFor(t, waitLimit, "no waiter left", func() bool {
		m := timedGet(t.Context(), srv.URL+"/metrics")
		return strings.Contains(m.body, "\ninkwell_long_polls_waiting 0\n")
	})
	storetest.WaitFor(t, waitLimit, "the job done", func() bool {
		return countWhere(t, st, `SELECT COUNT(*) FROM jobs WHERE status = 'done'`) == 1
	})
	again := timedPost(t.Context(), srv.URL, "gone-1", chatBodyN(7))
	var c struct{ ID string }
	if again.status != http.StatusOK || json.Unmarshal([]byte(again.body), &c) != nil || c.ID == "" {
		t.Fatalf("re-send: %d %s; want 200 with the stored completion", again.status, again.body)
	}
	e, ok := sim.MustLedger(t).Request(c.ID)
	if !ok || e.Calls != 1 || e.Bills != 1 {
		t.Errorf("ledger for %s: %+v (found %v); want one call, billed once", c.ID, e, ok)
	}
	if j, ch := countWhere(t, st, `SELECT COUNT(*) FROM jobs`), countWhere(t, st, `SELECT COUNT(*) FROM charges`); j != 1 || ch != 1 {
		t.Errorf("%d jobs, %d charges; want 1, 1", j, ch)
	}
}

// sdkRetrying is the official SDK as it ships: automatic retries on
// (2, the default), fast back-off aside.
func sdkRetrying(url string) openai.Client {
	return openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("unused-no-token-exists"))
}

// TestOpenAISDK_SyncWaitRunsOutWithKey: a job longer than
// --sync-wait: the SDK's own retries (on 504) re-send the caller's
// Idempotency-Key, so they wait on the one job: one job, one bill.
func TestOpenAISDK_SyncWaitRunsOutWithKey(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{Latency: 5 * time.Second})
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--config", chatConfig(t, sim.URL), "--sync-wait", "1s")
	st := storetest.MustOpen(t, db, store.Options{})
	params := openai.ChatCompletionNewParams{Model: "writer", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("slow one")}}
	client := sdkRetrying(srv.URL)
	_, err := client.Chat.Completions.New(t.Context(), params, option.WithHeader("Idempotency-Key", "sdk-slow-1"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusGatewayTimeout || !strings.Contains(apiErr.Message, "still_") && !strings.Contains(apiErr.Message, "still ") {
		t.Errorf("SDK call longer than --sync-wait: %v; want a 504 saying the job is still running", err)
	}
	if n := countWhere(t, st, `SELECT COUNT(*) FROM jobs`); n != 1 {
		t.Errorf("%d jobs after one SDK call with a key and its automatic retries; want 1", n)
	}
	storetest.WaitFor(t, waitLimit, "the job done", func() bool {
		return countWhere(t, st, `SELECT COUNT(*) FROM jobs WHERE status = 'done'`) == 1
	})
	if b := sim.MustLedger(t).TotalBills; b != 1 {
		t.Errorf("%d provider bills, want 1", b)
	}
}

// TestOpenAISDK_SyncWaitRunsOutWithoutKey: the same call sent as
// the SDK sends it by default, with no Idempotency-Key. Inkwell makes a key
// for it and answers 504 when --sync-wait runs out; the SDK retries 504 on
// its own (max_retries 2 by default), and each retry was a new job, a new
// provider bill and a new charge, for one call of the user's. Inkwell knows
// the key was its own and the job is still running: it tells the SDK not
// to retry (x-should-retry: false, which the official SDKs obey).
func TestOpenAISDK_SyncWaitRunsOutWithoutKey(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{Latency: 3 * time.Second})
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--config", chatConfig(t, sim.URL), "--sync-wait", "1s")
	st := storetest.MustOpen(t, db, store.Options{})
	params := openai.ChatCompletionNewParams{Model: "writer", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("slow one")}}
	client := sdkRetrying(srv.URL)
	_, err := client.Chat.Completions.New(t.Context(), params)
	t.Logf("SDK call without a key: %v", err)
	storetest.WaitFor(t, waitLimit, "every job ended", func() bool {
		return countWhere(t, st, `SELECT COUNT(*) FROM jobs WHERE status NOT IN ('done', 'failed')`) == 0
	})
	j, c, b := countWhere(t, st, `SELECT COUNT(*) FROM jobs`), countWhere(t, st, `SELECT COUNT(*) FROM charges`), sim.MustLedger(t).TotalBills
	if j != 1 || c != 1 || b != 1 {
		t.Errorf("one SDK call (no key, default retries) longer than --sync-wait: %d jobs, %d charges, %d provider bills; want 1 each", j, c, b)
	}
}

// TestServe_TwoThousandWaiters: 2,000 long polls and 200 chat
// completions wait on one running job; the gauge counts them, other
// requests are still answered at once, serve's descriptors stay bounded,
// and clients that leave free their waiters.
func TestServe_TwoThousandWaiters(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{Latency: 40 * time.Second})
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--config", chatConfig(t, sim.URL), "--sync-wait", "2m")
	st := storetest.MustOpen(t, db, store.Options{})

	body := chatBodyN(3)
	job := submit(t, srv.URL, "many-waiters", body).Job
	storetest.WaitFor(t, waitLimit, "job running", func() bool {
		return countWhere(t, st, `SELECT COUNT(*) FROM jobs WHERE status = 'running'`) == 1
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: 3000}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	const polls, chats = 2000, 200
	var wg sync.WaitGroup
	results := make(chan int, polls+chats)
	for range polls {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/jobs/%d?wait=60s", srv.URL, job.ID), nil)
			resp, err := client.Do(req)
			if err != nil {
				results <- -1
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			results <- resp.StatusCode
		})
	}
	for range chats {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Idempotency-Key", "many-waiters")
			resp, err := client.Do(req)
			if err != nil {
				results <- -1
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Logf("chat waiter answered early: %d %s", resp.StatusCode, b)
			}
			results <- resp.StatusCode
		})
	}
	storetest.WaitFor(t, waitLimit, "every request waiting", func() bool {
		m := timedGet(t.Context(), srv.URL+"/metrics")
		return strings.Contains(m.body, fmt.Sprintf("\ninkwell_long_polls_waiting %d\n", polls+chats))
	})
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", srv.Pid()))
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", srv.Pid()))
	t.Logf("serve with %d waiting: %d fds; %s", polls+chats, len(fds), rssLine(string(status)))
	// Other requests are answered at once meanwhile.
	t0 := time.Now()
	other := submit(t, srv.URL, "beside-the-waiters", chatBodyN(4)).Job
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("a submit beside %d waiters took %v", polls+chats, d)
	}
	if other.ID == job.ID {
		t.Errorf("the other submit got the waited job %d", job.ID)
	}
	if n := countWhere(t, st, `SELECT COUNT(*) FROM jobs`); n != 2 {
		t.Errorf("%d jobs after %d chat waits with the job's key; want 2 (the job and the other one)", n, chats)
	}
	select {
	case r := <-results:
		t.Errorf("a waiter was answered (%d) while its job ran", r)
	default:
	}
	// Every client leaves: every waiter is freed.
	cancel()
	wg.Wait()
	storetest.WaitFor(t, waitLimit, "no waiter left", func() bool {
		m := timedGet(t.Context(), srv.URL+"/metrics")
		return strings.Contains(m.body, "\ninkwell_long_polls_waiting 0\n")
	})
}

func rssLine(status string) string {
	for _, l := range strings.Split(status, "\n") {
		if strings.HasPrefix(l, "VmHWM") {
			return strings.Join(strings.Fields(l), " ")
		}
	}
	return ""
}

// TestServe_ReadyzDuringGrace: after SIGTERM, while a call in
// flight finishes within --grace, the lane claims nothing more; /readyz
// should stop answering 200 then, so a load balancer stops sending work
// this server will not run.
func TestServe_ReadyzDuringGrace(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{Latency: 3 * time.Second})
	simURL, calls := countingProxy(t, sim.URL)
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--config", chatConfig(t, simURL), "--grace", "20s")
	var wg sync.WaitGroup
	var inFlight, during chatAnswer
	wg.Go(func() { inFlight = timedPost(t.Context(), srv.URL, "grace-0", chatBodyN(0)) })
	// At the provider, not only claimed: a claimed job whose call was not
	// sent yet is given back at the stop (on a loaded machine the claim
	// and the send can be apart by more than the test took to signal).
	storetest.WaitFor(t, waitLimit, "call at the provider", func() bool { return calls.Load() == 1 })
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	storetest.WaitFor(t, waitLimit, "the stop logged", func() bool { return strings.Contains(srv.Log(), "shutdown requested") })
	ready := timedGet(t.Context(), srv.URL+"/readyz")
	sentAt := time.Now()
	wg.Go(func() { during = timedPost(t.Context(), srv.URL, "grace-1", chatBodyN(1)) })
	wg.Wait()
	<-srv.exited
	t.Logf("during the grace: /readyz %d %s; a new chat completion: %d after %v: %s", ready.status, ready.body, during.status, during.at.Sub(sentAt), during.body)
	if inFlight.status != http.StatusOK {
		t.Errorf("the call in flight at SIGTERM: %d %s; want 200", inFlight.status, inFlight.body)
	}
	if ready.err != nil || ready.status == http.StatusOK {
		t.Errorf("/readyz during the grace period: %d %s; want 503 (stopping: no new claims)", ready.status, ready.body)
	}
}

// TestServe_SecondSignalIsLogged: a second SIGINT during a
// graceful stop ends the process at once (main.go), leaving the call in
// flight to restart recovery. The log must say so: before, the process died
// by the signal's default action and the log's last line is "shutdown
// requested … waiting for the running call".
func TestServe_SecondSignalIsLogged(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{Latency: 3 * time.Second})
	simURL, calls := countingProxy(t, sim.URL)
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--config", chatConfig(t, simURL), "--grace", "20s")
	st := storetest.MustOpen(t, db, store.Options{})
	waiting := make(chan chatAnswer, 1)
	go func() { waiting <- timedPost(t.Context(), srv.URL, "second-signal", chatBodyN(0)) }()
	storetest.WaitFor(t, waitLimit, "call at the provider", func() bool { return calls.Load() == 1 })
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	storetest.WaitFor(t, waitLimit, "the stop logged", func() bool { return strings.Contains(srv.Log(), "shutdown requested") })
	before := len(srv.Log())
	exit := srv.Signal(t, syscall.SIGINT)
	if a := <-waiting; a.err == nil {
		t.Errorf("the waiting chat client got %d %s from a process that was killed", a.status, a.body)
	}
	if n := countWhere(t, st, `SELECT COUNT(*) FROM jobs WHERE status = 'running'`); n != 1 {
		t.Errorf("%d jobs running after the second signal; want the 1 in flight, left to restart recovery", n)
	}
	if after := srv.Log()[before:]; !strings.Contains(after, "second signal") {
		t.Errorf("second signal during the graceful stop: serve exited (%v) and logged nothing; want a line saying it stopped at once with 1 call in flight left to restart recovery", exit)
	}
}

// TestOpenAISDK_CancelledKeylessChatIsNotRunAgain: an operator
// cancels the job of a chat completion the SDK sent without a key (as it
// does by default). Inkwell answers the waiting call 409 (cancelled); the
// SDK retries 409 on its own, and each retry is a new job that runs and
// is charged: the cancel did not stop the spending, it restarted it.
func TestOpenAISDK_CancelledKeylessChatIsNotRunAgain(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{Latency: 2 * time.Second})
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--config", chatConfig(t, sim.URL))
	st := storetest.MustOpen(t, db, store.Options{})
	done := make(chan error, 1)
	go func() {
		client := sdkRetrying(srv.URL)
		_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "writer",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("cancel me")}})
		done <- err
	}()
	storetest.WaitFor(t, waitLimit, "call running", func() bool {
		return countWhere(t, st, `SELECT COUNT(*) FROM jobs WHERE status = 'running'`) == 1
	})
	resp, err := http.Post(srv.URL+"/v1/jobs/1/cancel", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	err = <-done
	t.Logf("SDK call whose job was cancelled: %v", err)
	storetest.WaitFor(t, waitLimit, "every job ended", func() bool {
		return countWhere(t, st, `SELECT COUNT(*) FROM jobs WHERE status NOT IN ('done', 'failed')`) == 0
	})
	if j, c := countWhere(t, st, `SELECT COUNT(*) FROM jobs`), countWhere(t, st, `SELECT COUNT(*) FROM charges`); j != 1 || c != 0 {
		t.Errorf("after cancelling the one job of a keyless SDK chat call: %d jobs, %d charges (provider bills %d); want 1 job, 0 charges",
			j, c, sim.MustLedger(t).TotalBills)
	}
}

// TestChat_PostgresOtherLaneEndsTheJob: two serves, lanes a and b,
// on one PostgreSQL database; chat completions sent to a whose jobs lane b
// runs are answered as soon as b commits (the store's watch wakes a's
// waiters), not when --sync-wait runs out.
func TestChat_PostgresOtherLaneEndsTheJob(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	sim := simtest.MustStart(t, providersim.Config{Latency: 500 * time.Millisecond})
	cfg := chatConfig(t, sim.URL)
	a := startServe(t, dsn, "--config", cfg, "--lane", "a", "--concurrency", "1", "--sync-wait", "60s")
	startServe(t, dsn, "--config", cfg, "--lane", "b", "--concurrency", "8", "--poll", "100ms")
	st := storetest.MustOpen(t, dsn, store.Options{})
	const n = 12
	answers := make([]chatAnswer, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		wg.Go(func() {
			answers[i] = timedPost(t.Context(), a.URL, fmt.Sprintf("two-lanes-%d", i), chatBodyN(i))
		})
	}
	wg.Wait()
	for i, r := range answers {
		if r.err != nil || r.status != http.StatusOK {
			t.Errorf("chat %d: %d %s (err %v), want 200", i, r.status, r.body, r.err)
		}
		if d := r.at.Sub(t0); d > 15*time.Second {
			t.Errorf("chat %d answered after %v; its job took 0.5 s", i, d)
		}
	}
	if nb := countWhere(t, st, `SELECT COUNT(*) FROM jobs WHERE lane = 'b'`); nb == 0 {
		t.Errorf("lane b ran none of the jobs: the test did not test the cross-process wake")
	} else {
		t.Logf("lane b ran %d of %d; slowest answer %v", nb, n, time.Since(t0))
	}
	if c := countWhere(t, st, `SELECT COUNT(*) FROM charges`); c != n {
		t.Errorf("%d charges, want %d", c, n)
	}
}

// TestWait_ClientGoneIsNotAnInternalError: a long poll and a chat
// completion whose clients hang up while waiting. Nothing failed and no
// answer was written (writeError returns before writing), yet each is
// counted in inkwell_requests_refused_total with reason "internal", the
// 500s operators alert on (docs/operations.md): 2,000 impatient clients
// read as 2,000 internal errors.
func TestWait_ClientGoneIsNotAnInternalError(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{Latency: 20 * time.Second})
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--config", chatConfig(t, sim.URL))
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { timedPost(ctx, srv.URL, "gone-chat", chatBodyN(1)) })
	wg.Go(func() {
		time.Sleep(100 * time.Millisecond)
		timedGet(ctx, srv.URL+"/v1/jobs/1?wait=60s")
	})
	wg.Wait()
	storetest.WaitFor(t, waitLimit, "no waiter left", func() bool {
		return strings.Contains(timedGet(t.Context(), srv.URL+"/metrics").body, "\ninkwell_long_polls_waiting 0\n")
	})
	for _, l := range strings.Split(timedGet(t.Context(), srv.URL+"/metrics").body, "\n") {
		if strings.HasPrefix(l, "inkwell_requests_refused_total") && strings.Contains(l, `reason="internal"`) {
			t.Errorf("a client that hung up while waiting was counted as an internal error: %s", l)
		}
	}
}

// TestServe_SIGTERMWakesWaiterOfJobPutBack: a job that goes back to
// queued during a graceful stop (its call timed out on a provider that
// honours keys, so it is retried) will not run here again: the stopping
// lane claims nothing. Its waiting chat completion is answered then
// (503 server_stopping), not when the grace period ends behind another
// call still running.
func TestServe_SIGTERMWakesWaiterOfJobPutBack(t *testing.T) {
	t.Parallel()
	slowSim := simtest.MustStart(t, providersim.Config{Latency: 8 * time.Second})
	stuckSim := simtest.MustStart(t, providersim.Config{HangRate: 1})
	slowURL, slowCalls := countingProxy(t, slowSim.URL)
	stuckURL, stuckCalls := countingProxy(t, stuckSim.URL)
	path := filepath.Join(t.TempDir(), "inkwell.toml")
	cfg := fmt.Sprintf(`[[provider]]
name = "slow"
kind = "openai"
url = %q
honours_keys = true

[[provider]]
name = "stuck"
kind = "openai"
url = %q
honours_keys = true
timeout = "2s"

[[model]]
name = "writer"
provider = "slow"
max_output_tokens = 50

[[model]]
name = "hung"
provider = "stuck"
max_output_tokens = 50
`, slowURL, stuckURL)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--config", path, "--concurrency", "2", "--grace", "30s", "--sync-wait", "2m")
	st := storetest.MustOpen(t, db, store.Options{})

	ctx := t.Context()
	var long, putBack chatAnswer
	var wg sync.WaitGroup
	wg.Go(func() {
		long = timedPost(ctx, srv.URL, "long", `{"model":"writer","messages":[{"role":"user","content":"ink"}],"max_tokens":20}`)
	})
	storetest.WaitFor(t, waitLimit, "the long call at its provider", func() bool { return slowCalls.Load() == 1 })
	wg.Go(func() {
		putBack = timedPost(ctx, srv.URL, "hung", `{"model":"hung","messages":[{"role":"user","content":"ink"}],"max_tokens":20}`)
	})
	storetest.WaitFor(t, waitLimit, "both calls at their providers", func() bool { return stuckCalls.Load() == 1 })
	sigAt := time.Now()
	exitErr := make(chan error, 1)
	go func() { exitErr <- srv.Signal(t, syscall.SIGTERM) }()
	wg.Wait()
	if err := <-exitErr; err != nil {
		t.Errorf("serve after SIGTERM: %v, want exit 0", err)
	}
	t.Logf("put back: %d after %v; long: %d after %v", putBack.status, putBack.at.Sub(sigAt), long.status, long.at.Sub(sigAt))
	if long.err != nil || long.status != http.StatusOK {
		t.Errorf("the long call in flight at SIGTERM: %d %s (err %v); want 200, its answer within the grace", long.status, long.body, long.err)
	}
	if putBack.err != nil || putBack.status != http.StatusServiceUnavailable || !strings.Contains(putBack.body, "server_stopping") {
		t.Errorf("the call that timed out during the stop: %d %s (err %v); want 503 server_stopping", putBack.status, putBack.body, putBack.err)
	}
	// An order, not a time: the job put back is answered when it is put
	// back (about 2 s after it began), not when the long call ends.
	if !putBack.at.Before(long.at) {
		t.Errorf("the waiter of the job put back was answered %v after SIGTERM, the long call %v after it: want it answered when its job went back to queued", putBack.at.Sub(sigAt), long.at.Sub(sigAt))
	}
	var status string
	if err := st.DB().QueryRow(`SELECT status FROM jobs WHERE idempotency_key = 'hung'`).Scan(&status); err != nil || status != "queued" {
		t.Errorf("the job put back: %q (err %v), want queued for the next lane", status, err)
	}
}
