// Package simtest starts a real provider simulator on loopback for tests of
// any package that calls a provider: the outside world, not a mock.
package simtest

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/provider/providersim"
)

// Sim is a simulator serving on 127.0.0.1 for the length of one test.
type Sim struct {
	URL        string // base URL, such as "http://127.0.0.1:40123"
	LedgerPath string
	Server     *providersim.Server
}

// MustStart starts a simulator with cfg on 127.0.0.1:0 and stops it in
// t.Cleanup. An empty LedgerPath gets a file in t.TempDir(); a nil Logger
// writes to the test's output.
func MustStart(t testing.TB, cfg providersim.Config) *Sim {
	t.Helper()
	if cfg.LedgerPath == "" {
		cfg.LedgerPath = filepath.Join(t.TempDir(), "ledger.db")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	srv, err := providersim.New(cfg)
	if err != nil {
		t.Fatalf("start provider simulator: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		t.Fatalf("start provider simulator: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("provider simulator serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("provider simulator did not stop within 10s")
		}
		if err := srv.Close(); err != nil {
			t.Errorf("close provider simulator: %v", err)
		}
	})
	return &Sim{URL: "http://" + ln.Addr().String(), LedgerPath: cfg.LedgerPath, Server: srv}
}

// MustLedger returns the simulator's ledger as GET /ledger reports it.
func (s *Sim) MustLedger(t testing.TB) providersim.Ledger {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := providersim.FetchLedger(ctx, http.DefaultClient, s.URL)
	if err != nil {
		t.Fatalf("ledger: %v", err)
	}
	return l
}

// ResetAfterRead starts a provider on 127.0.0.1 that reads each request in
// full and then resets the connection (SO_LINGER 0) instead of answering:
// the request arrived, and may have been billed, what the simulator's
// failure modes cannot show. It returns its URL and a count of the
// requests it read; it stops in t.Cleanup.
func ResetAfterRead(t testing.TB) (url string, read func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				if _, err := io.Copy(io.Discard, req.Body); err == nil {
					n.Add(1)
				}
			}
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return "http://" + ln.Addr().String(), func() int { return int(n.Load()) }
}
