package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	cli "github.com/inkwell/inkwell/cmd/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestCLI_ReadCommandsUnderAWriteLock: while another process holds
// SQLite's write lock (BEGIN IMMEDIATE, as a stuck writer would), the
// operator's read-only commands still answer: they are how the holder is
// diagnosed. Opening the database used to set auto_vacuum, which waits
// for the write lock, so they failed as busy after the busy timeout.
func TestCLI_ReadCommandsUnderAWriteLock(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	storetest.MustQueue(t, st, "default", "k", 1)
	st.Close()
	bin := lanesBinary(t)
	startWriteLockHolder(t, db)
	for _, args := range [][]string{
		{"status"}, {"show", "1"}, {"audit"}, {"tokens", "list"}, {"accounts", "list"},
	} {
		out, err := exec.Command(bin, append(args, "--db", db)...).CombinedOutput()
		if err != nil {
			t.Errorf("inkwell %s while another process holds the write lock: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestServe_BusyNamesTheWriteLockHolder: serve cannot start while a
// stopped process (SIGSTOP) holds SQLite's write lock; its refusal must
// name that process and its state, not only say "busy".
func TestServe_BusyNamesTheWriteLockHolder(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the holder is read from /proc/locks: Linux only")
	}
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	st.Close()
	bin := lanesBinary(t)
	holder := startWriteLockHolder(t, db)
	if err := holder.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "serve", "--db", db, "--addr", "127.0.0.1:0").CombinedOutput()
	if err == nil {
		t.Fatalf("serve started while another process held the write lock:\n%s", out)
	}
	want := fmt.Sprintf(`write_lock_held_by="pid %d (`, holder.Process.Pid)
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "stopped (T)") {
		t.Errorf("serve's refusal does not name the stopped holder (want %s… stopped (T)):\n%s", want, out)
	}
}

// TestServe_NotReadyWhileAnotherProcessHoldsTheWriteLock: a running serve
// whose writes fail because a stopped process (SIGSTOP) holds SQLite's
// write lock answers /readyz 503 "unavailable" within a heartbeat past the
// busy timeout, and logs the holder; once the holder is gone, 200 again.
// /readyz used to say ready while every accept failed as busy.
func TestServe_NotReadyWhileAnotherProcessHoldsTheWriteLock(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the holder is read from /proc/locks: Linux only")
	}
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := cli.StartChild(t, lanesBinary(t), append(os.Environ(), "INKWELL_CRASH_AT="), lanesWait,
		"serve", "--db", db, "--addr", "127.0.0.1:0", "--heartbeat", "200ms")
	if code, body := readyz(t, srv.URL); code != http.StatusOK || body.Status != "ready" {
		t.Fatalf("/readyz before: %d %+v, want 200 ready", code, body)
	}
	holder := startWriteLockHolder(t, db)
	if err := holder.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var last readiness
	storetest.WaitFor(t, lanesWait, "/readyz 503 while the write lock is held", func() bool {
		code, body := readyz(t, srv.URL)
		last = body
		return code == http.StatusServiceUnavailable
	})
	if last.Status != "unavailable" {
		t.Errorf("/readyz status %q, want unavailable", last.Status)
	}
	for _, want := range []string{"database writes have failed since", "busy", "the server's log says more"} {
		if !strings.Contains(last.Reason, want) {
			t.Errorf("/readyz reason %q lacks %q", last.Reason, want)
		}
	}
	// Who holds the lock is in the log, not in the answer anyone may read.
	if strings.Contains(last.Reason, fmt.Sprint(holder.Process.Pid)) {
		t.Errorf("/readyz reason %q names the holder's pid", last.Reason)
	}
	// The log line is written just after the state /readyz reads changes.
	logged := fmt.Sprintf(`write_lock_held_by="pid %d (`, holder.Process.Pid)
	storetest.WaitFor(t, lanesWait, "serve's log to say writes fail, naming the holder ("+logged+"…)", func() bool {
		return strings.Contains(srv.Log(), "database writes failing") && strings.Contains(srv.Log(), logged)
	})
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	storetest.WaitFor(t, lanesWait, "/readyz 200 once the holder is gone", func() bool {
		code, _ := readyz(t, srv.URL)
		return code == http.StatusOK
	})
	if _, err := lanesPost(srv.URL, "after", `{"prompt":"once the lock is free"}`); err != nil {
		t.Errorf("POST once ready again: %v", err)
	}
	if !strings.Contains(srv.Log(), "database writes commit again") {
		t.Errorf("serve's log does not say writes commit again")
	}
}

type readiness struct{ Status, Reason string }

func readyz(t *testing.T, url string) (int, readiness) {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	var r readiness
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("GET /readyz: %d, body not JSON: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, r
}
