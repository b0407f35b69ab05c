package providersim

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"
)

// Config configures a simulator.
type Config struct {
	// Addr is where ListenAndServe listens, such as "127.0.0.1:9090".
	Addr string
	// LedgerPath is the SQLite ledger file, created when missing. Required.
	LedgerPath string
	// Latency is added to every answer (chat completion or message) before
	// it is billed.
	Latency time.Duration
	// FailRate is the chance, 0 to 1, that a call is answered 500 (529
	// overloaded on /v1/messages), unbilled.
	FailRate float64
	// HangRate is the chance, 0 to 1, that a call is never answered, unbilled,
	// until the client goes away or the server stops.
	HangRate float64
	// Seed seeds the draws of FailRate and HangRate, so a run reproduces.
	Seed int64
	// RPM and TPM, when positive, are the requests and tokens per minute
	// the simulator enforces (limits.go): a call past either is answered
	// 429 with a Retry-After, takes nothing from the allowance and is not
	// billed. A call's tokens are its answer's usage.
	RPM, TPM int
	// Logger receives one line per call; discarded when nil. Never a prompt
	// or a header.
	Logger *slog.Logger
	// NowFunc is the clock of the ledger; time.Now when nil.
	NowFunc func() time.Time
}

// Server is a running simulator: New, then Serve (or ListenAndServe), then
// Close.
type Server struct {
	cfg   Config
	db    *sql.DB
	bills *billing // the ledger's one writer: group commit (billing.go)
	log   *slog.Logger

	mu  sync.Mutex // guards rng: the draws must come in a reproducible order
	rng *rand.Rand

	limits *limits // RPM and TPM

	// stopping is closed when the server stops, to release hung and waiting
	// calls that would otherwise hold Shutdown open.
	stopping chan struct{}
	stopOnce sync.Once
}

// New checks cfg and opens (or creates) the ledger.
func New(cfg Config) (*Server, error) {
	if cfg.LedgerPath == "" {
		return nil, errors.New("provider simulator: ledger path is required")
	}
	for name, rate := range map[string]float64{"fail rate": cfg.FailRate, "hang rate": cfg.HangRate} {
		if rate < 0 || rate > 1 {
			return nil, fmt.Errorf("provider simulator: %s %v: want 0 to 1", name, rate)
		}
	}
	if cfg.RPM < 0 || cfg.TPM < 0 {
		return nil, fmt.Errorf("provider simulator: rpm %d, tpm %d: want 0 (no limit) or more", cfg.RPM, cfg.TPM)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	db, err := openLedger(cfg.LedgerPath)
	if err != nil {
		return nil, fmt.Errorf("provider simulator: %w", err)
	}
	return &Server{
		cfg:      cfg,
		db:       db,
		bills:    newBilling(db),
		log:      cfg.Logger.With("component", "provider-sim"),
		rng:      rand.New(rand.NewPCG(uint64(cfg.Seed), 0x696e6b77656c6c)), // "inkwell"
		limits:   newLimits(cfg.RPM, cfg.TPM, cfg.NowFunc()),
		stopping: make(chan struct{}),
	}, nil
}

// Handler returns the simulator's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.completions)
	mux.HandleFunc("POST /v1/messages", s.messages)
	mux.HandleFunc("GET /ledger", s.ledger)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return mux
}

// ListenAndServe listens on cfg.Addr and serves until ctx ends.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("provider simulator: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve answers on ln until ctx ends, then stops: hung and waiting calls are
// cut (their clients see a dropped connection, as from a dying provider),
// the rest finish within five seconds. It returns nil after a clean stop.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var fresh freshConns
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnState:         fresh.track,
	}
	s.log.InfoContext(ctx, "listening", "addr", ln.Addr().String(), "ledger", s.cfg.LedgerPath)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("provider simulator: %w", err)
	case <-ctx.Done():
	}
	s.stop()
	ln.Close()
	fresh.close()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutCtx)
	<-served
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("provider simulator: shutdown: %w", err)
	}
	return nil
}

// Close releases waiting calls, stops the ledger's writer once the group
// it is committing, if any, is committed and answered (a call whose bill
// it had not taken yet is answered 500, unbilled), and closes the ledger.
// Call it after Serve has returned.
func (s *Server) Close() error {
	s.stop()
	s.bills.close()
	return s.db.Close()
}

func (s *Server) stop() { s.stopOnce.Do(func() { close(s.stopping) }) }

// outcome is what failure injection decided for one call.
type outcome int

const (
	answer outcome = iota
	fail
	hang
)

// decide draws once per call, whatever the rates, so the sequence of
// outcomes depends only on Seed and the order of calls.
func (s *Server) decide() outcome {
	s.mu.Lock()
	x := s.rng.Float64()
	s.mu.Unlock()
	switch {
	case x < s.cfg.FailRate:
		return fail
	case x < s.cfg.FailRate+s.cfg.HangRate:
		return hang
	}
	return answer
}

// freshConns tracks connections that have not read a byte yet. HTTP clients
// dial spare connections and park them unused; Shutdown would wait five
// seconds for each before treating it as idle, so Serve closes them itself
// once the listener is closed. No handler has run on such a connection.
type freshConns struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (f *freshConns) track(c net.Conn, state http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if state != http.StateNew {
		delete(f.conns, c)
		return
	}
	if f.conns == nil {
		f.conns = make(map[net.Conn]struct{})
	}
	f.conns[c] = struct{}{}
}

func (f *freshConns) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		c.Close()
	}
}
