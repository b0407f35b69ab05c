package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/inkwell/inkwell/internal/jobwait"
	"github.com/inkwell/inkwell/internal/metrics"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/webhook"
	"github.com/inkwell/inkwell/internal/worker"
	"github.com/prometheus/client_golang/prometheus"
)

func init() {
	register("serve", "run the HTTP API and the worker lane (migrate, lock, recover, serve)", runServe)
}

const serveHelp = `
Serve opens the database (creating and migrating it if needed), takes the
lane's lock (refusing to start, with the holder named, while another live
process holds it), runs startup recovery on the rows the lane's previous
holder left running, and then serves HTTP and runs the worker lane.

The lane runs up to --concurrency provider calls at once, each its own
claim, attempt and fenced completion, within --provider-rpm/--provider-tpm.
A provider answer is stored unless the attempt was fenced out: while the
database is busy, locked or full, the lane keeps it and tries again.

SIGTERM, SIGINT or SIGHUP: stop claiming, let every running provider call
finish within --grace, record each outcome, mark the lane stopped, exit 0
(1 when an answer could still not be stored when the grace ran out).

Environment: INKWELL_DB (default for --db), INKWELL_PROVIDER_KEY (the
openai provider's API key), INKWELL_CRASH_AT (arm a crash point; drills only).`

type serveConfig struct {
	db, addr, lane, synchronous *string
	config                      *string
	catalog                     *catalog.Catalog // read from --config before anything is made
	syncWait                    *time.Duration
	grace, heartbeat, poll      *time.Duration
	concurrency                 *int
	rescue                      *time.Duration
	provider                    providerFlags
	log                         logFlags
	life                        jobLifeFlags
	auth                        *string
	webhooks                    webhookFlags
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve", "[flags]", serveHelp, stdout, stderr)
	cfg := serveConfig{
		db:          dbFlag(fs),
		addr:        fs.String("addr", "127.0.0.1:8080", "HTTP listen address (loopback by default; beyond loopback an API token must exist, see --auth)"),
		lane:        fs.String("lane", "local", "worker lane name; one process per lane"),
		synchronous: fs.String("synchronous", "FULL", "SQLite synchronous mode: FULL (every commit survives a power cut), EXTRA (as FULL in WAL mode: it adds a directory sync after a rollback journal, which WAL does not use) or NORMAL (faster; a power cut may lose the last commits, a process crash loses nothing)"),
		grace:       fs.Duration("grace", 30*time.Second, "on shutdown, how long a running provider call may take to finish"),
		heartbeat:   fs.Duration("heartbeat", 2*time.Second, "how often the lane stamps its heartbeat and checks its lock and the database's files"),
		rescue:      fs.Duration("rescue-interval", 2*time.Second, "PostgreSQL: how often the lane looks for other lanes proven dead (their lock is free) and closes their orphans"),
		poll:        fs.Duration("poll", time.Second, "how often an idle lane looks for jobs queued by other processes"),
		concurrency: fs.Int("concurrency", 16, "how many provider calls the lane runs at once (each its own claim, attempt and fenced completion; 1: one at a time)"),
		config:      fs.String("config", os.Getenv("INKWELL_CONFIG"), "the config file (TOML) defining providers and models, docs/providers.md (env INKWELL_CONFIG); without one, --provider and its flags define one provider that answers any model name"),
		syncWait:    fs.Duration("sync-wait", api.DefaultSyncWait, "how long POST /v1/chat/completions waits for its job before it answers 504 (the same request with the same Idempotency-Key waits again)"),
		provider:    addProviderFlags(fs),
		log:         addLogFlags(fs),
		life:        addJobLifeFlags(fs),
		auth:        fs.String("auth", "auto", authFlagHelp),
		webhooks:    addWebhookFlags(fs),
	}
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() > 0 { // before anything is created: a stray word is a mistake, not a database name
		fmt.Fprintf(stderr, "inkwell serve: unexpected argument %q: serve takes flags only (the database is --db PATH)\n", fs.Arg(0))
		return 2
	}
	if err := cfg.life.check(); err != nil {
		fmt.Fprintf(stderr, "inkwell serve: %v\n", err)
		return 2
	}
	if *cfg.concurrency < 1 {
		fmt.Fprintf(stderr, "inkwell serve: --concurrency must be at least 1, not %d\n", *cfg.concurrency)
		return 2
	}
	if err := cfg.webhooks.check(); err != nil {
		fmt.Fprintf(stderr, "inkwell serve: %v\n", err)
		return 2
	}
	if err := cfg.checkDurations(); err != nil {
		fmt.Fprintf(stderr, "inkwell serve: %v\n", err)
		return 2
	}
	if err := cfg.checkConfigFlags(fs); err != nil {
		fmt.Fprintf(stderr, "inkwell serve: %v\n", err)
		return 2
	}
	if err := store.ValidateLane(*cfg.lane); err != nil {
		fmt.Fprintf(stderr, "inkwell serve: %s\n", inkwell.ErrorMessage(err))
		return 2
	}
	if *cfg.config != "" { // a bad file is a usage error, refused before the database is made
		var err error
		if cfg.catalog, err = catalog.Load(*cfg.config); err != nil {
			fmt.Fprintf(stderr, "inkwell serve: %v\n", err)
			return 2
		}
	}
	if err := errors.Join(cfg.provider.checkLimits(), cfg.provider.checkOpenAI()); err != nil {
		fmt.Fprintf(stderr, "inkwell serve: %v\n", err)
		return 2
	}
	if err := checkAddr(*cfg.addr); err != nil {
		fmt.Fprintf(stderr, "inkwell serve: %v\n", err)
		return 2
	}
	if _, err := checkAuthMode(*cfg.auth, *cfg.addr); err != nil { // a bad --auth, or off beyond loopback: OpenMain would refuse it too, but it is a usage error
		fmt.Fprintf(stderr, "inkwell serve: %s\n", inkwell.ErrorMessage(err))
		return 2
	}
	log, err := cfg.log.logger(stderr)
	if err != nil {
		return fail(stderr, "serve", err)
	}
	if err := crashpoint.ArmFromEnv(); err != nil {
		return fail(stderr, "serve", err)
	}
	if err := serve(ctx, cfg, log); err != nil {
		attrs := []any{"err", err}
		if inkwell.ErrorCode(err) == inkwell.EINVALID {
			attrs = []any{"err", inkwell.ErrorMessage(err)} // the words, without the code's "invalid:"
		}
		if inkwell.ErrorCode(err) == inkwell.EUNAVAILABLE {
			// "busy" alone does not say who: name the process holding the
			// SQLite write lock, stopped or not.
			if h := store.SQLiteWriteLockHolder(*cfg.db); h != "" {
				attrs = append(attrs, "write_lock_held_by", h+": inspect it (ps -o pid,stat,wchan:32,cmd -p PID); once it ends or lets go, start serve again")
			}
		}
		log.Error("serve stopped", attrs...)
		return 1
	}
	return 0
}

// checkDurations refuses a zero or negative interval, which would
// otherwise silently mean the default (or spin).
func (c serveConfig) checkDurations() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--grace", *c.grace}, {"--heartbeat", *c.heartbeat}, {"--poll", *c.poll}, {"--rescue-interval", *c.rescue}} {
		if d.v <= 0 {
			return fmt.Errorf("%s must be positive, not %s", d.name, d.v)
		}
	}
	return nil
}

// checkConfigFlags refuses --sync-wait of zero or less, and --config
// beside a flag that defines the one provider a config file replaces.
func (c serveConfig) checkConfigFlags(fs *flag.FlagSet) error {
	if *c.syncWait <= 0 {
		return fmt.Errorf("--sync-wait must be positive, not %s", *c.syncWait)
	}
	if *c.config == "" {
		return nil
	}
	var clash []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "provider", "provider-url", "model", "provider-timeout", "provider-rpm", "provider-tpm", "provider-micros-per-token", "sim-latency", "provider-honours-keys":
			clash = append(clash, "--"+f.Name)
		}
	})
	if len(clash) > 0 {
		return fmt.Errorf("--config %s defines the providers and models; %s would be ignored: set it in the file's [[provider]] instead", *c.config, strings.Join(clash, ", "))
	}
	return nil
}

// routes is serve's models and providers: from --config when set, else the
// one provider of the flags.
func (c serveConfig) routes(reg prometheus.Registerer, log *slog.Logger) (*Routes, inkwell.Provider, worker.Limiter, error) {
	if c.catalog != nil {
		r, err := configRoutes(c.catalog, log, reg)
		return r, nil, nil, err
	}
	c.provider.metrics, c.provider.log = reg, log
	prov, err := c.provider.build()
	if err != nil {
		return nil, nil, nil, err
	}
	lim, err := c.provider.limiter()
	if err != nil {
		return nil, nil, nil, err
	}
	return nil, prov, lim, nil
}

// serve builds the providers from --config or the flags and runs one Main
// until ctx ends or the lane stops.
func serve(ctx context.Context, cfg serveConfig, log *slog.Logger) error {
	reg := newRegistry()
	routes, prov, lim, err := cfg.routes(reg, log)
	if err != nil {
		return err
	}
	name := *cfg.provider.kind
	if routes != nil {
		name = "config " + *cfg.config
	}
	m, err := OpenMain(ctx, MainConfig{
		DB: *cfg.db, Addr: *cfg.addr, Lane: *cfg.lane, Synchronous: *cfg.synchronous,
		Grace: *cfg.grace, Heartbeat: *cfg.heartbeat, Poll: *cfg.poll, Rescue: *cfg.rescue, Concurrency: *cfg.concurrency,
		Provider: prov, ProviderName: name, Limiter: lim, Routes: routes, SyncWait: *cfg.syncWait, Registry: reg, Logger: log,
		Retry: cfg.life.policy(*cfg.provider.kind), Retention: *cfg.life.retention, MaxQueued: *cfg.life.maxQueued,
		Auth: *cfg.auth, Webhooks: cfg.webhooks.config(),
	})
	if err != nil {
		return err
	}
	defer m.Close()
	return m.Run(ctx)
}

// MainConfig is what one `inkwell serve` runs with: its flags as values,
// and the provider built from them.
type MainConfig struct {
	DB, Addr, Lane, Synchronous    string
	Grace, Heartbeat, Poll, Rescue time.Duration
	Concurrency                    int // provider calls in flight at once (default 1)
	Provider                       inkwell.Provider
	ProviderName                   string // for the log
	// Routes, when set, is the models and providers of a config file
	// (routes.go); Provider and Limiter are then unused. nil: the one
	// Provider serves any model.
	Routes    *Routes
	SyncWait  time.Duration        // POST /v1/chat/completions' wait (0: api.DefaultSyncWait)
	Limiter   worker.Limiter       // the provider's limits and 429 pauses (nil: none)
	Registry  *prometheus.Registry // nil: a new one
	Logger    *slog.Logger         // nil discards
	Retry     worker.RetryPolicy   // automatic retry (zero: none)
	Retention time.Duration        // prune finished jobs older than this (0: keep everything)
	MaxQueued int                  // admission: refuse new jobs past this many queued (0: no limit)
	Auth      string               // --auth: auto (""), required or off (serve_auth.go)
	Webhooks  webhook.Config       // the webhook sender (webhooks_serve.go; zero: defaults)
}

// Main is one `inkwell serve`: the store, the lane, the HTTP API and the
// metrics, wired in one place. OpenMain it, Run it, Close it; the command
// and the in-process tests use it alike.
type Main struct {
	cfg     MainConfig
	log     *slog.Logger
	st      *store.Store
	lane    *worker.Lane
	srv     *api.Server
	metrics *metrics.Metrics
	ln      net.Listener
	waits   *jobwait.Hub // long-polls' waits, woken by every end (docs/client.md)
	// webhooks sends webhook deliveries (webhooks_serve.go).
	webhooks *webhook.Sender
}

// OpenMain opens (and migrates) the database, takes the lane's lock and
// listens. The lock comes before the listener: a process refused its lane
// never serves, so it accepts nothing and changes nothing.
func OpenMain(ctx context.Context, cfg MainConfig) (*Main, error) {
	if err := store.ValidateLane(cfg.Lane); err != nil {
		return nil, err
	}
	if cfg.Registry == nil {
		cfg.Registry = newRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Main{cfg: cfg, log: cfg.Logger, waits: jobwait.New()}
	auth, err := checkAuthMode(cfg.Auth, cfg.Addr)
	if err != nil {
		return nil, err
	}
	// The address is tried before the database is opened: a port in use
	// (the common mistake: a second serve) is refused without creating or
	// migrating a file. The listener that serves is opened after the lane
	// lock, below; this one is closed at once.
	if probe, err := net.Listen("tcp", cfg.Addr); err != nil {
		return nil, listenError(cfg.Addr, err)
	} else {
		probe.Close()
	}
	if m.st, err = store.Open(ctx, cfg.DB, store.Options{Synchronous: cfg.Synchronous, Logger: m.log}); err != nil {
		return nil, err
	}
	if err := checkAuthTokens(ctx, m.st, auth, cfg.Addr, cfg.DB, m.log); err != nil {
		m.Close()
		return nil, err
	}
	m.metrics = metrics.New(cfg.Registry, m.st)
	m.webhooks = m.newWebhookSender()
	if cfg.Routes == nil {
		cfg.Routes = singleRoutes(cfg.ProviderName, cfg.Provider, cfg.Limiter, cfg.Retry.ProviderHonoursKeys)
	}
	m.lane = worker.New(m.st, worker.Config{
		Name: cfg.Lane, Router: cfg.Routes, Logger: m.log,
		Heartbeat: cfg.Heartbeat, Poll: cfg.Poll, Grace: cfg.Grace, Rescue: cfg.Rescue, Concurrency: cfg.Concurrency,
		Observer: m.metrics, Retry: cfg.Retry, OnEnded: func(id int64) { m.waits.Wake(id); m.webhooks.Wake() },
		OnRequeued: func(id int64) { m.waits.Wake(id) },
		// A lane that stops on its own drains its answers, claiming
		// nothing: no more work should be sent here.
		OnStopping: func(error) { m.srv.Stopping() },
	})
	cfg.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "inkwell_answers_waiting",
		Help: "Provider answers the lane holds and has not stored yet because the database is busy, locked or full; they are retried until stored.",
	}, func() float64 { return float64(m.lane.AnswersWaiting()) }))
	cfg.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "inkwell_long_polls_waiting",
		Help: "Requests waiting in GET /v1/jobs/{id}?wait= for their job to end.",
	}, func() float64 { return float64(m.waits.Waiters()) }))
	m.srv = api.New(api.Config{Store: m.st, Logger: m.log, OnAccepted: m.lane.Wake, OnCancelled: m.lane.CancelAttempt, Metrics: m.metrics, Gatherer: cfg.Registry,
		LoopbackOnly: listensOnLoopback(cfg.Addr), MaxQueued: cfg.MaxQueued, Auth: auth, Waits: m.waits,
		Catalog: cfg.Routes.Catalog, WorstCase: cfg.Routes.WorstCase, SyncWait: cfg.SyncWait})
	if err := m.lane.Lock(ctx); err != nil {
		m.Close()
		return nil, err
	}
	if m.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
		m.Close()
		return nil, listenError(cfg.Addr, err)
	}
	return m, nil
}

// listenError is a failure to listen on addr, with what to do about it.
func listenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen %s: %w: another process (another inkwell serve?) listens there; stop it, or pick another address with --addr", addr, err)
	}
	return fmt.Errorf("listen %s: %w (see --addr)", addr, err)
}

// Addr is the address the HTTP server listens on (with the port chosen
// when the configured one was 0).
func (m *Main) Addr() string { return m.ln.Addr().String() }

// Run serves HTTP, runs startup recovery (readyz answers 200 after it),
// and runs the lane until ctx ends (a graceful stop: no new claims, the
// running call gets the grace period, its outcome is recorded) or the lane
// stops on its own (its error is returned).
func (m *Main) Run(ctx context.Context) error {
	// Bodies are small (16 KiB) and every handler is one short transaction:
	// these bound what a slow or stuck client can hold.
	httpSrv := &http.Server{Handler: m.srv, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	httpSrv.RegisterOnShutdown(m.waits.Close) // long-polls answer at once with the job as it is
	stopWatch := m.watchEnded(ctx)
	defer stopWatch()
	httpDone := make(chan error, 1)
	go func() { httpDone <- httpSrv.Serve(m.ln) }()
	m.log.Info("http listening", "addr", m.Addr(), "db", store.RedactDSN(m.cfg.DB), "lane", m.cfg.Lane, "provider", m.cfg.ProviderName,
		"concurrency", max(1, m.cfg.Concurrency), "auth", authModeName(m.cfg.Auth))

	rep, err := m.lane.Open(ctx)
	if err != nil {
		shutdownHTTP(httpSrv, m.log)
		return err
	}
	m.metrics.Recovered(rep)
	logRecovered(ctx, m.st, rep, m.log)
	m.srv.SetReady(true)
	m.log.Info("ready", "lane", m.cfg.Lane)
	stopRetention := m.startRetention(ctx) // --retention: prunes old finished jobs (retention.go)
	defer stopRetention()
	stopWebhooks := m.startWebhooks(ctx) // sends webhook deliveries (webhooks_serve.go)
	defer stopWebhooks()

	laneCtx, stopLane := context.WithCancel(ctx)
	defer stopLane()
	laneErr := make(chan error, 1)
	go func() { laneErr <- m.lane.Run(laneCtx) }()
	var httpErr error
	select {
	case <-ctx.Done():
		m.log.Info("shutdown requested: no new claims; waiting for the running call", "grace", m.cfg.Grace.String())
		m.srv.Stopping() // /readyz 503 "stopping"; waiters on jobs not running answer now
	case httpErr = <-httpDone:
		httpErr = fmt.Errorf("http server: %w", httpErr)
		stopLane()
	case err := <-laneErr:
		shutdownHTTP(httpSrv, m.log)
		return err
	}
	err = <-laneErr
	shutdownHTTP(httpSrv, m.log)
	return errors.Join(httpErr, err)
}

// watchEnded wakes long-polls for jobs ended by other processes (another
// lane, inkwell cancel) until the returned stop is called: through a
// graceful stop too, while the HTTP server still answers.
func (m *Main) watchEnded(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.st.WatchEnded(ctx, store.WatchParams{Wake: func(ids []int64) { m.waits.Wake(ids...) },
			WakeAll: m.waits.WakeAll, Waiting: m.waits.IDs})
	}()
	return func() { cancel(); <-done }
}

// Close releases the lane's lock, closes the listener if Run never served
// it, and closes the database.
func (m *Main) Close() error {
	var errs []error
	if m.lane != nil {
		errs = append(errs, m.lane.Close())
	}
	if m.ln != nil {
		if err := m.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if m.st != nil {
		errs = append(errs, m.st.Close())
	}
	return errors.Join(errs...)
}

func shutdownHTTP(srv *http.Server, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
}

// listensOnLoopback reports whether addr binds only a loopback address.
// checkAddr refuses an --addr that is not host:port before anything is
// opened: "http://127.0.0.1:8080" would otherwise be taken for an address
// beyond loopback, and refused for the wrong reason after the database was
// made.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			err = fmt.Errorf("port %q is not a number from 0 to 65535", port)
		}
	}
	if err != nil {
		return fmt.Errorf("--addr %q is not host:port (127.0.0.1:8080; :8080 for every interface): %v", addr, err)
	}
	return nil
}

func listensOnLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
