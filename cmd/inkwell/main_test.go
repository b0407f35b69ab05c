package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestMain_InProcess runs `inkwell serve` as a Main in this process: it
// serves, runs a job to done, refuses a second Main on the same lane
// (which listens on nothing), and stops gracefully on its context.
func TestMain_InProcess(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	var logs lockedBuffer
	cfg := MainConfig{DB: db, Addr: "127.0.0.1:0", Lane: "local", Grace: 5 * time.Second, Heartbeat: 100 * time.Millisecond,
		Poll: time.Second, Rescue: time.Second, Provider: provider.NewSim(0), ProviderName: "sim",
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	m, err := OpenMain(t.Context(), cfg)
	if err != nil {
		t.Fatalf("OpenMain: %v", err)
	}
	defer m.Close()
	url, stop := runMain(t, m)

	id := submit(t, url, "in-process", `{"prompt":"a haiku about ink"}`).Job.ID
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	storetest.WaitFor(t, waitLimit, "job done", func() bool { return show(t, st, id).Job.Status == inkwell.StatusDone })

	second := cfg
	second.Addr = freeAddr(t)
	if m2, err := OpenMain(t.Context(), second); err == nil {
		m2.Close()
		t.Fatal("a second Main on the same lane opened")
	} else if inkwell.ErrorCode(err) != inkwell.ELANEHELD {
		t.Errorf("second OpenMain: %v, want %s", err, inkwell.ELANEHELD)
	}
	if ln, err := net.Listen("tcp", second.Addr); err != nil {
		t.Errorf("the refused Main still holds %s: %v", second.Addr, err)
	} else {
		ln.Close()
	}

	if err := stop(); err != nil {
		t.Errorf("Run after a stop = %v, want nil", err)
	}
	if !strings.Contains(logs.String(), `msg="lane stopped" component=worker lane=local reason=shutdown`) {
		t.Errorf("no clean lane stop in the log:\n%s", logs.String())
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runMain runs m until the test stops it, waits until it answers /readyz,
// and returns its URL and stop, which ends Run and returns its error.
func runMain(t *testing.T, m *Main) (url string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ran := make(chan error, 1)
	go func() { ran <- m.Run(ctx) }()
	url = "http://" + m.Addr()
	storetest.WaitFor(t, waitLimit, "ready", func() bool {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url, func() error {
		cancel()
		select {
		case err := <-ran:
			return err
		case <-time.After(waitLimit):
			t.Fatalf("Run did not return within %v of its stop", waitLimit)
			return nil
		}
	}
}
