package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/inkwell/inkwell/internal/store"
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

SIGTERM or SIGINT: stop claiming, let the running provider call finish
within --grace, record its outcome, mark the lane stopped, exit 0.

Environment: INKWELL_DB (default for --db), INKWELL_PROVIDER_KEY (the
openai provider's API key), INKWELL_CRASH_AT (arm a crash point; drills only).`

type serveConfig struct {
	db, addr, lane, synchronous *string
	grace, heartbeat, poll      *time.Duration
	rescue                      *time.Duration
	provider                    providerFlags
	log                         logFlags
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve", "[flags]", serveHelp, stdout, stderr)
	cfg := serveConfig{
		db:          dbFlag(fs),
		addr:        fs.String("addr", "127.0.0.1:8080", "HTTP listen address (loopback by default: there is no authentication yet)"),
		lane:        fs.String("lane", "local", "worker lane name; one process per lane"),
		synchronous: fs.String("synchronous", "FULL", "SQLite synchronous mode: FULL (every commit survives a power cut) or NORMAL (faster; a power cut may lose the last commits, a process crash loses nothing)"),
		grace:       fs.Duration("grace", 30*time.Second, "on shutdown, how long a running provider call may take to finish"),
		heartbeat:   fs.Duration("heartbeat", 2*time.Second, "how often the lane stamps its heartbeat and checks its lock"),
		rescue:      fs.Duration("rescue-interval", 2*time.Second, "PostgreSQL: how often the lane looks for other lanes proven dead (their lock is free) and closes their orphans"),
		poll:        fs.Duration("poll", time.Second, "how often an idle lane looks for jobs queued by other processes"),
		provider:    addProviderFlags(fs),
		log:         addLogFlags(fs),
	}
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if err := cfg.checkDurations(); err != nil {
		fmt.Fprintf(stderr, "inkwell serve: %v\n", err)
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
		log.Error("serve stopped", "err", err)
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

func serve(ctx context.Context, cfg serveConfig, log *slog.Logger) error {
	if err := store.ValidateLane(*cfg.lane); err != nil {
		return err
	}
	reg := newRegistry()
	cfg.provider.metrics, cfg.provider.log = reg, log
	prov, err := cfg.provider.build()
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, *cfg.db, store.Options{Synchronous: *cfg.synchronous, Logger: log})
	if err != nil {
		return err
	}
	defer st.Close()
	metrics := api.NewMetrics(reg, st)
	lane := worker.New(st, worker.Config{
		Name: *cfg.lane, Provider: prov, Logger: log,
		Heartbeat: *cfg.heartbeat, Poll: *cfg.poll, Grace: *cfg.grace, Rescue: *cfg.rescue,
		Observer: metrics,
	})
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "inkwell_answers_waiting",
		Help: "Provider answers the lane holds and has not stored yet because the database is busy, locked or full; they are retried until stored.",
	}, func() float64 { return float64(lane.AnswersWaiting()) }))
	srv := api.New(api.Config{Store: st, Logger: log, OnAccepted: lane.Wake, Metrics: metrics, Gatherer: reg,
		LoopbackOnly: listensOnLoopback(*cfg.addr)})
	// The lock comes first: a process refused its lane never serves, so it
	// accepts nothing and changes nothing.
	if err := lane.Lock(ctx); err != nil {
		return err
	}
	defer lane.Close()
	ln, err := net.Listen("tcp", *cfg.addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *cfg.addr, err)
	}
	// Bodies are small (16 KiB) and every handler is one short transaction:
	// these bound what a slow or stuck client can hold.
	httpSrv := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	httpDone := make(chan error, 1)
	go func() { httpDone <- httpSrv.Serve(ln) }()
	log.Info("http listening", "addr", ln.Addr().String(), "db", store.RedactDSN(*cfg.db), "lane", *cfg.lane, "provider", *cfg.provider.kind)

	rep, err := lane.Open(ctx)
	if err != nil {
		shutdownHTTP(httpSrv, log)
		return err
	}
	metrics.Recovered(rep)
	logRecovered(ctx, st, rep, log)
	srv.SetReady(true)
	log.Info("ready", "lane", *cfg.lane)

	laneCtx, stopLane := context.WithCancel(ctx)
	defer stopLane()
	laneErr := make(chan error, 1)
	go func() { laneErr <- lane.Run(laneCtx) }()
	var httpErr error
	select {
	case <-ctx.Done():
		log.Info("shutdown requested: no new claims; waiting for the running call", "grace", cfg.grace.String())
	case httpErr = <-httpDone:
		httpErr = fmt.Errorf("http server: %w", httpErr)
		stopLane()
	case err := <-laneErr:
		shutdownHTTP(httpSrv, log)
		return err
	}
	err = <-laneErr
	shutdownHTTP(httpSrv, log)
	return errors.Join(httpErr, err)
}

func shutdownHTTP(srv *http.Server, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
}

// listensOnLoopback reports whether addr binds only a loopback address.
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
