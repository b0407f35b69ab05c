package drill

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is one real process the drill started: a provider simulator or an
// inkwell serve. Its stdout and stderr go to a log file in the work dir;
// the drill reads them as they come to learn the address it listens on and
// whether it announced a crash point before dying.
type child struct {
	name    string // "serve#2", "provider-sim"
	cmd     *exec.Cmd
	logPath string
	url     string // the base URL it serves, once known
	started time.Time
	exited  chan struct{} // closed once the process is reaped
	drained chan struct{} // closed once all its output is read
	state   *os.ProcessState

	mu    sync.Mutex
	addrs map[string]string // log message -> its "addr" attribute
	crash string            // the "crashpoint: ..." line, if printed
	tail  []string          // the last lines, for error messages
}

const tailLines = 12

// startChild starts bin with args and env. The child gets its own process
// group and, on Linux, SIGKILL when the drill dies, so no child outlives a
// drill that is itself killed.
func startChild(name, bin string, args, env []string, logPath string) (*child, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: log file: %w", name, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: pipe: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = procAttr()
	c := &child{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{}), drained: make(chan struct{}), addrs: map[string]string{}}
	fmt.Fprintf(logFile, "# %s: %s %s\n", name, bin, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c.started = time.Now()
	w.Close() // the child holds the write end now; EOF comes when it dies
	go c.read(r, logFile)
	go func() {
		_ = cmd.Wait() // the exit is read from ProcessState, not the error
		c.state = cmd.ProcessState
		close(c.exited)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// read copies the child's output to its log file and notes the lines the
// drill waits for: JSON log lines with an "addr", and the crash point's
// own announcement just before it sends itself SIGKILL.
func (c *child) read(r io.ReadCloser, logFile *os.File) {
	defer close(c.drained)
	defer r.Close()
	defer logFile.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(logFile, line)
		c.note(line)
	}
}

func (c *child) note(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tail = append(c.tail, line)
	if len(c.tail) > tailLines {
		c.tail = c.tail[len(c.tail)-tailLines:]
	}
	if strings.HasPrefix(line, "crashpoint: ") {
		c.crash = line
		return
	}
	var rec struct {
		Msg  string `json:"msg"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal([]byte(line), &rec) == nil && rec.Addr != "" {
		if _, seen := c.addrs[rec.Msg]; !seen {
			c.addrs[rec.Msg] = rec.Addr
		}
	}
}

// waitAddr waits until the child logs msg with an "addr" attribute and
// returns that address.
func (c *child) waitAddr(ctx context.Context, msg string, timeout time.Duration) (string, error) {
	err := c.poll(ctx, timeout, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.addrs[msg] != ""
	})
	if err != nil {
		return "", fmt.Errorf("%s did not log %q with its address: %w", c.name, msg, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs[msg], nil
}

// errExited is returned by poll when the child died while being waited on.
var errExited = errors.New("process exited")

// poll checks cond every 10ms until it holds, the child exits, timeout
// passes or ctx ends.
func (c *child) poll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return nil
		}
		select {
		case <-c.exited:
			if cond() {
				return nil
			}
			return fmt.Errorf("%w (%s)", errExited, c.exitText())
		case <-deadline.C:
			return fmt.Errorf("timed out after %s", timeout)
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
}

// waitExit waits up to timeout for the child to exit by itself.
func (c *child) waitExit(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.exited:
		return nil
	case <-t.C:
		return fmt.Errorf("%s (pid %d) still running after %s", c.name, c.pid(), timeout)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (c *child) alive() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL, as a power cut of the process would, and reaps it.
func (c *child) kill() error {
	if !c.alive() {
		return nil
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	return c.waitExit(context.Background(), 10*time.Second)
}

// stop asks the child to stop (SIGTERM) and waits up to grace; then kills
// it. It returns an error when the child had to be killed or exited non-zero.
func (c *child) stop(grace time.Duration) error {
	if !c.alive() {
		return fmt.Errorf("%s had already exited: %s", c.name, c.exitText())
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	if err := c.waitExit(context.Background(), grace); err != nil {
		c.kill()
		return fmt.Errorf("%s ignored SIGTERM for %s and was killed", c.name, grace)
	}
	if !c.state.Success() {
		return fmt.Errorf("%s stopped with %s; last lines:\n%s", c.name, c.exitText(), c.tailText())
	}
	return nil
}

// killedBySIGKILL reports whether the child is dead of SIGKILL.
func (c *child) killedBySIGKILL() bool {
	if c.alive() || c.state == nil {
		return false
	}
	ws, ok := c.state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// crashLine is what the crash point printed before the kill, or "". It
// waits (briefly) for the dead child's last output to be read.
func (c *child) crashLine() string {
	select {
	case <-c.drained:
	case <-time.After(2 * time.Second):
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crash
}

func (c *child) exitText() string {
	if c.alive() || c.state == nil {
		return "still running"
	}
	if ws, ok := c.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("exit status %d", c.state.ExitCode())
}

func (c *child) tailText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return "    " + strings.Join(c.tail, "\n    ")
}

// procs is every child of one scenario, so that none outlives it.
type procs struct {
	mu   sync.Mutex
	list []*child
}

func (p *procs) add(c *child) {
	p.mu.Lock()
	p.list = append(p.list, c)
	p.mu.Unlock()
}

// killAll kills every child still alive and reaps it.
func (p *procs) killAll() {
	p.mu.Lock()
	list := append([]*child(nil), p.list...)
	p.mu.Unlock()
	for _, c := range list {
		c.kill()
	}
}
