package drill

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// failure is how the front fails a call it answers itself.
type failure string

const (
	failNone failure = ""
	// fail500 answers 500 (class provider_error: retry-safe).
	fail500 failure = "500"
	// fail429 answers 429 with Retry-After (1 unless the scenario says;
	// class rate_limited: retry-safe, and the Retry-After wins over the
	// back-off).
	fail429 failure = "429"
	// failCut reads the request and closes the connection without an
	// answer (class timeout: the request may have arrived; not retry-safe
	// when the provider is not trusted to honour keys).
	failCut failure = "cut"
	// failRefused: the first serve of the scenario is given, instead of
	// the front, an address where nothing listens (class not_sent:
	// retry-safe); later ones get the front, which passes every call.
	failRefused failure = "refused"
)

// words says, for the report, what the front does to a call.
func (f failure) words() string {
	switch f {
	case fail500:
		return "answers 500 (a provider error)"
	case fail429:
		return "answers 429 with `Retry-After` (rate limited)"
	case failCut:
		return "reads the request and closes the connection without an answer (it may have arrived: a timeout)"
	case failRefused:
		return "is not there: the first serve's provider address refuses connections (nothing was sent)"
	}
	return "passes it through"
}

// front stands between serve and a simulator, in the drill's own process:
// for each Idempotency-Key it answers the first `fails` calls itself with
// a failure, unbilled, and passes every other call through. The simulator
// (and its ledger) never sees the failed calls, so its calls / bills are
// those of the calls that reached it; the front counts the ones it failed.
type front struct {
	srv    *http.Server
	url    string
	dead   string // an address where nothing listens (failRefused)
	fails  int
	how    failure
	after  string // the 429's Retry-After
	target atomic.Pointer[url.URL]

	mu     sync.Mutex
	seen   map[string]int // calls per key
	failed atomic.Int64
}

// startFront listens on loopback and serves until stop.
func startFront(how failure, fails int, retryAfter, to string) (*front, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("drill: front: %w", err)
	}
	if retryAfter == "" {
		retryAfter = "1"
	}
	f := &front{how: how, fails: fails, after: retryAfter, seen: map[string]int{}, url: "http://" + ln.Addr().String()}
	if how == failRefused {
		f.fails = 0 // the front passes every call; the refusal is the dead address
		dl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("drill: front: %w", err)
		}
		f.dead = "http://" + dl.Addr().String()
		dl.Close() // nothing listens there now: a dial is refused
	}
	if err := f.point(to); err != nil {
		ln.Close()
		return nil, err
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(f.target.Load())
	}}
	f.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		f.mu.Lock()
		f.seen[key]++
		n := f.seen[key]
		f.mu.Unlock()
		if n > f.fails || f.how == failNone {
			proxy.ServeHTTP(w, r)
			return
		}
		f.failed.Add(1)
		switch f.how {
		case fail500:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"type":"server_error","message":"the drill's front failed this call: nothing was billed"}}`)
		case fail429:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", f.after)
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"type":"rate_limit_error","message":"the drill's front rate-limited this call: nothing was billed"}}`)
		case failCut:
			panic(http.ErrAbortHandler) // closes the connection, no answer
		}
	}), ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	go func() {
		if err := f.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the drill reads what serve stored; a front that stops shows there
		}
	}()
	return f, nil
}

// point makes the front pass calls to the simulator at to.
func (f *front) point(to string) error {
	u, err := url.Parse(to)
	if err != nil {
		return fmt.Errorf("drill: front: %w", err)
	}
	f.target.Store(u)
	return nil
}

func (f *front) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = f.srv.Shutdown(ctx)
	_ = f.srv.Close()
}
