package provider_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

// resetServer is a provider on a raw loopback TCP listener that speaks
// HTTP/1.1 by hand, so that it can do what no well-behaved server does: on
// a keep-alive connection it answers the first request, and on the second
// request over that same connection it reads the request in full (the
// provider got it, and may have billed it) and then resets the connection
// (SO_LINGER 0: an RST, not a FIN) before answering. Every other
// connection is answered the same way: first request answered, second
// reset. It counts the requests it read and the connections it accepted.
type resetServer struct {
	URL string

	requests atomic.Int64
	conns    atomic.Int64

	mu   sync.Mutex
	keys []string // the Idempotency-Key of each request read, in order
	open map[net.Conn]struct{}
}

func startResetServer(t *testing.T) *resetServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &resetServer{URL: "http://" + ln.Addr().String(), open: make(map[net.Conn]struct{})}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			s.mu.Lock()
			s.open[c] = struct{}{}
			s.mu.Unlock()
			wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.open {
			c.Close() // idle keep-alive connections the client still holds
		}
		s.mu.Unlock()
		wg.Wait()
	})
	return s
}

func (s *resetServer) serve(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.open, c)
		s.mu.Unlock()
		c.Close()
	}()
	br := bufio.NewReader(c)
	for n := 1; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return // the client closed its idle connection
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		s.requests.Add(1)
		s.mu.Lock()
		s.keys = append(s.keys, req.Header.Get("Idempotency-Key"))
		s.mu.Unlock()
		if n >= 2 {
			// Unread bytes or not, linger 0 makes Close send an RST.
			c.(*net.TCPConn).SetLinger(0)
			return
		}
		body := fmt.Sprintf(`{"id":"req-%d","choices":[{"message":{"content":"fine words"}}]}`, s.requests.Load())
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
}

func (s *resetServer) seenKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

// lockedBuffer is a log sink that the transport's goroutines may write to.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// resendCounter is what cmd/inkwell hangs on OnResend (a Prometheus
// counter's Inc); here an atomic, read by the tests.
type resendCounter struct{ n atomic.Int64 }

func (c *resendCounter) inc() { c.n.Add(1) }

// TestOpenAI_ResetAfterSendIsNotResent is issue #8's hidden second request:
// the provider reads the second call in full on a reused keep-alive
// connection and resets it before answering. Go's transport used to send
// such a call again on a fresh connection, unseen, because it carries an
// Idempotency-Key and a rewindable body. Now the call fails, saying the
// provider may have received and billed it, and the provider saw one
// request per Generate.
func TestOpenAI_ResetAfterSendIsNotResent(t *testing.T) {
	t.Parallel()
	srv := startResetServer(t)
	var logs lockedBuffer
	var resends resendCounter
	// The default transport's settings (keep-alives on), on a transport of
	// its own: parallel tests' httptest.Server.Close closes the idle
	// connections of http.DefaultTransport itself.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	p, err := provider.NewOpenAI(provider.OpenAIConfig{
		URL: srv.URL, APIKey: apiKey, Timeout: 10 * time.Second, Client: &http.Client{Transport: tr},
		Logger:   slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnResend: resends.inc,
	})
	if err != nil {
		t.Fatal(err)
	}
	first := inkwell.ProviderRequest{IdempotencyKey: inkwell.ProviderKey(1, "first"), Prompt: "p", MaxWords: 5}
	second := inkwell.ProviderRequest{IdempotencyKey: inkwell.ProviderKey(2, "second"), Prompt: "p", MaxWords: 5}

	mustGenerate(t, p, first)
	_, err = p.Generate(context.Background(), second)

	if err == nil {
		t.Fatalf("second Generate succeeded; want the reset to fail it (server: %d requests on %d connections, keys %q)",
			srv.requests.Load(), srv.conns.Load(), srv.seenKeys())
	}
	t.Logf("second Generate: %v", err)
	ce, ok := provider.AsCallError(err)
	if !ok {
		t.Fatalf("second Generate error = %v (%T), want a *CallError", err, err)
	}
	// The request reached the provider: the outcome is unknown and it may
	// have been billed. That is a network error (a reset), never a refusal
	// (which would say nothing arrived), and the message says so.
	if ce.Class != provider.ClassNetwork || ce.Status != 0 {
		t.Errorf("class, status = %q, %d; want %q, 0 (%v)", ce.Class, ce.Status, provider.ClassNetwork, err)
	}
	if !strings.Contains(err.Error(), "may have reached the provider") {
		t.Errorf("error %q does not say the provider may have received the request", err)
	}
	if strings.Contains(err.Error(), apiKey) || strings.Contains(logs.String(), apiKey) {
		t.Errorf("the API key leaked: error %q, logs %q", err, logs.String())
	}
	if got, want := srv.seenKeys(), []string{first.IdempotencyKey, second.IdempotencyKey}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("server read requests with keys %q, want exactly %q (one request per Generate)", got, want)
	}
	if got := srv.requests.Load(); got != 2 {
		t.Errorf("server read %d requests, want 2", got)
	}
	// One connection: the second call really went over the reused one.
	if got := srv.conns.Load(); got != 1 {
		t.Errorf("server accepted %d connections, want 1", got)
	}
	if got := resends.n.Load(); got != 0 {
		t.Errorf("resends counted = %d, want 0", got)
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("warnings logged for a call that was not resent:\n%s", logs.String())
	}
}

// replayable is a client-side wrapper of the kind a caller might add (a
// retry or tracing middleware that buffers the body): it gives each
// request a GetBody again, which makes it replayable for net/http's
// Transport once more. The provider cannot prevent this resend; it must
// count it and say so.
type replayable struct{ base http.RoundTripper }

func (r replayable) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.GetBody == nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return r.base.RoundTrip(req)
}

// TestOpenAI_TransportResendIsCounted: when the transport does send a call
// twice (here because a caller's RoundTripper made it replayable again),
// each extra connection is counted once and logged as a warning naming
// the job's provider key, never the API key.
func TestOpenAI_TransportResendIsCounted(t *testing.T) {
	t.Parallel()
	srv := startResetServer(t)
	var logs lockedBuffer
	var resends resendCounter
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	p, err := provider.NewOpenAI(provider.OpenAIConfig{
		URL: srv.URL, APIKey: apiKey, Timeout: 10 * time.Second,
		Client:   &http.Client{Transport: replayable{tr}},
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
		OnResend: resends.inc,
	})
	if err != nil {
		t.Fatal(err)
	}
	first := inkwell.ProviderRequest{IdempotencyKey: inkwell.ProviderKey(1, "first"), Prompt: "p", MaxWords: 5}
	second := inkwell.ProviderRequest{IdempotencyKey: inkwell.ProviderKey(2, "second"), Prompt: "p", MaxWords: 5}

	mustGenerate(t, p, first)
	if got := resends.n.Load(); got != 0 {
		t.Fatalf("resends after one clean call = %d, want 0", got)
	}
	// The reset connection makes the transport send the call again on a
	// fresh one, which answers: the call succeeds, billed twice by a
	// provider that ignores keys.
	mustGenerate(t, p, second)

	if got, want := srv.seenKeys(), []string{first.IdempotencyKey, second.IdempotencyKey, second.IdempotencyKey}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("server read requests with keys %q, want %q (the transport resent the second call)", got, want)
	}
	if got := resends.n.Load(); got != 1 {
		t.Errorf("resends counted = %d, want 1", got)
	}
	out := logs.String()
	var warnings []string
	for line := range strings.Lines(out) {
		if strings.Contains(line, "level=WARN") {
			warnings = append(warnings, line)
		}
	}
	t.Logf("warnings: %q", warnings)
	if len(warnings) != 1 || !strings.Contains(warnings[0], "provider_key="+second.IdempotencyKey) ||
		!strings.Contains(warnings[0], "connection=2") {
		t.Errorf("warnings = %q, want one naming provider_key=%s and connection=2", warnings, second.IdempotencyKey)
	}
	if strings.Contains(out, apiKey) {
		t.Errorf("logs contain the API key:\n%s", out)
	}
}

// TestOpenAI_RedirectIsOneRequest: a provider that redirects the POST gets
// exactly one request, whatever the caller's client would follow (Go
// follows 301-303 with a body-less GET, and 307/308 when the body can be
// sent again), and the call fails saying where it was sent and why it was
// not followed.
func TestOpenAI_RedirectIsOneRequest(t *testing.T) {
	t.Parallel()
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			url, n := fakeAnswer(t, status, "moved", map[string]string{"Location": "/elsewhere?key=" + apiKey})
			// A client with Go's default redirect policy, and a transport
			// that would make the body rewindable for a 307/308.
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			p, err := provider.NewOpenAI(provider.OpenAIConfig{URL: url, APIKey: apiKey, Client: &http.Client{Transport: replayable{tr}}})
			if err != nil {
				t.Fatal(err)
			}

			_, err = p.Generate(context.Background(), inkwell.ProviderRequest{IdempotencyKey: "job-1", Prompt: "p"})

			t.Logf("Generate: %v", err)
			ce, ok := provider.AsCallError(err)
			if !ok || ce.Class != provider.ClassMalformed || ce.Status != status {
				t.Fatalf("Generate error = %v, want a %q CallError with status %d", err, provider.ClassMalformed, status)
			}
			if !strings.Contains(ce.Msg, "redirect") || !strings.Contains(ce.Msg, "/elsewhere") {
				t.Errorf("message %q does not say the call was redirected, and where", ce.Msg)
			}
			if strings.Contains(err.Error(), apiKey) {
				t.Errorf("error %q contains the API key", err)
			}
			if got := n.Load(); got != 1 {
				t.Errorf("server got %d requests, want 1 (a redirect is never followed)", got)
			}
		})
	}
}

// TestOpenAI_HTTP2CallsAreNotCountedAsResends: over HTTP/2 (TLS, as with
// a real provider) the transport reports one connection per call, so calls
// on a reused connection count no resend.
func TestOpenAI_HTTP2CallsAreNotCountedAsResends(t *testing.T) {
	t.Parallel()
	var protos []string
	var mu sync.Mutex
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos = append(protos, r.Proto)
		mu.Unlock()
		io.WriteString(w, `{"id":"r","choices":[{"message":{"content":"fine words"}}]}`)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	var resends resendCounter
	var logs lockedBuffer
	p, err := provider.NewOpenAI(provider.OpenAIConfig{
		URL: srv.URL, APIKey: apiKey, Client: srv.Client(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnResend: resends.inc,
	})
	if err != nil {
		t.Fatal(err)
	}

	for i := range 3 {
		mustGenerate(t, p, inkwell.ProviderRequest{IdempotencyKey: fmt.Sprint("job-", i), Prompt: "p"})
	}

	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(protos) != "[HTTP/2.0 HTTP/2.0 HTTP/2.0]" {
		t.Errorf("server saw %q, want three HTTP/2.0 requests", protos)
	}
	if got := resends.n.Load(); got != 0 || logs.String() != "" {
		t.Errorf("resends = %d, logs %q; want 0 and nothing", got, logs.String())
	}
}
