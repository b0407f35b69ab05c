package store_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

func TestStore_LockLane(t *testing.T) {
	t.Parallel()
	t.Run("HeldIsRefusedNamingTheHolder", func(t *testing.T) {
		t.Parallel()
		storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
			s1 := storetest.MustOpen(t, b.DSN, store.Options{})
			s2 := storetest.MustOpen(t, b.DSN, store.Options{})
			held := mustLockLane(t, s1, "local")
			for name, s := range map[string]*store.Store{"same store": s1, "another store": s2} {
				l, err := s.LockLane(t.Context(), "local")
				if err == nil {
					l.Release()
					t.Fatalf("%s: second LockLane succeeded while the lane is held", name)
				}
				assertHeldBy(t, err, os.Getpid(), held.Self.Host)
			}
			// Another lane is another lock.
			mustLockLane(t, s2, "other")
		})
	})
	t.Run("ReleasedCanBeTaken", func(t *testing.T) {
		t.Parallel()
		storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
			s1 := storetest.MustOpen(t, b.DSN, store.Options{})
			s2 := storetest.MustOpen(t, b.DSN, store.Options{})
			first := mustLockLaneNoCleanup(t, s1, "local")
			if err := first.Release(); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if err := first.Check(); err == nil {
				t.Errorf("Check of a released lock succeeded")
			}
			second := mustLockLane(t, s2, "local")
			if err := second.Check(); err != nil {
				t.Errorf("Check of the new holder: %v", err)
			}
			if second.Self.Incarnation == first.Self.Incarnation {
				t.Errorf("two holds share incarnation %s", first.Self.Incarnation)
			}
		})
	})
	t.Run("BadLaneName", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			for _, lane := range []string{"", "../x", "a b", strings.Repeat("a", 64), "-lead"} {
				if l, err := s.LockLane(t.Context(), lane); inkwell.ErrorCode(err) != inkwell.EINVALID {
					if l != nil {
						l.Release()
					}
					t.Errorf("LockLane(%q) = %v, want %s", lane, err, inkwell.EINVALID)
				}
			}
		})
	})
}

// TestStore_LockLaneSpellings: every spelling of one database meets one lock.
func TestStore_LockLaneSpellings(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	canonical := filepath.Join(dir, "inkwell.db")
	s := storetest.MustOpen(t, canonical, store.Options{})
	held := mustLockLane(t, s, "local")

	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	relative, err := filepath.Rel(cwd, canonical)
	if err != nil {
		t.Fatal(err)
	}
	spellings := []string{
		relative,
		filepath.Join(root, "link", "inkwell.db"),
		dir + "/./inkwell.db",
		dir + "/../data/inkwell.db",
		root + "/link/../data/./inkwell.db",
		"file:" + canonical,
	}
	for _, p := range spellings {
		other := storetest.MustOpen(t, p, store.Options{})
		if l, err := other.LockLane(t.Context(), "local"); err == nil {
			l.Release()
			t.Errorf("%s: LockLane succeeded while %s holds the lane", p, canonical)
		} else {
			assertHeldBy(t, err, os.Getpid(), held.Self.Host)
		}
	}
}

func TestStore_LaneLockCheck(t *testing.T) {
	t.Parallel()
	t.Run("DeletedLockFile", func(t *testing.T) {
		t.Parallel()
		s := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
		l := mustLockLane(t, s, "local")
		if err := l.Check(); err != nil {
			t.Fatalf("Check of a fresh lock: %v", err)
		}
		if err := os.Remove(l.Path); err != nil {
			t.Fatal(err)
		}
		if err := l.Check(); inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Errorf("Check after the lock file was deleted = %v, want %s", err, inkwell.ELANEHELD)
		}
		// The deleted file no longer guards the lane: a newcomer gets it,
		// which is exactly why the first holder's Check must fail.
		mustLockLane(t, s, "local")
		if err := l.Check(); err == nil {
			t.Errorf("Check of the orphaned lock succeeded after a newcomer took the lane")
		}
	})
	t.Run("ReplacedLockFile", func(t *testing.T) {
		t.Parallel()
		s := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
		l := mustLockLane(t, s, "local")
		imposter := l.Path + ".new"
		if err := os.WriteFile(imposter, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(imposter, l.Path); err != nil {
			t.Fatal(err)
		}
		if err := l.Check(); inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Errorf("Check after the lock file was replaced = %v, want %s", err, inkwell.ELANEHELD)
		}
	})
}

// childLockEnv, when set to a database path, makes this test binary a child
// that takes lane "local" of that database, says "locked" and waits to be killed.
const childLockEnv = "INKWELL_TEST_LANELOCK_CHILD"

func TestStore_LaneLockChildProcess(t *testing.T) {
	if path := os.Getenv(childLockEnv); path != "" {
		holdLaneUntilKilled(path)
		return
	}
	t.Parallel()
	path := storetest.SQLitePath(t)
	s := storetest.MustOpen(t, path, store.Options{})

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestStore_LaneLockChildProcess$")
	cmd.Env = append(os.Environ(), childLockEnv+"="+path)
	cmd.Stderr = os.Stderr
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("child said %q (%v), want \"locked\"", line, err)
	}

	before := dumpAll(t, s)
	_, err = s.LockLane(t.Context(), "local")
	if err == nil {
		t.Fatalf("LockLane succeeded while child pid %d holds the lane", cmd.Process.Pid)
	}
	host, _ := os.Hostname()
	assertHeldBy(t, err, cmd.Process.Pid, host)
	assertSameDump(t, before, dumpAll(t, s))

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // "signal: killed"
	l := mustLockLane(t, s, "local")
	if l.Previous == nil || l.Previous.PID != cmd.Process.Pid {
		t.Errorf("lock file's previous holder = %+v, want the killed child pid %d", l.Previous, cmd.Process.Pid)
	}
}

func holdLaneUntilKilled(path string) {
	s, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		os.Exit(3)
	}
	l, err := s.LockLane(context.Background(), "local")
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: lock:", err)
		os.Exit(3)
	}
	fmt.Println("locked")
	// Hold l until SIGKILL: the parent never closes our stdin.
	_, _ = io.Copy(io.Discard, os.Stdin)
	runtime.KeepAlive(l)
	os.Exit(4)
}

func assertHeldBy(t *testing.T, err error, pid int, host string) {
	t.Helper()
	if got := inkwell.ErrorCode(err); got != inkwell.ELANEHELD {
		t.Errorf("error %v: code %q, want %q", err, got, inkwell.ELANEHELD)
		return
	}
	msg := inkwell.ErrorMessage(err)
	for _, want := range []string{fmt.Sprintf("pid %d", pid), host} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not name the holder (%q)", msg, want)
		}
	}
}
