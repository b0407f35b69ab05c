package store_test

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestPostgres_Pooler puts a real PgBouncer between the lane and
// PostgreSQL. In transaction mode it would hand the lock's server session
// to other clients' transactions, so the lock would prove nothing: taking
// the lane is refused, naming the pooler. In session mode each client keeps
// its server session, and the lane lock works as it does directly.
func TestPostgres_Pooler(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"transaction", "session"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dsn := storetest.PostgresDSN(t)
			direct := storetest.MustOpen(t, dsn, store.Options{})
			pooled := storetest.MustOpen(t, startPgBouncer(t, dsn, mode), store.Options{NoMigrate: true})
			l, err := pooled.LockLane(t.Context(), "A")
			if mode == "session" {
				if err != nil {
					t.Fatalf("LockLane through a session-mode pool: %v", err)
				}
				defer l.Release()
				if _, err := direct.LockLane(t.Context(), "A"); inkwell.ErrorCode(err) != inkwell.ELANEHELD {
					t.Errorf("LockLane(A) directly while the pooled lane holds it = %v, want %s", err, inkwell.ELANEHELD)
				}
				return
			}
			if inkwell.ErrorCode(err) != inkwell.EINVALID || !strings.Contains(err.Error(), "pooler in transaction mode") {
				t.Fatalf("LockLane through a transaction-mode pool = %v, want %s naming the pooler", err, inkwell.EINVALID)
			}
			// The refused lock was let go: the lane is free for a direct holder.
			l, err = direct.LockLane(t.Context(), "A")
			if err != nil {
				t.Fatalf("LockLane(A) directly after the refusal: %v", err)
			}
			l.Release()
		})
	}
}

// startPgBouncer runs PgBouncer in front of dsn's server in the given pool
// mode, as the postgres user (it refuses to run as root), and returns dsn
// pointed at it. Without pgbouncer on this machine the test skips, except in
// CI, where .ci/run installs it and its absence is a failure.
func startPgBouncer(t *testing.T, dsn, mode string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"} {
			if _, err := os.Stat(p); err == nil {
				bin = p
			}
		}
	}
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("pgbouncer is not installed (apt-get install pgbouncer); CI needs it for the pooler test")
		}
		t.Skip("pgbouncer not installed: apt-get install pgbouncer to run the pooler test")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "inkwell-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755) // readable by the postgres user
	user := u.User.Username()
	cfg := fmt.Sprintf(`[databases]
* = host=%s port=%s user=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
auth_type = any
pool_mode = %s
unix_socket_dir =
`, u.Hostname(), u.Port(), user, port, mode)
	path := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", bin, path)
	if os.Getuid() != 0 {
		cmd = exec.Command(bin, path)
	}
	logPath := filepath.Join(dir, "pgbouncer.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	out := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(pgWait)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("pgbouncer exited: %s", out())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer not listening on %s within %v: %s", addr, pgWait, out())
		}
	}
	u.Host = addr
	return u.String()
}
