package main_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cli "github.com/inkwell/inkwell/cmd/inkwell"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// holdEnv, when set to a SQLite path, makes this test binary a child that
// holds the database's write lock (BEGIN IMMEDIATE) for holdFor, says
// "held" once it has it, and commits when the time is up.
const holdEnv = "INKWELL_TEST_HOLD_WRITE_LOCK"

const holdFor = 15 * time.Second

// TestServe_PaidAnswerWaitsOutALockedDatabase is issue 8's reproduction:
// a provider answer arrives while another process holds SQLite's write
// lock for 15 s and clients keep posting, one every 0.7 s. The answer must
// be stored once the lock is free: the job done, one result, one charge,
// one provider call; and while it waited, the log said so.
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

	var posts sync.WaitGroup
	codes := make(chan error, 20)
	posts.Go(func() {
		for i := range 20 {
			_, err := lanesPost(srv.URL, fmt.Sprintf("during-%d", i), fmt.Sprintf(`{"prompt":"posted while locked %d"}`, i))
			codes <- err
			time.Sleep(700 * time.Millisecond)
		}
	})
	if err := holder.Wait(); err != nil {
		t.Fatalf("write-lock holder: %v", err)
	}
	posts.Wait()
	close(codes)

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
	logs := srv.Log()
	for _, want := range []string{"answer waiting to be stored", "answer stored after waiting for the database"} {
		if !strings.Contains(logs, want) {
			t.Errorf("serve's log does not say %q", want)
		}
	}
	// Every post was answered: created, or refused as busy (503) with
	// nothing written; none was lost in between.
	for err := range codes {
		if err != nil && !strings.Contains(err.Error(), "503") {
			t.Errorf("post while locked: %v, want 201 or 503", err)
		}
	}
}

// startWriteLockHolder runs this test binary as a second process that
// holds db's write lock for holdFor; it returns once the lock is held.
func startWriteLockHolder(t *testing.T, db string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServe_PaidAnswerWaitsOutALockedDatabase$")
	cmd.Env = append(os.Environ(), holdEnv+"="+db)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = cli.ChildProcAttr()
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
	return cmd
}

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
	time.Sleep(holdFor)
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
