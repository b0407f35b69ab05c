package drill

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestFront: the front fails each key's first calls its way, unbilled
// (the simulator behind it never sees them), and passes every other call
// through; a refused front hands out an address where nothing listens.
func TestFront(t *testing.T) {
	t.Parallel()
	var reached []string
	sim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = append(reached, r.Header.Get("Idempotency-Key"))
		io.WriteString(w, `{"ok":true}`)
	}))
	defer sim.Close()
	call := func(f *front, key string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodPost, f.url+"/v1/chat/completions", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		res, err := newHTTPClient().Do(req)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		return res.StatusCode, res.Header.Get("Retry-After"), nil
	}
	for _, tt := range []struct {
		how        failure
		status     int
		retryAfter string
	}{{fail500, 500, ""}, {fail429, 429, "7"}, {failCut, 0, ""}} {
		t.Run(string(tt.how), func(t *testing.T) {
			reached = nil
			f, err := startFront(tt.how, 2, "7", sim.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer f.stop()
			for i := range 2 {
				status, after, err := call(f, "a")
				switch {
				case tt.how == failCut && err == nil:
					t.Errorf("call %d: answered %d, want the connection closed without an answer", i+1, status)
				case tt.how != failCut && (err != nil || status != tt.status || after != tt.retryAfter):
					t.Errorf("call %d: %d (Retry-After %q), %v; want %d (%q)", i+1, status, after, err, tt.status, tt.retryAfter)
				}
			}
			if status, _, err := call(f, "a"); err != nil || status != 200 {
				t.Errorf("third call: %d, %v; want it passed through", status, err)
			}
			if status, _, err := call(f, "b"); tt.how != failCut && (err != nil || status != tt.status) {
				t.Errorf("another key's first call: %d, %v; want %d: the count is per key", status, err, tt.status)
			}
			if len(reached) != 1 || reached[0] != "a" || f.failed.Load() != 3 {
				t.Errorf("the simulator saw %v and the front failed %d; want only key a's third call through, 3 failed", reached, f.failed.Load())
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		f, err := startFront(failRefused, 1, "", sim.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer f.stop()
		if _, err := newHTTPClient().Post(f.dead, "application/json", strings.NewReader(`{}`)); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("a call to the dead address: %v, want connection refused", err)
		}
		if status, _, err := call(f, "a"); err != nil || status != 200 {
			t.Errorf("a call through the front: %d, %v; want it passed through", status, err)
		}
	})
}
