package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Findings of an operator's first hour with the CLI (2026-12-06).

// SIGHUP (a closed terminal or SSH session) stops serve as SIGTERM does:
// gracefully, logged, exit 0. It used to kill the process by the
// signal's default action, with no word and calls left running.
func TestServe_SIGHUPStopsGracefully(t *testing.T) {
	t.Parallel()
	srv := startServe(t, filepath.Join(t.TempDir(), "inkwell.db"))
	if err := srv.Signal(t, syscall.SIGHUP); err != nil {
		t.Errorf("serve after SIGHUP: %v; want exit 0\n%s", err, srv.Log())
	}
	if !strings.Contains(srv.Log(), "shutdown requested") {
		t.Errorf("serve after SIGHUP logged no graceful stop:\n%s", srv.Log())
	}
}

// `prune --older-than 0` is refused: serve --retention 0 keeps every
// job, and here 0 would prune every finished one. 0s says it plainly.
func TestPrune_BareZeroIsRefused(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	id := finishedJob(t, db, "k1")
	code, stdout, stderr := runCLI(t, "prune", "--older-than", "0", "--db", db)
	if code != 2 || !strings.Contains(stderr, "--older-than 0s") || stdout != "" {
		t.Errorf("prune --older-than 0: exit %d, stdout %q, stderr %q; want exit 2 saying 0s prunes every finished job", code, stdout, stderr)
	}
	if code, stdout, _ := runCLI(t, "show", "--db", db, strconv.FormatInt(id, 10)); code != 0 || strings.Contains(stdout, "pruned") {
		t.Errorf("after the refusal, show %d: exit %d\n%s; want the job unpruned", id, code, stdout)
	}
}

// A --server that is no http(s) URL is bad input, exit 2 at once: it
// used to be retried as a network failure whose outcome was unknown.
func TestSubmit_BadServerURLIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"submit", "--prompt", "x", "--server", "127.0.0.1:8080"},
		{"batch", "status", "1", "--server", "localhost"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, "http(s)://host:port") || strings.Contains(stderr, "may or may not") {
			t.Errorf("inkwell %v: exit %d, stderr %q; want exit 2 naming the URL's form", args, code, stderr)
		}
	}
}

// accounts add and tokens create still create a database that does not
// exist (they work before the first serve), but say so on stderr: a
// mistyped --db left a budget or a token on a new file, silently.
func TestAccountsAndTokens_SayWhenTheyCreateTheDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		db   string
	}{
		{[]string{"accounts", "add", "acme"}, "a.db"},
		{[]string{"tokens", "create", "--account", "default"}, "t.db"},
	} {
		db := filepath.Join(dir, c.db)
		for i, want := range []bool{true, false} { // a new file, then the same one again
			args := append(append([]string{}, c.args...), "--db", db)
			if i == 1 && c.args[0] == "accounts" {
				args[2] = "acme2"
			}
			code, _, stderr := runCLI(t, args...)
			if said := strings.Contains(stderr, "created a new database"); code != 0 || said != want {
				t.Errorf("inkwell %v (run %d): exit %d, stderr %q; want exit 0, the notice of a new database %t", args, i+1, code, stderr, want)
			}
		}
	}
}

// serve on an address in use fails before it opens the database: no file
// is created or migrated, and the error says to pick another --addr.
func TestServe_PortInUseCreatesNothing(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "port.db")
	code, _, stderr := runCLI(t, "serve", "--addr", ln.Addr().String(), "--db", db)
	if code == 0 || !strings.Contains(stderr, "--addr") {
		t.Errorf("serve on a port in use: exit %d, stderr %q; want a failure naming --addr", code, stderr)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("serve on a port in use left %v in its directory; want nothing created", names)
	}
}

// A setting serve refuses is bad input, said as the flags' own refusals
// are: exit 2, "inkwell serve: …", no internal "invalid:" prefix, and no
// database file made for it.
func TestServe_RefusedSettingsExitTwo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--sim-latency", "-5s"},
		{"--provider", "bogus"},
		{"--lane", "a/b"},
	} {
		dir := t.TempDir()
		all := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "f.db")}, args...)
		code, _, stderr := runCLI(t, all...)
		if code != 2 || !strings.Contains(stderr, "inkwell serve: ") || strings.Contains(stderr, "invalid:") {
			t.Errorf("inkwell %v: exit %d, stderr %q; want exit 2 and the refusal in plain words", all, code, stderr)
		}
		if names := dirNames(t, dir); len(names) != 0 {
			t.Errorf("inkwell %v left %v", all, names)
		}
	}
}

// serve --retention takes whole days as prune --older-than does ("30d"
// was refused there while prune accepted it); a bad or negative age is
// still refused, exit 2, before any file is made.
func TestServe_RetentionTakesDays(t *testing.T) {
	t.Parallel()
	srv := startServe(t, filepath.Join(t.TempDir(), "inkwell.db"), "--retention", "2d")
	storetest.WaitFor(t, waitLimit, "the retention log line", func() bool { return strings.Contains(srv.Log(), "retention=48h0m0s") })
	for _, bad := range []string{"30x", "-2d", "d", "1.5d"} {
		dir := t.TempDir()
		code, _, stderr := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "f.db"), "--retention", bad)
		if code != 2 || !strings.Contains(stderr, "retention") {
			t.Errorf("serve --retention %s: exit %d, stderr %q; want 2 naming --retention", bad, code, stderr)
		}
		if names := dirNames(t, dir); len(names) != 0 {
			t.Errorf("serve --retention %s left %v", bad, names)
		}
	}
}

// status --jobs below -1 is refused, exit 2 (it used to list every job, as
// -1 does); -1 and 0 keep their meanings.
func TestCLI_StatusRefusesANegativeJobCount(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	if code, _, stderr := runCLI(t, "migrate", "--db", db); code != 0 {
		t.Fatalf("migrate: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "status", "--db", db, "--jobs", "-5"); code != 2 || !strings.Contains(stderr, "--jobs -5") {
		t.Errorf("status --jobs -5: exit %d, stderr %q; want 2 naming --jobs", code, stderr)
	}
	for _, n := range []string{"-1", "0", "3"} {
		if code, _, stderr := runCLI(t, "status", "--db", db, "--jobs", n); code != 0 {
			t.Errorf("status --jobs %s: exit %d, stderr %q; want 0", n, code, stderr)
		}
	}
}

// prune --vacuum is refused while a lane of the file is alive (VACUUM
// holds the write lock for the whole rebuild: serve's accepts would fail
// as busy), before anything is pruned; once serve has stopped it runs.
func TestPrune_VacuumRefusedBesideALiveLane(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db)
	code, stdout, stderr := runCLI(t, "prune", "--older-than", "0s", "--vacuum", "--db", db)
	if code != 1 || !strings.Contains(stderr, "--vacuum refused: lane local is alive") || !strings.Contains(stderr, "Nothing was pruned") || stdout != "" {
		t.Errorf("prune --vacuum beside a live serve: exit %d, stdout %q, stderr %q; want 1, refused naming the lane", code, stdout, stderr)
	}
	if err := srv.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("serve stop: %v", err)
	}
	if code, stdout, stderr = runCLI(t, "prune", "--vacuum", "--db", db); code != 0 || !strings.Contains(stdout, "vacuum: file") {
		t.Errorf("prune --vacuum after serve stopped: exit %d, stdout %q, stderr %q; want the rebuild", code, stdout, stderr)
	}
}

// A --db that is not a SQLite file at all (a file of random bytes) is
// named as such in words, by a reading command and by serve, and left as
// it was; it used to be SQLite's "file is not a database (26)".
func TestCLI_NotASQLiteFileIsSaidSo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "garbage.db")
	junk := bytes.Repeat([]byte("not sqlite, not inkwell. "), 200)
	if err := os.WriteFile(db, junk, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"status"}, {"show", "1"}, {"serve", "--addr", "127.0.0.1:0"}} {
		code, _, stderr := runCLI(t, append(args, "--db", db)...)
		if code != 1 || !strings.Contains(stderr, "is not a SQLite database") {
			t.Errorf("inkwell %s on a file of junk: exit %d, stderr %q; want 1 and the file named not a SQLite database", args[0], code, stderr)
		}
	}
	if got, _ := os.ReadFile(db); !bytes.Equal(got, junk) {
		t.Error("the file of junk was changed")
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Errorf("files beside the junk: %v; want it alone", names)
	}
}

// submit --wait whose --timeout runs out says so in words, with the job's
// status as last seen (it said "last seen ): context deadline exceeded").
func TestSubmit_WaitTimeoutSaysWhatItSaw(t *testing.T) {
	t.Parallel()
	srv := startServe(t, filepath.Join(t.TempDir(), "inkwell.db"), "--sim-latency", "1h")
	code, stdout, stderr := runCLI(t, "submit", "--server", srv.URL, "--prompt", "slow", "--wait", "--timeout", "1500ms")
	if code != 1 || !strings.Contains(stdout, "job 1 accepted") ||
		!regexp.MustCompile(`job 1 did not end within --timeout 1\.5s \(last seen: (queued|running)\); it is stored and goes on: follow it with inkwell show 1`).MatchString(stderr) {
		t.Errorf("submit --wait --timeout 1500ms: exit %d, stdout %q, stderr %q; want 1 and the job as last seen", code, stdout, stderr)
	}
}

// status's text table leaves out lanes stopped more than a week ago (and
// says how many, and where they all are): a lane retired long ago crowded
// it forever. --json keeps every lane.
func TestCLI_StatusLeavesOutLanesStoppedLongAgo(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	for lane, ago := range map[string]time.Duration{"retired": 8 * 24 * time.Hour, "recent": time.Hour} {
		st := storetest.MustOpen(t, db, store.Options{NowFunc: func() time.Time { return time.Now().Add(-ago) }})
		l, err := st.LockLane(t.Context(), lane)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.RegisterLane(t.Context(), l); err != nil {
			t.Fatal(err)
		}
		if err := st.StopLane(t.Context(), l, "shutdown"); err != nil {
			t.Fatal(err)
		}
		l.Release()
		st.Close()
	}
	code, stdout, stderr := runCLI(t, "status", "--db", db)
	if code != 0 || strings.Contains(stdout, "retired") || !strings.Contains(stdout, "recent  stopped") ||
		!strings.Contains(stdout, "(and 1 lane(s) stopped more than 7 days ago, not shown") {
		t.Errorf("status: exit %d, stderr %q, stdout:\n%s\nwant the recent lane, not the retired one, and the count left out", code, stderr, stdout)
	}
	code, stdout, _ = runCLI(t, "status", "--db", db, "--json")
	if code != 0 || !strings.Contains(stdout, `"lane": "retired"`) {
		t.Errorf("status --json: exit %d; want every lane, the retired one too:\n%s", code, stdout)
	}
}

// prune --vacuum beside a serve whose lane is silent but whose process
// runs (a --heartbeat longer than lane_silence_seconds) is refused too:
// lane_liveness says "silent", not alive, and only the process check can
// say the serve still holds the file. Once that serve is killed, the
// silent lane's process is proven gone, and the vacuum runs.
func TestPrune_VacuumRefusedBesideASilentButLiveLane(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--heartbeat", "1h")
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	if _, err := st.DB().ExecContext(t.Context(), `UPDATE overview_settings SET value = 1 WHERE name = 'lane_silence_seconds'`); err != nil {
		t.Fatal(err)
	}
	storetest.WaitFor(t, waitLimit, "the lane silent", func() bool {
		lanes, err := st.LiveLanes(t.Context())
		return err == nil && len(lanes) == 1 && lanes[0].State == "silent"
	})
	code, stdout, stderr := runCLI(t, "prune", "--vacuum", "--db", db)
	if code != 1 || !strings.Contains(stderr, "--vacuum refused: lane local is not stopped") || !strings.Contains(stderr, "alive") {
		t.Errorf("prune --vacuum beside a silent lane whose serve runs: exit %d, stdout %q, stderr %q; want refused, its process named alive", code, stdout, stderr)
	}
	srv.Signal(t, syscall.SIGKILL)
	if code, stdout, stderr = runCLI(t, "prune", "--vacuum", "--db", db); code != 0 || !strings.Contains(stdout, "vacuum: file") {
		t.Errorf("prune --vacuum once the silent lane's process is gone: exit %d, stdout %q, stderr %q; want the rebuild", code, stdout, stderr)
	}
}
