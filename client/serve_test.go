package client_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store/storetest"
)

// The client's tests run against real `inkwell serve` children on
// loopback, built once per run.

// limit bounds every wait for a child.
const limit = 60 * time.Second

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// inkwellBin builds ./cmd/inkwell once for the package's tests.
func inkwellBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "inkwell-client-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "inkwell")
		if out, err := exec.Command("go", "build", "-o", binPath, "../cmd/inkwell").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// server is one `inkwell serve` child.
type server struct {
	URL    string
	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	log    strings.Builder
}

var listening = regexp.MustCompile(`msg="http listening" addr=(\S+)`)

// startServe runs `inkwell serve --db db --addr addr args…` with env added
// and returns once it answers /readyz; it is SIGKILLed at cleanup.
func startServe(t *testing.T, db, addr string, env []string, args ...string) *server {
	t.Helper()
	args = append([]string{"serve", "--db", db, "--addr", addr, "--heartbeat", "100ms"}, args...)
	s := &server{cmd: exec.Command(inkwellBin(t), args...), exited: make(chan struct{})}
	s.cmd.Env = append(append(os.Environ(), "INKWELL_CRASH_AT="), env...)
	s.cmd.SysProcAttr = childAttr()
	pipe, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				got <- m[1]
			}
		}
		s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.exited
		if t.Failed() {
			t.Logf("serve %v log:\n%s", args, s.Log())
		}
	})
	select {
	case a := <-got:
		s.URL = "http://" + a
	case <-s.exited:
		t.Fatalf("serve exited before listening:\n%s", s.Log())
	case <-time.After(limit):
		t.Fatalf("serve did not listen within %v:\n%s", limit, s.Log())
	}
	storetest.WaitFor(t, limit, "serve ready", func() bool {
		resp, err := http.Get(s.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

// Log is what the child wrote to stderr so far.
func (s *server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// kill SIGKILLs the child and waits until it is gone.
func (s *server) kill(t *testing.T) {
	t.Helper()
	s.cmd.Process.Kill()
	s.waitExit(t)
}

// waitExit waits for the child to exit on its own (a crash point).
func (s *server) waitExit(t *testing.T) {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(limit):
		t.Fatalf("serve pid %d still running after %v", s.cmd.Process.Pid, limit)
	}
}

// addr is the host:port the child listens on (to restart on it).
func (s *server) addr() string { return strings.TrimPrefix(s.URL, "http://") }

// runInkwell runs a one-shot command (accounts, tokens) and returns stdout.
func runInkwell(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(inkwellBin(t), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("inkwell %v: %v\n%s", args, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
