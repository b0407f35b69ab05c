package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_LockLaneThroughADanglingSymlink: --db names a symlink whose
// target does not exist yet. The first open creates the target through the
// link; every later open, by the same spelling or the target's own, must
// meet the same lane lock, or two processes would run one lane and the
// second's startup recovery would fail the first's live job.
func TestStore_LockLaneThroughADanglingSymlink(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// link makes, under root, the spelling given as --db and returns
		// it with the path of the (missing) file it leads to.
		link func(t *testing.T, root string) (db, target string)
	}{
		{"AbsoluteTarget", func(t *testing.T, root string) (string, string) {
			target := filepath.Join(mkdir(t, root, "real"), "target.db")
			return symlink(t, target, filepath.Join(root, "link.db")), target
		}},
		{"RelativeTarget", func(t *testing.T, root string) (string, string) {
			target := filepath.Join(mkdir(t, root, "real"), "target.db")
			return symlink(t, filepath.Join("real", "target.db"), filepath.Join(root, "link.db")), target
		}},
		{"ChainOfLinks", func(t *testing.T, root string) (string, string) {
			target := filepath.Join(mkdir(t, root, "real"), "target.db")
			second := symlink(t, target, filepath.Join(root, "second.db"))
			return symlink(t, second, filepath.Join(root, "first.db")), target
		}},
		{"TargetInALinkedDirectory", func(t *testing.T, root string) (string, string) {
			realDir := mkdir(t, root, "real")
			dirLink := symlink(t, realDir, filepath.Join(root, "data"))
			return symlink(t, filepath.Join(dirLink, "target.db"), filepath.Join(root, "link.db")), filepath.Join(realDir, "target.db")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			db, target := tc.link(t, root)
			first := storetest.MustOpen(t, db, store.Options{})
			if _, err := os.Stat(target); err != nil {
				t.Fatalf("the first open did not create the target through the link: %v", err)
			}
			held := mustLockLane(t, first, "local")
			if want := target + ".lane-local.lock"; held.Path != want {
				t.Errorf("first lock file = %s, want %s (the target's)", held.Path, want)
			}
			for _, spelling := range []string{db, target} {
				again := storetest.MustOpen(t, spelling, store.Options{})
				if again.Path() != first.Path() {
					t.Errorf("open %s: path %s, want %s as the first open", spelling, again.Path(), first.Path())
				}
				if l, err := again.LockLane(t.Context(), "local"); err == nil {
					l.Release()
					t.Errorf("open %s: LockLane took %s while the first open holds %s", spelling, l.Path, held.Path)
				} else {
					assertHeldBy(t, err, os.Getpid(), held.Self.Host)
				}
			}
		})
	}
}

// TestStore_OpenRefusesASymlinkLoop: a --db that is a loop of symlinks is
// refused clearly, and no file is created for it.
func TestStore_OpenRefusesASymlinkLoop(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a, b := filepath.Join(root, "a.db"), filepath.Join(root, "b.db")
	symlink(t, b, a)
	symlink(t, a, b)
	s, err := store.Open(t.Context(), a, store.Options{})
	if err == nil {
		s.Close()
		t.Fatalf("Open of a symlink loop succeeded")
	}
	if inkwell.ErrorCode(err) != inkwell.EINVALID || !strings.Contains(err.Error(), "symlinks") {
		t.Errorf("Open of a symlink loop = %v, want %s naming the symlinks", err, inkwell.EINVALID)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 2 {
		t.Errorf("directory holds %d entries after a refused open, want the 2 links", len(entries))
	}
}

func mkdir(t *testing.T, parent, name string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func symlink(t *testing.T, target, link string) string {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// TestStore_RefusesAHardLinkedDatabase: a database file with a second
// name (a hard link) is refused by either name, before anything is
// written: a process opening it by the other name would meet neither the
// first's WAL nor its lane lock, run the same lane, and overwrite the
// first's pages at its checkpoint.
func TestStore_RefusesAHardLinkedDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "a.db")
	storetest.MustQueue(t, storetest.MustOpen(t, db, store.Options{}), "default", "k", 1)
	second := filepath.Join(dir, "b.db")
	if err := os.Link(db, second); err != nil {
		t.Skipf("this file system makes no hard links: %v", err)
	}
	for _, name := range []string{db, second} {
		_, err := store.Open(t.Context(), name, store.Options{})
		if inkwell.ErrorCode(err) != inkwell.EINVALID || !strings.Contains(err.Error(), "hard link") {
			t.Errorf("open %s: %v, want invalid naming the hard link", filepath.Base(name), err)
		}
	}
	if _, err := os.Stat(second + "-wal"); !os.IsNotExist(err) {
		t.Errorf("b.db-wal exists (%v): the refused open wrote beside the second name", err)
	}
	if err := os.Remove(second); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), db, store.Options{})
	if err != nil {
		t.Fatalf("open after the second name is removed: %v", err)
	}
	st.Close()
}

// TestStore_RefusesADirectoryOrAPipe: --db naming a directory (which has
// two names or more by nature) or a named pipe is refused saying what it
// is, and nothing is made in or beside it.
func TestStore_RefusesADirectoryOrAPipe(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pipe := filepath.Join(t.TempDir(), "pipe.db")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		dir:  "is a directory: --db names the database file itself, such as " + filepath.Join(dir, "inkwell.db"),
		pipe: "is a named pipe, not a regular file",
	} {
		_, err := store.Open(t.Context(), path, store.Options{})
		if inkwell.ErrorCode(err) != inkwell.EINVALID || !strings.Contains(err.Error(), want) {
			t.Errorf("open %s: %v, want invalid saying %q", path, err, want)
		}
		for _, beside := range []string{"-wal", "-shm", "-journal"} {
			if _, err := os.Stat(path + beside); !os.IsNotExist(err) {
				t.Errorf("%s%s exists (%v): the refused open made it", path, beside, err)
			}
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused open made %d entries in the directory", len(entries))
	}
}
