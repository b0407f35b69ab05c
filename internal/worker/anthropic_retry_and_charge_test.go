package worker_test

// The lane over the Anthropic provider and a server speaking the Messages
// API wire format, on both store dialects: what is retried when the
// outcome is ambiguous (a gateway's 504, a 200 cut mid-body), and what is
// charged from a usage with cache counts.

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// TestLane_AnthropicGateway504IsNotRetried: the provider's url points at
// a gateway in front of Anthropic (a corporate proxy, an API gateway). The
// first call reaches Anthropic, which writes (and bills) an answer, but the
// gateway gives up waiting and answers 504. Every 5xx used to be
// provider_error, retried and released, so Anthropic (which honours no
// idempotency key) billed the job twice. A 502 or 504 is now classed
// timeout (callerror.go, gatewayGaveUp): never retried automatically on a
// provider that honours no key, its reservation kept open.
func TestLane_AnthropicGateway504IsNotRetried(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		var billed atomic.Int64 // calls the upstream processed
		srv := startAnthropicWire(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
			billed.Add(1) // Anthropic behind the gateway wrote the answer
			if n == 1 {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusGatewayTimeout)
				io.WriteString(w, "<html><body><h1>504 Gateway Time-out</h1>The upstream server did not answer in time.</body></html>")
				return
			}
			writeAnthropic(w, 200, `{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-5",
				"content":[{"type":"text","text":"Fine."}],"stop_reason":"end_turn","usage":{"input_tokens":20,"output_tokens":2}}`)
		})
		router := anthropicRoute(t, srv.url, 10*time.Second)
		job, _ := budgetedAccept(t, st, router, `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
		startLane(t, st, worker.Config{Router: router, Poll: 20 * time.Millisecond,
			Retry: worker.RetryPolicy{MaxAttempts: 5, Base: 10 * time.Millisecond, Cap: 20 * time.Millisecond}}).lane.Wake()
		d := waitJob(t, st, job.ID, "ended", func(d inkwell.JobDetail) bool {
			return d.Job.Status == inkwell.StatusDone || d.Job.Status == inkwell.StatusFailed
		})
		time.Sleep(200 * time.Millisecond)
		if n := billed.Load(); n != 1 {
			var classes []inkwell.ErrorClass
			for _, a := range d.Attempts {
				classes = append(classes, a.ErrorClass)
			}
			t.Errorf("Anthropic processed %d calls for one job (attempt classes %v, job %s, charge %+v): a 504 from a gateway "+
				"is an ambiguous outcome, and the automatic retry billed the job twice at a provider that honours no idempotency key; "+
				"want one call, the job failed timeout, its reservation kept open", n, classes, d.Job.Status, d.Charge)
		}
		if d.Job.Status != inkwell.StatusFailed || d.Job.ErrorClass != inkwell.ClassTimeout || len(d.Attempts) != 1 || d.Charge != nil {
			t.Errorf("job %s (%s), %d attempts, charge %+v; want failed timeout after one attempt, no charge", d.Job.Status, d.Job.ErrorClass, len(d.Attempts), d.Charge)
		}
		r, err := st.Reservation(t.Context(), job.ID)
		if err != nil || r.State != store.ReservationOpen {
			t.Errorf("reservation %+v, %v; want it kept open (the gateway's 504 says nothing of what Anthropic billed)", r, err)
		}
	})
}

// TestLane_AnthropicCacheCountsPastTheReservationAreCapped: an answer
// whose cache counts (cache_read_input_tokens, cache_creation_input_tokens)
// report far more prompt than a small request could hold (a miscount, or a
// cache shared with other traffic) is kept, charged what accept reserved
// and no more; the reservation settles, the account's spend is the worst
// case, and the charge row keeps the counts as reported (prompt = input +
// both cache counts).
func TestLane_AnthropicCacheCountsPastTheReservationAreCapped(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		srv := startAnthropicWire(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
			writeAnthropic(w, 200, `{"id":"msg_cache","type":"message","role":"assistant","model":"claude-sonnet-4-5",
				"content":[{"type":"text","text":"Cached."}],"stop_reason":"end_turn","stop_sequence":null,
				"usage":{"input_tokens":12,"cache_creation_input_tokens":90000,"cache_read_input_tokens":100000,"output_tokens":3,
				"cache_creation":{"ephemeral_5m_input_tokens":90000,"ephemeral_1h_input_tokens":0},"service_tier":"standard"}}`)
		})
		router := anthropicRoute(t, srv.url, 10*time.Second)
		job, worst := budgetedAccept(t, st, router, `{"model":"claude","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
		if claude.Cost(190012, 3) <= worst {
			t.Fatalf("test setup: the reported usage (%d micros) must pass the worst case %d", claude.Cost(190012, 3), worst)
		}
		startLane(t, st, worker.Config{Router: router, Retry: worker.RetryPolicy{MaxAttempts: 3, Base: 10 * time.Millisecond}}).lane.Wake()
		d := waitJob(t, st, job.ID, "done", isStatus(inkwell.StatusDone))
		if d.Charge == nil || d.Charge.AmountMicros != worst {
			t.Fatalf("charge %+v; want %d micros (the reservation), never the reported %d", d.Charge, worst, claude.Cost(190012, 3))
		}
		if p, c := d.Charge.PromptTokens, d.Charge.CompletionTokens; p == nil || c == nil || *p != 190012 || *c != 3 {
			t.Errorf("charge row counts %v + %v; want the reported 190012 (12 + 90000 + 100000) + 3 kept as evidence", p, c)
		}
		a, err := st.Account(t.Context(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		if a.SpentMicros != worst || a.ReservedMicros != 0 {
			t.Errorf("account spent %d reserved %d; want %d spent, nothing reserved", a.SpentMicros, a.ReservedMicros, worst)
		}
	})
}

// TestLane_AnthropicOKCutMidBodyIsNeitherRetriedNorReleased: a 200 whose
// headers promise the whole message and whose connection closes half way
// through the body: Anthropic billed it, its usage never arrived. The job
// fails timeout after exactly one call (never retried: Anthropic honours
// no key), uncharged, its reservation kept open for an operator.
func TestLane_AnthropicOKCutMidBodyIsNeitherRetriedNorReleased(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		const full = `{"id":"msg_cut","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"A long answer"}],"stop_reason":"end_turn","usage":{"input_tokens":9,"output_tokens":4}}`
		var calls atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			calls.Add(1)
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			writeCut(buf, full)
		}))
		t.Cleanup(srv.Close)
		router := anthropicRoute(t, srv.URL, 5*time.Second)
		job, worst := budgetedAccept(t, st, router, `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
		startLane(t, st, worker.Config{Router: router, Poll: 20 * time.Millisecond,
			Retry: worker.RetryPolicy{MaxAttempts: 5, Base: 10 * time.Millisecond, Cap: 20 * time.Millisecond}}).lane.Wake()
		d := waitJob(t, st, job.ID, "failed", isStatus(inkwell.StatusFailed))
		time.Sleep(200 * time.Millisecond)
		wantClasses(t, "cut 200", d, inkwell.ClassTimeout)
		if n := calls.Load(); n != 1 {
			t.Errorf("Anthropic got %d calls, want 1", n)
		}
		r, err := st.Reservation(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Charge != nil || r.State != store.ReservationOpen || r.Micros != worst {
			t.Errorf("charge %+v, reservation %+v; want no charge and %d micros kept open", d.Charge, r, worst)
		}
	})
}

// writeCut writes a 200 that announces body's length and sends half of it.
func writeCut(buf *bufio.ReadWriter, body string) {
	buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nrequest-id: req_cut\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body[:len(body)/2])
	buf.Flush()
}
