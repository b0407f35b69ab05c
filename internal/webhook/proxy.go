package webhook

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpproxy"
)

// proxyFromEnvironment is http.ProxyFromEnvironment (HTTPS_PROXY,
// HTTP_PROXY, NO_PROXY), but for a loopback host too: Go never sends a
// request for "localhost", 127.0.0.0/8 or ::1 to a proxy, so a filtering
// proxy that an operator sets to keep deliveries off internal addresses
// would never see the ones to this very machine. A loopback host goes to
// the proxy unless NO_PROXY names it as written in the URL.
func proxyFromEnvironment(cfg *httpproxy.Config) func(*http.Request) (*url.URL, error) {
	proxyFor := cfg.ProxyFunc()
	return func(req *http.Request) (*url.URL, error) {
		u, err := proxyFor(req.URL)
		host := req.URL.Hostname()
		if u != nil || err != nil || !loopbackHost(host) || namedIn(cfg.NoProxy, host) {
			return u, err
		}
		// Ask as for a host that is not loopback, on the same scheme and
		// port: the proxy the environment sets for it, if any (NO_PROXY=*
		// still means none).
		probe := *req.URL
		probe.Host = "loopback.invalid"
		if port := req.URL.Port(); port != "" {
			probe.Host = net.JoinHostPort(probe.Host, port)
		}
		return proxyFor(&probe)
	}
}

// loopbackHost is the hosts Go's proxy rules exempt: "localhost" and
// loopback IPs.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// namedIn reports whether NO_PROXY (comma-separated) lists host itself,
// with or without a port.
func namedIn(noProxy, host string) bool {
	for _, e := range strings.Split(noProxy, ",") {
		e = strings.TrimSpace(e)
		if h, _, err := net.SplitHostPort(e); err == nil {
			e = h
		}
		if strings.EqualFold(strings.Trim(e, "[]"), host) {
			return true
		}
	}
	return false
}
