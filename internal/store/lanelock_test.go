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
	t.Run("DeletedLockFileIsTakenAgain", func(t *testing.T) {
		t.Parallel()
		s := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
		l := mustLockLane(t, s, "local")
		if err := l.Check(); err != nil {
			t.Fatalf("Check of a fresh lock: %v", err)
		}
		if err := os.Remove(l.Path); err != nil {
			t.Fatal(err)
		}
		if err := l.Check(); err != nil {
			t.Fatalf("Check after the lock file was deleted = %v, want the lock taken again", err)
		}
		if got := l.Restored(); got != 1 {
			t.Errorf("Restored() = %d, want 1", got)
		}
		if _, err := os.Stat(l.Path); err != nil {
			t.Errorf("lock file not re-created: %v", err)
		}
		// The new file is held: a newcomer is refused.
		if nl, err := s.LockLane(t.Context(), "local"); err == nil {
			nl.Release()
			t.Fatalf("LockLane succeeded after the holder took its deleted lock file again")
		}
	})
	t.Run("DeletedLockFileTakenByAnotherStopsTheLane", func(t *testing.T) {
		t.Parallel()
		s := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
		l := mustLockLane(t, s, "local")
		if err := os.Remove(l.Path); err != nil {
			t.Fatal(err)
		}
		// A newcomer in this same process is refused: this process holds
		// the lane, whatever became of its file.
		if _, err := s.LockLane(t.Context(), "local"); inkwell.ErrorCode(err) != inkwell.ELANEHELD || !strings.Contains(err.Error(), "that is this very process, whose lock file was deleted") {
			t.Errorf("LockLane in the holding process after its lock file was deleted = %v; want lane_held naming this very process", err)
		}
		// Another open file (as another process would) takes the new file
		// before the holder looks.
		f, err := os.OpenFile(l.Path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		if err := l.Check(); inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Errorf("Check after a newcomer took the new lock file = %v, want %s", err, inkwell.ELANEHELD)
		}
	})
	t.Run("ReplacedLockFile", func(t *testing.T) {
		t.Parallel()
		s := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
		l := mustLockLane(t, s, "local")
		replaceFile(t, l.Path, "{}\n")
		if err := l.Check(); err != nil {
			t.Errorf("Check after the lock file was replaced = %v, want the lock taken again", err)
		}
		// Replaced by a file that another open file holds: the lane stops.
		replaceFile(t, l.Path, "{}\n")
		f, err := os.Open(l.Path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		if err := l.Check(); inkwell.ErrorCode(err) != inkwell.ELANEHELD {
			t.Errorf("Check after the lock file was replaced by a held one = %v, want %s", err, inkwell.ELANEHELD)
		}
	})
}

func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
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
	child := startLockChild(t, path)
	host, _ := os.Hostname()

	before := dumpAll(t, s)
	_, err := s.LockLane(t.Context(), "local")
	if err == nil {
		t.Fatalf("LockLane succeeded while child pid %d holds the lane", child.Process.Pid)
	}
	assertHeldBy(t, err, child.Process.Pid, host)
	assertSameDump(t, before, dumpAll(t, s))

	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait() // "signal: killed"
	l := mustLockLane(t, s, "local")
	if l.Previous == nil || l.Previous.PID != child.Process.Pid {
		t.Errorf("lock file's previous holder = %+v, want the killed child pid %d", l.Previous, child.Process.Pid)
	}
	for _, want := range []string{fmt.Sprintf("pid %d", child.Process.Pid), "gone (no such process)"} {
		if !strings.Contains(l.PreviousProcess, want) {
			t.Errorf("PreviousProcess = %q, want it to say %q", l.PreviousProcess, want)
		}
	}
}

// TestStore_LaneLockTampered: a flock on a file that can be unlinked is not
// proof of death by itself. With the lock file deleted or replaced under a
// live holder (another process), LockLane and so recovery are refused,
// naming the live pid, and nothing is changed.
func TestStore_LaneLockTampered(t *testing.T) {
	t.Parallel()
	for name, tamper := range map[string]func(t *testing.T, path string){
		"Deleted": func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		},
		"Replaced": func(t *testing.T, path string) { replaceFile(t, path, "{}\n") },
		"ReplacedNamingNobody": func(t *testing.T, path string) {
			replaceFile(t, path, `{"pid":1,"host":"elsewhere","incarnation":"x","since":"2026-01-01T00:00:00Z","released_at":"2026-01-01T00:00:01Z"}`+"\n")
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := storetest.SQLitePath(t)
			s := storetest.MustOpen(t, path, store.Options{})
			child := startLockChild(t, path)
			tamper(t, path+".lane-local.lock")
			before := dumpAll(t, s)
			l, err := s.LockLane(t.Context(), "local")
			if err == nil {
				l.Release()
				t.Fatalf("LockLane succeeded on a tampered lock file while child pid %d runs the lane", child.Process.Pid)
			}
			host, _ := os.Hostname()
			assertHeldBy(t, err, child.Process.Pid, host)
			msg := inkwell.ErrorMessage(err)
			for _, want := range []string{"deleted or replaced", "alive"} {
				if !strings.Contains(msg, want) {
					t.Errorf("refusal %q does not say %q", msg, want)
				}
			}
			assertSameDump(t, before, dumpAll(t, s))
		})
	}
}

// TestStore_LaneLockStoppedHolder: a holder stopped with SIGSTOP is alive;
// the refusal says so, says what to do, and never points at the lock file.
func TestStore_LaneLockStoppedHolder(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the process state is read from /proc: Linux only")
	}
	path := storetest.SQLitePath(t)
	s := storetest.MustOpen(t, path, store.Options{})
	child := startLockChild(t, path)
	if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Signal(syscall.SIGCONT) })
	storetest.WaitFor(t, 10*time.Second, "child stopped", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child.Process.Pid))
		i := strings.LastIndexByte(string(b), ')')
		return i > 0 && strings.HasPrefix(string(b[i:]), ") T")
	})
	_, err := s.LockLane(t.Context(), "local")
	host, _ := os.Hostname()
	assertHeldBy(t, err, child.Process.Pid, host)
	msg := inkwell.ErrorMessage(err)
	for _, want := range []string{"alive, stopped (T)", "inspect it", "ending it lets recovery close its attempts"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, ".lock") {
		t.Errorf("refusal %q names the lock file, which invites deleting it", msg)
	}
}

// startLockChild runs this test binary as a child that takes and registers
// lane "local" of the database at path, and holds it until killed.
func startLockChild(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
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
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGCONT); cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("child said %q (%v), want \"locked\"", line, err)
	}
	return cmd
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
	if err := s.RegisterLane(context.Background(), l); err != nil {
		fmt.Fprintln(os.Stderr, "child: register:", err)
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

// TestStore_LaneLockReleaseWithAChildSharingIt: a flock belongs to the
// open file description, which a child forked by any goroutine shares
// until it execs. Release must drop the lock itself, not only close this
// process's descriptor: CI once saw a test's second LockLane refused as
// held by its own process, while a parallel test was starting a child.
// Here the child keeps the shared description for good (ExtraFiles), the
// widest form of that window.
func TestStore_LaneLockReleaseWithAChildSharingIt(t *testing.T) {
	t.Parallel()
	s := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	l, err := s.LockLane(t.Context(), "local")
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sleep", "60")
	child.ExtraFiles = []*os.File{store.LockFileOf(l)}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	if err := l.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	again, err := s.LockLane(t.Context(), "local")
	if err != nil {
		t.Fatalf("LockLane after Release, with a child sharing the released lock's file: %v", err)
	}
	again.Release()
}

// TestStore_LaneLockHeldTwiceInOneProcess: a second LockLane of a lane
// this process holds is refused, and the refusal says the holder is this
// very process (not "another process", nor "gone").
func TestStore_LaneLockHeldTwiceInOneProcess(t *testing.T) {
	t.Parallel()
	s := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	mustLockLane(t, s, "local")
	_, err := s.LockLane(t.Context(), "local")
	if inkwell.ErrorCode(err) != inkwell.ELANEHELD || !strings.Contains(err.Error(), "that is this very process") || strings.Contains(err.Error(), "gone") {
		t.Errorf("second LockLane while this process holds the lane: %v; want lane_held saying it is this very process", err)
	}
}
