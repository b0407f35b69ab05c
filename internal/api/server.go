package api

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/jobwait"
	"github.com/inkwell/inkwell/internal/metrics"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// jobStore is what the API needs of the store.
type jobStore interface {
	Accept(ctx context.Context, p store.AcceptParams) (inkwell.Job, bool, error)
	Show(ctx context.Context, id int64) (inkwell.JobDetail, error)
	RetryIfFailed(ctx context.Context, id int64, by string) (inkwell.Job, error)
	Cancel(ctx context.Context, id int64, by string) (store.Cancelled, error)
	// Account is read for its rpm, at admission (admission.go).
	Account(ctx context.Context, name string) (store.Account, error)
	// Unready says why writes fail now (nil: they do not), for /readyz.
	Unready() error
	operatorStore // the dashboard's, /v1/overview's and /metrics' reads
	batchStore    // POST /v1/batches and its reads (batches.go)
}

// Config configures a Server.
type Config struct {
	Store  jobStore
	Logger *slog.Logger
	// OnAccepted is called after a new job is committed (the serve command
	// wakes the lane with it, so an idle lane claims at once).
	OnAccepted func()
	// OnCancelled is called after a cancel closed a running attempt (its
	// id): serve aborts that attempt's provider call in this process's
	// lane at once (a lane elsewhere notices at its next look, see
	// worker.Config.CancelPoll).
	OnCancelled func(attemptID int64)
	// Metrics counts requests and serves GET /metrics from Gatherer. When
	// nil, New makes both on a private registry.
	Metrics  *metrics.Metrics
	Gatherer prometheus.Gatherer
	// LoopbackOnly refuses requests whose Host header is not a loopback
	// name or address. serve sets it when it listens on loopback, so a
	// web page whose DNS name rebinds to 127.0.0.1 cannot read job texts.
	LoopbackOnly bool
	// MaxQueued is admission (serve --max-queued): past this many queued
	// jobs a new request gets 429 and writes nothing; a re-send of a job
	// already stored is still answered. 0: no limit.
	MaxQueued int
	// Auth is serve --auth (auth.go): "" or AuthAuto requires a token on
	// every route but /healthz, /readyz and /static/ as soon as one token
	// exists; AuthRequired always; AuthOff never (serve allows it on
	// loopback only). Tokens defaults to Store when it can verify tokens.
	Auth   AuthMode
	Tokens tokenStore
	// Waits is the hub long-polls wait on (GET /v1/jobs/{id}?wait=): a
	// cancel here wakes it; serve wakes it from the lane and the store's
	// watch too. nil: a hub of the server's own.
	Waits *jobwait.Hub
	// AuthRecheck is how long auto mode trusts "no token exists" before
	// reading again (default 2s; once a token exists it never reads again).
	AuthRecheck time.Duration
	// Catalog is the models served and who serves them (docs/providers.md):
	// accept refuses a model it does not know, or a field its provider
	// cannot carry. nil: any model, any field.
	Catalog *catalog.Catalog
	// WorstCase is the most a request can cost on its model
	// (provider.WorstCaseMicros for the model's provider): accept reserves
	// it against the account's budget (docs/design.md §10, §12). nil
	// reserves 0.
	WorstCase func(inkwell.Work, inkwell.Model) int64
	// SyncWait is how long POST /v1/chat/completions waits for its job
	// before it answers 504 (serve --sync-wait; DefaultSyncWait when 0).
	SyncWait time.Duration
	// RPMRecheck is how long an account's rpm is trusted before it is read
	// again (default 5s).
	RPMRecheck time.Duration
}

// Server is Inkwell's HTTP handler.
type Server struct {
	cfg      Config
	log      *slog.Logger
	mux      *routeMux
	ready    atomic.Bool
	stopping atomic.Bool // Stopping was called
	pages    pages
	auth     *authGate
	rpm      *accountLimits // per-account rpm at admission (admission.go)
	sessions *sessions      // dashboard sign-ins (session.go)
	since    int64          // when this server was made, unix seconds: a model's "created" (models.go)
}

// New returns a Server; it is not ready (GET /readyz answers 503) until
// SetReady is called after startup recovery.
func New(cfg Config) *Server {
	if cfg.Store == nil {
		panic("api.New: nil Store")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		reg := prometheus.NewRegistry()
		cfg.Metrics, cfg.Gatherer = metrics.New(reg, cfg.Store), reg
	}
	if cfg.Gatherer == nil {
		panic("api.New: Metrics without a Gatherer to serve them")
	}
	mode, err := ParseAuthMode(string(cfg.Auth))
	if err != nil {
		panic("api.New: " + err.Error())
	}
	if cfg.Tokens == nil {
		cfg.Tokens, _ = cfg.Store.(tokenStore)
	}
	if cfg.Tokens == nil && mode != AuthOff {
		panic("api.New: --auth " + string(mode) + " needs a Store that verifies tokens (or Config.Tokens)")
	}
	if cfg.Waits == nil {
		cfg.Waits = jobwait.New()
	}
	if cfg.AuthRecheck <= 0 {
		cfg.AuthRecheck = authRecheckDefault
	}
	s := &Server{cfg: cfg, log: log.With("component", "api"), mux: newRouteMux(), pages: mustParsePages(),
		auth: &authGate{mode: mode, tokens: cfg.Tokens, recheck: cfg.AuthRecheck}, rpm: newAccountLimits(cfg.RPMRecheck), sessions: newSessions(),
		since: time.Now().Unix()}
	s.routes()
	return s
}

// SetReady marks the server ready: recovery has run and the lane is up.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// Stopping says a graceful stop has begun: its lane claims nothing more.
// /readyz answers 503 "stopping", so a balancer sends no more work here;
// waiters on jobs not running answer now (a chat completion 503
// server_stopping), those on running jobs wait for the answer the grace
// period may still bring. Requests are still served until the stop ends.
func (s *Server) Stopping() {
	s.stopping.Store(true)
	s.cfg.Waits.Stop()
}

// ServeHTTP implements http.Handler. A request no route takes gets the
// JSON error form too, not the mux's plain text.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	// A refusal before the handler runs is counted under the route, as
	// the handler's own are ("" for a path no route takes: unmatched).
	r.Pattern = pattern
	if s.cfg.LoopbackOnly && !loopbackHost(r.Host) {
		s.writeError(w, r, inkwell.Errorf(inkwell.EFORBIDDEN, "host %q is not served: this server listens on loopback and answers only to localhost, 127.0.0.1 or [::1]", r.Host))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && crossSite(r) {
		s.writeError(w, r, inkwell.Errorf(inkwell.EFORBIDDEN, "cross-site %s refused: a page of another site may not make this server spend money", r.Method))
		return
	}
	if pattern != "" {
		if err := identityEncoding(r); err != nil {
			w.Header().Set("Accept-Encoding", "identity") // RFC 7694: the codings a body may have here
			s.writeError(w, r, err)
			return
		}
		s.mux.ServeHTTP(w, r) // the mux sets the path values Handler does not
		return
	}
	// Let the mux decide between 404 and 405 (and set Allow), then answer
	// in JSON.
	probe := &statusProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if allow := probe.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if probe.status == http.StatusMethodNotAllowed {
		r.Pattern = s.pathPattern(r, probe.header.Get("Allow"))
		s.writeError(w, r, inkwell.Errorf(inkwell.EMETHOD, "%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, probe.header.Get("Allow")))
		return
	}
	s.writeError(w, r, inkwell.Errorf(inkwell.ENOTFOUND, "no such endpoint: %s %s", r.Method, r.URL.Path))
}

// pathPattern is the path part of the route r's path would take under one
// of the allowed methods ("/v1/jobs/{id}"), the label a 405 is counted
// under: the route, without the method a client made up (any token is a
// method to net/http, and a label per made-up method would grow without
// bound). "" when none is found.
func (s *Server) pathPattern(r *http.Request, allow string) string {
	for _, m := range strings.Split(allow, ",") {
		probe := *r // the mux reads method, host and path only: no deep copy
		probe.Method = strings.TrimSpace(m)
		if _, pattern := s.mux.Handler(&probe); pattern != "" {
			_, path, _ := strings.Cut(pattern, " ")
			return path
		}
	}
	return ""
}

// statusProbe records the status and headers a handler sets and drops its body.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(status int)      { p.status = status }

// crossSite reports whether a browser sent r on behalf of another site's
// page. Retry and accept spend money, and the server has no login yet, so
// a page the operator happens to visit must not be able to POST here
// (with tokens in force a page has no token to send either: browsers do
// not add an Authorization header on their own).
// Clients that are not browsers send neither header and pass.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return true
	case "same-origin", "none":
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err != nil || u.Host != r.Host
}

// loopbackHost reports whether a Host header names this machine's loopback.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// metricsHandler serves GET /metrics from the configured gatherer. A
// collector that fails is logged and left out; the rest are still served.
func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
}
