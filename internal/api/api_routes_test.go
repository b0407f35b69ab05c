package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestRoutes_UnknownIsJSON: a path or method no route takes is answered in
// the JSON error form with the right status (and Allow on 405).
func TestRoutes_UnknownIsJSON(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, filepath.Join(t.TempDir(), "routes.db"), store.Options{})
	srv := httptest.NewServer(api.New(api.Config{Store: st}))
	t.Cleanup(srv.Close)
	cases := []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/v1/nope", http.StatusNotFound, "not_found"},
		{http.MethodDelete, "/v1/jobs/1", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodGet, "/v1/jobs", http.StatusMethodNotAllowed, "method_not_allowed"},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code, Message string }
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s %s: body is not JSON: %v", c.method, c.path, err)
		}
		if resp.StatusCode != c.status || body.Error.Code != c.code || body.Error.Message == "" {
			t.Errorf("%s %s = %d %q %q, want %d %q with a message", c.method, c.path, resp.StatusCode, body.Error.Code, body.Error.Message, c.status, c.code)
		}
		if c.status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", c.method, c.path)
		}
	}
}

// TestCrossSiteWritesRefused: a browser POST on behalf of another site's
// page is refused with 403 and writes nothing; same-origin and non-browser
// clients pass.
func TestCrossSiteWritesRefused(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, filepath.Join(t.TempDir(), "csrf.db"), store.Options{})
	srv := httptest.NewServer(api.New(api.Config{Store: st}))
	t.Cleanup(srv.Close)
	cases := []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"same-site other port", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"foreign origin", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"same origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": srv.URL}, http.StatusCreated},
		{"no browser headers", nil, http.StatusCreated},
	}
	for i, c := range cases {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/jobs", strings.NewReader(`{"prompt":"x"}`))
		req.Header.Set("Idempotency-Key", fmt.Sprintf("csrf-%d", i))
		for k, v := range c.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
	var n int
	if err := st.DB().QueryRow(`SELECT COUNT(*) FROM jobs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("jobs = %d, want 2 (only the allowed requests)", n)
	}
}

// TestAccept_LimitsAreThePromptsOwn: a prompt at the prompt limit is
// accepted however its JSON escapes it, and two Idempotency-Key headers are
// refused rather than one silently chosen.
func TestAccept_LimitsAreThePromptsOwn(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, filepath.Join(t.TempDir(), "limits.db"), store.Options{})
	srv := httptest.NewServer(api.New(api.Config{Store: st}))
	t.Cleanup(srv.Close)
	// 4,096 × "é" = 8,192 bytes of prompt, sent as \u00e9 escapes: 24 KiB of body.
	escaped := strings.Repeat(`\u00e9`, inkwell.MaxPromptBytes/2)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/jobs", strings.NewReader(`{"prompt":"`+escaped+`"}`))
	req.Header.Set("Idempotency-Key", "escaped")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("escaped prompt at the limit: status %d, want 201", resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/v1/jobs", strings.NewReader(`{"prompt":"x"}`))
	req.Header.Add("Idempotency-Key", "one")
	req.Header.Add("Idempotency-Key", "two")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("two keys: status %d, want 400", resp.StatusCode)
	}
	var n int
	if err := st.DB().QueryRow(`SELECT COUNT(*) FROM jobs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("jobs = %d, want 1", n)
	}
}

// TestLoopbackOnly_RefusesForeignHost: with LoopbackOnly, a request whose
// Host is a foreign name (a DNS-rebinding page) is refused; loopback names pass.
func TestLoopbackOnly_RefusesForeignHost(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, filepath.Join(t.TempDir(), "host.db"), store.Options{})
	srv := httptest.NewServer(api.New(api.Config{Store: st, LoopbackOnly: true}))
	t.Cleanup(srv.Close)
	for host, want := range map[string]int{
		"evil.example:8080": http.StatusForbidden,
		"10.1.2.3":          http.StatusForbidden,
		"localhost:8080":    http.StatusOK,
		"127.0.0.1:8080":    http.StatusOK,
		"[::1]:8080":        http.StatusOK,
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/healthz", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: status %d, want %d", host, resp.StatusCode, want)
		}
	}
}
