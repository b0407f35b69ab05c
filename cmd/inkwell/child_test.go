package main

import (
	"bufio"
	"bytes"
	"net/http"
	"os/exec"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Child is a running `inkwell serve` child process, for this package's
// tests and (exported through the test binary) package main_test's.
type Child struct {
	URL string // http://host:port it listens on

	cmd    *exec.Cmd
	limit  time.Duration
	mu     sync.Mutex
	stderr bytes.Buffer
	exited chan struct{}
	err    error // Wait's result, once exited is closed
}

var listeningRE = regexp.MustCompile(`msg="http listening" addr=(\S+)`)

// StartChild runs bin with args (which must make it serve HTTP, e.g.
// "serve --addr 127.0.0.1:0 …") and env, and waits until it answers
// /readyz with 200 (recovery done). limit bounds every wait. The child is
// SIGKILLed at cleanup, and dies with the test binary (Pdeathsig).
func StartChild(t *testing.T, bin string, env []string, limit time.Duration, args ...string) *Child {
	t.Helper()
	c := &Child{cmd: exec.Command(bin, args...), limit: limit, exited: make(chan struct{})}
	c.cmd.Env = env
	c.cmd.SysProcAttr = ChildProcAttr()
	pipe, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", args, err)
	}
	addr := make(chan string, 1)
	go c.read(pipe, addr)
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.exited
		if t.Failed() {
			t.Logf("%v (pid %d) stderr:\n%s", args, c.Pid(), c.Log())
		}
	})
	select {
	case a := <-addr:
		c.URL = "http://" + a
	case <-c.exited:
		t.Fatalf("%v exited before listening: %v\n%s", args, c.err, c.Log())
	case <-time.After(limit):
		t.Fatalf("%v did not listen within %v:\n%s", args, limit, c.Log())
	}
	storetest.WaitFor(t, limit, "serve ready", func() bool {
		resp, err := http.Get(c.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return c
}

// read keeps the child's stderr and reports its listening address once.
func (c *Child) read(pipe interface{ Read([]byte) (int, error) }, addr chan<- string) {
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		line := sc.Text()
		c.mu.Lock()
		c.stderr.WriteString(line + "\n")
		c.mu.Unlock()
		if m := listeningRE.FindStringSubmatch(line); m != nil {
			select {
			case addr <- m[1]:
			default:
			}
		}
	}
	c.err = c.cmd.Wait()
	close(c.exited)
}

// Log is everything the child wrote to stderr so far.
func (c *Child) Log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Signal sends sig and returns the child's exit error once it is gone.
func (c *Child) Signal(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.exited:
		return c.err
	case <-time.After(c.limit):
		t.Fatalf("pid %d did not exit within %v of %v", c.Pid(), c.limit, sig)
		return nil
	}
}
