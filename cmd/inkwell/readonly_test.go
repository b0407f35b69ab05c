package main

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestServe_ReadOnlyDatabaseFailsBeforeListening: a database serve may
// read but not write is refused at start, saying so, before serve
// listens; it used to listen, answer /healthz and fail at its first write.

// PostgreSQL: a database whose new transactions are read-only (as on a
// hot standby).
func TestServe_ReadOnlyPostgresFailsBeforeListening(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var name string
	if err := db.QueryRowContext(t.Context(), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `ALTER DATABASE "`+name+`" SET default_transaction_read_only = on`); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	m, err := OpenMain(t.Context(), MainConfig{DB: dsn, Addr: addr, Lane: "local", Grace: time.Second, Heartbeat: time.Second,
		Poll: time.Second, Rescue: time.Second, Provider: provider.NewSim(0), ProviderName: "sim"})
	if err == nil {
		m.Close()
		t.Fatal("OpenMain on a read-only database succeeded")
	}
	if !strings.Contains(err.Error(), "read-only") {
		t.Errorf("OpenMain: %v; want it to say the database is read-only", err)
	}
	assertNotListening(t, addr)
}

// SQLite: a file (and directory) the serving user may not write. The
// test runs as root, whom file modes do not stop, so serve runs as
// nobody there.
func TestServe_ReadOnlySQLiteFailsBeforeListening(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "inkwell-readonly-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "inkwell.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Readable by everyone, writable by none but root.
	for p, mode := range map[string]os.FileMode{dir: 0o555, path: 0o444, filepath.Dir(inkwellBin): 0o755} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, inkwellBin, "serve", "--db", path, "--addr", addr)
	cmd.Env = childEnv()
	cmd.SysProcAttr = ChildProcAttr()
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("serve on a read-only file: %v; want exit 1\n%s", err, out)
	}
	if !strings.Contains(string(out), "read-only") || strings.Contains(string(out), "http listening") {
		t.Errorf("serve on a read-only file: want it to say read-only before listening:\n%s", out)
	}
}

func assertNotListening(t *testing.T, addr string) {
	t.Helper()
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("something listens on %s", addr)
	}
}
