package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCLI_InspectADatabaseThisUserMayNotWrite: inkwell status, show and
// audit, run by a user who may read the database but not write it or its
// directory (serve's own user owns them), read it instead of refusing as
// read-only: with serve stopped (no -wal: read as immutable) and beside a
// live serve (its -wal and -shm read read-only). retry, which writes,
// still says the file is read-only. Needs root, to run the CLI as nobody.
func TestCLI_InspectADatabaseThisUserMayNotWrite(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs the CLI as another user (nobody)")
	}
	dir, asNobody := nobodyCLI(t)
	db := filepath.Join(dir, "inkwell.db")

	srv := startServe(t, db, "--sim-latency", "30s", "--grace", "100ms")
	job := submit(t, srv.URL, "ro-1", `{"prompt":"read me"}`).Job
	for _, stopped := range []bool{false, true} {
		if stopped {
			if err := srv.Signal(t, syscall.SIGTERM); err != nil {
				t.Logf("serve stopped: %v", err) // the call cut short by the grace: exit 1 is fine here
			}
			if _, err := os.Stat(db + "-wal"); err == nil {
				t.Fatalf("serve stopped cleanly but left %s-wal", db)
			}
		}
		code, stdout, stderr := asNobody("status", "--db", db)
		if code != 0 || !strings.Contains(stdout, "JOBS (SELECT * FROM job_overview)") {
			t.Errorf("status as nobody (serve stopped %t): exit %d, stdout %q, stderr %q; want the overview", stopped, code, stdout, stderr)
		}
		code, stdout, stderr = asNobody("show", "1", "--db", db)
		if code != 0 || !strings.Contains(stdout, "read me") {
			t.Errorf("show 1 as nobody (serve stopped %t): exit %d, stdout %q, stderr %q; want job %d", stopped, code, stdout, stderr, job.ID)
		}
		if code, _, stderr = asNobody("audit", "--db", db); code != 0 {
			t.Errorf("audit as nobody (serve stopped %t): exit %d, stderr %q", stopped, code, stderr)
		}
	}
	if code, _, stderr := asNobody("retry", "1", "--db", db); code == 0 || !strings.Contains(stderr, "read-only") {
		t.Errorf("retry as nobody: exit %d, stderr %q; want refused, the file named read-only", code, stderr)
	}
	if _, err := os.Stat(db + "-wal"); err == nil {
		t.Errorf("reading as nobody left %s-wal", db)
	}
}

// nobodyCLI is a directory nobody (uid 65534) may enter and read but not
// write, holding a copy of the inkwell binary, and a runner of that binary
// as nobody in it. Needs root.
func nobodyCLI(t *testing.T) (dir string, asNobody func(args ...string) (int, string, string)) {
	t.Helper()
	dir, err := os.MkdirTemp("", "inkwell-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "inkwell")
	copyFile(t, inkwellBin, bin, 0o755)
	return dir, func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = childEnv()
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}, Pdeathsig: syscall.SIGKILL}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		_ = cmd.Run()
		return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
