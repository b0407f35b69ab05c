package main_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	cli "github.com/inkwell/inkwell/cmd/inkwell"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// holdEnv, when set to a SQLite path, makes this test binary a child that
// holds the database's write lock (BEGIN IMMEDIATE), says "held" once it
// has it, and commits when its stdin closes.
const holdEnv = "INKWELL_TEST_HOLD_WRITE_LOCK"

// TestServe_PaidAnswerWaitsOutALockedDatabase:
// a provider answer arrives while another process holds SQLite's write
// lock and clients keep posting. The lock is let go once serve's log says
// the answer waits for it and a post has been answered meanwhile. The
// answer must then be stored: the job done, one result, one charge, one
// provider call; and the log says it was stored after waiting.
func TestServe_PaidAnswerWaitsOutALockedDatabase(t *testing.T) {
	if path := os.Getenv(holdEnv); path != "" {
		holdWriteLock(path)
		return
	}
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	sim := startHeldSim(t)
	bin := lanesBinary(t)
	srv := cli.StartChild(t, bin, append(os.Environ(), "INKWELL_CRASH_AT="), lanesWait, "serve", "--db", db, "--addr", "127.0.0.1:0",
		"--provider", "openai", "--provider-url", sim.url, "--provider-timeout", "60s", "--heartbeat", "200ms")

	sim.hold()
	id, err := lanesPost(srv.URL, "paid", `{"prompt":"an answer worth keeping"}`)
	if err != nil {
		t.Fatal(err)
	}
	storetest.WaitFor(t, lanesWait, "the job's provider call in flight", func() bool { return sim.heldJobOf(t, st, "local") == id })

	holder := startWriteLockHolder(t, db)
	sim.release() // the answer arrives while the database is locked

	// Clients post one after another until the lock is let go.
	var (
		posts    sync.WaitGroup
		mu       sync.Mutex
		postErrs []error
	)
	stopPosting := make(chan struct{})
	posts.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopPosting:
				return
			default:
			}
			_, err := lanesPost(srv.URL, fmt.Sprintf("during-%d", i), fmt.Sprintf(`{"prompt":"posted while locked %d"}`, i))
			mu.Lock()
			postErrs = append(postErrs, err)
			mu.Unlock()
		}
	})
	storetest.WaitFor(t, lanesWait, "serve's log to say the answer waits", func() bool {
		return strings.Contains(srv.Log(), "answer waiting to be stored")
	})
	storetest.WaitFor(t, lanesWait, "a post answered while locked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(postErrs) >= 1
	})
	if err := holder.release(); err != nil {
		t.Fatalf("write-lock holder: %v", err)
	}
	close(stopPosting)
	posts.Wait()

	storetest.WaitFor(t, lanesWait, "job done", func() bool {
		return lanesCount(t, st, fmt.Sprintf(`SELECT COUNT(*) FROM jobs WHERE id = %d AND status = 'done'`, id)) == 1
	})
	for q, want := range map[string]int{
		`SELECT COUNT(*) FROM results WHERE job_id = %d`:                          1,
		`SELECT COUNT(*) FROM charges WHERE job_id = %d`:                          1,
		`SELECT COUNT(*) FROM job_attempts WHERE job_id = %d`:                     1,
		`SELECT COUNT(*) FROM job_attempts WHERE job_id = %d AND status = 'done'`: 1,
	} {
		if got := lanesCount(t, st, fmt.Sprintf(q, id)); got != want {
			t.Errorf("%s = %d, want %d", fmt.Sprintf(q, id), got, want)
		}
	}
	key := lanesJobKey(t, st, id)
	ledger, err := providersim.FetchLedger(t.Context(), http.DefaultClient, sim.url)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := ledger.Entry(storetest.ProviderKey(t, st, id, key)); !ok || e.Calls != 1 || e.Bills != 1 {
		t.Errorf("ledger entry for job %d = %+v (found %t), want one call, one bill", id, e, ok)
	}
	// Logged just after the commit the job's status shows: waited for.
	storetest.WaitFor(t, lanesWait, "serve's log to say the answer was stored after waiting", func() bool {
		return strings.Contains(srv.Log(), "answer stored after waiting for the database")
	})
	// Every post was answered: created, or refused as busy (503) with
	// nothing written; none was lost in between.
	for _, err := range postErrs {
		if err != nil && !strings.Contains(err.Error(), "503") {
			t.Errorf("post while locked: %v, want 201 or 503", err)
		}
	}
}

// lockHolder is a second process holding a SQLite file's write lock.
type lockHolder struct {
	*exec.Cmd
	stdin io.Closer
}

// release lets the lock go and waits for the holder to exit.
func (h *lockHolder) release() error {
	h.stdin.Close()
	return h.Wait()
}

// startWriteLockHolder runs this test binary as a second process that
// holds db's write lock until released (or killed, or the test ends); it
// returns once the lock is held.
func startWriteLockHolder(t *testing.T, db string) *lockHolder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServe_PaidAnswerWaitsOutALockedDatabase$")
	cmd.Env = append(os.Environ(), holdEnv+"="+db)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = cli.ChildProcAttr()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "held" {
		t.Fatalf("write-lock holder said %q (%v), want \"held\"", line, err)
	}
	go func() { _, _ = bufio.NewReader(out).ReadString(0) }()
	return &lockHolder{Cmd: cmd, stdin: in}
}

// holdWriteLock holds path's write lock until stdin closes (the test lets
// go, or ends).
func holdWriteLock(path string) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)&_txlock=immediate")
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		os.Exit(3)
	}
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder: begin immediate:", err)
		os.Exit(3)
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := tx.Commit(); err != nil {
		fmt.Fprintln(os.Stderr, "holder: commit:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

func lanesJobKey(t *testing.T, st *store.Store, id int64) string {
	t.Helper()
	j, err := st.Job(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j.IdempotencyKey
}
