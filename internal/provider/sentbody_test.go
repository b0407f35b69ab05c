package provider

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/inkwell/inkwell"
)

// An HTTP provider's call, once its request is written, holds none of the
// bytes it sent while it waits for the answer: net/http keeps the request
// (so its body) until the answer comes, and a paid call may take minutes,
// so the body lets go of its bytes once read (sentBody). The test watches
// the body's bytes through a weak pointer taken as the transport is handed
// the request; the server has read it all and holds the answer back.
func TestHTTPProviders_CallInFlightHoldsNotTheBodySent(t *testing.T) {
	for _, kind := range []string{"openai", "anthropic"} {
		t.Run(kind, func(t *testing.T) {
			read, release := make(chan int, 1), make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				read <- len(b)
				<-release
				http.Error(w, "gone", http.StatusServiceUnavailable)
			}))
			defer srv.Close()
			defer close(release)
			watched := make(chan weak.Pointer[byte], 1)
			client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				watched <- bodyPointer(r)
				return http.DefaultTransport.RoundTrip(r)
			})}
			p := newHTTPProvider(t, kind, srv.URL, client)
			msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": strings.Repeat("ink ", 4000)}})
			chat, err := inkwell.ParseChat(map[string]json.RawMessage{"model": json.RawMessage(`"m"`), "messages": msgs})
			if err != nil {
				t.Fatal(err)
			}
			chat.MaxOutputTokens = 64
			req := inkwell.ProviderRequest{IdempotencyKey: "k-1", Chat: chat}
			done := make(chan error, 1)
			go func() {
				_, err := p.Generate(context.Background(), req)
				done <- err
			}()
			var wp weak.Pointer[byte]
			select {
			case wp = <-watched:
			case err := <-done:
				t.Fatalf("Generate returned before sending: %v", err)
			}
			if n := <-read; n < 16000 {
				t.Fatalf("the server read %d bytes, want the whole request", n)
			}
			runtime.GC()
			runtime.GC()
			if wp.Value() != nil {
				t.Fatal("the call still holds the body it sent while it waits for the answer")
			}
			release <- struct{}{}
			if err := <-done; err == nil {
				t.Fatal("a 503 answered: want an error")
			}
		})
	}
}

// bodyPointer is a weak pointer to the first byte of the body r is to
// send (a sentBody's), taken before anything reads it.
//
//go:noinline
func bodyPointer(r *http.Request) weak.Pointer[byte] {
	sb, ok := r.Body.(*sentBody)
	if !ok || len(sb.b) == 0 {
		panic("the request's body is not a sentBody")
	}
	return weak.Make(&sb.b[0])
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func newHTTPProvider(t *testing.T, kind, url string, client *http.Client) inkwell.Provider {
	t.Helper()
	var (
		p   inkwell.Provider
		err error
	)
	quiet := slog.New(slog.DiscardHandler)
	switch kind {
	case "openai":
		p, err = NewOpenAI(OpenAIConfig{URL: url, Client: client, Timeout: time.Minute, Logger: quiet})
	default:
		p, err = NewAnthropic(AnthropicConfig{URL: url, Client: client, Timeout: time.Minute, Logger: quiet})
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSentBody_ReadsOnceThenLetsGo: the body reads its bytes in whatever
// pieces the reader asks for, then EOF, and holds nothing after the last
// byte, or after a close once a read began. A close before any read keeps
// them: the HTTP/2 transport closes a request's body when the connection
// it chose became unusable before writing anything, then sends the same
// request on another connection, which must still read the whole body.
func TestSentBody_ReadsOnceThenLetsGo(t *testing.T) {
	sb := &sentBody{b: []byte("hello, provider")}
	var got []byte
	buf := make([]byte, 4)
	for {
		n, err := sb.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != "hello, provider" || sb.b != nil {
		t.Fatalf("read %q, left %q: want the whole body read and nothing kept", got, sb.b)
	}
	sb = &sentBody{b: []byte("unsent")}
	sb.Close()
	if all, err := io.ReadAll(sb); err != nil || string(all) != "unsent" {
		t.Fatalf("closed before any read, then read: %q, %v; want the whole body (an HTTP/2 retry)", all, err)
	}
	sb = &sentBody{b: []byte("half sent")}
	sb.Read(buf)
	sb.Close()
	if n, err := sb.Read(buf); n != 0 || err != io.EOF || sb.b != nil {
		t.Fatalf("closed after a read began: Read = %d, %v, kept %q; want 0, EOF, nothing", n, err, sb.b)
	}
}
