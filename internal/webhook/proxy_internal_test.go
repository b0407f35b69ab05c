package webhook

import (
	"net/http"
	"testing"

	"golang.org/x/net/http/httpproxy"
)

// TestProxyFromEnvironment_LoopbackGoesToTheProxy: a delivery to a
// loopback host goes to the proxy the environment sets for its scheme,
// as any other host does (Go's own rule exempts loopback), unless
// NO_PROXY names that host, or is "*"; with no proxy set, it goes direct.
func TestProxyFromEnvironment_LoopbackGoesToTheProxy(t *testing.T) {
	t.Parallel()
	const httpProxy, httpsProxy = "http://filter:3128", "http://filter-tls:3129"
	for _, tc := range []struct {
		name, url, noProxy, want string
		unset                    bool
	}{
		{"127.0.0.1", "http://127.0.0.1:9000/hook", "", httpProxy, false},
		{"localhost over https", "https://LocalHost/hook", "", httpsProxy, false},
		{"::1", "http://[::1]:80/hook", "", httpProxy, false},
		{"127.8.9.10", "http://127.8.9.10/hook", "", httpProxy, false},
		{"another host, as Go does", "http://example.com/hook", "", httpProxy, false},
		{"NO_PROXY names it", "http://localhost:9000/hook", "example.com, localhost", "", false},
		{"NO_PROXY names it with a port", "http://127.0.0.1:9000/hook", "127.0.0.1:9000", "", false},
		{"NO_PROXY=*", "http://127.0.0.1/hook", "*", "", false},
		{"no proxy set", "http://127.0.0.1/hook", "", "", true},
	} {
		cfg := &httpproxy.Config{HTTPProxy: httpProxy, HTTPSProxy: httpsProxy, NoProxy: tc.noProxy}
		if tc.unset {
			cfg = &httpproxy.Config{}
		}
		req, err := http.NewRequest(http.MethodPost, tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		u, err := proxyFromEnvironment(cfg)(req)
		got := ""
		if u != nil {
			got = u.String()
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: proxy %q (%v), want %q", tc.name, got, err, tc.want)
		}
	}
}
