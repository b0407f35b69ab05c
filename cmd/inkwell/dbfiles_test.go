package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestServe_DatabaseFilesDeletedUnderIt: an operator deletes the SQLite
// database's -wal and -shm, or the database file itself, while serve runs
// with jobs done. serve writes on into unlinked files without an error, so
// a crash would lose every job since the last checkpoint. Within a
// heartbeat it must save what it holds (a checkpoint into the database
// file; a whole copy beside it when the file itself is gone), say so, and
// stop; the saved database must hold every job done, with its charge,
// even when serve is killed (SIGKILL) the moment it has said so. A call in
// flight when the files go finishes as the lane stops, and its answer is
// saved as it is stored, before serve ends however it ends.
func TestServe_DatabaseFilesDeletedUnderIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		remove []string // suffixes of the database's name
		says   string
		kill   bool // SIGKILL once it has said so, instead of letting it end
		// inFlight: the last job's call is in flight when the files go;
		// serve is killed the moment it has stored its answer.
		inFlight bool
	}{
		{"WALAndSHM", []string{"-wal", "-shm"}, "every commit was copied into", false, false},
		{"WALAndSHMThenKilled", []string{"-wal", "-shm"}, "every commit was copied into", true, false},
		{"WALAndSHMWithACallInFlight", []string{"-wal", "-shm"}, "every commit was copied into", true, true},
		{"DatabaseFile", []string{"", "-wal", "-shm"}, "a whole copy of the database", false, false},
		{"DatabaseFileThenKilled", []string{"", "-wal", "-shm"}, "a whole copy of the database", true, false},
		{"DatabaseFileWithACallInFlight", []string{"", "-wal", "-shm"}, "a whole copy of the database", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "inkwell.db")
			latency := "10ms"
			if tc.inFlight {
				latency = "2s"
			}
			srv := startServe(t, db, "--sim-latency", latency, "--heartbeat", "100ms")
			const jobs = 3
			done := jobs
			if tc.inFlight {
				done = jobs - 1
			}
			for i := range done {
				submit(t, srv.URL, fmt.Sprintf("k%d", i), `{"prompt":"a poem worth keeping"}`)
			}
			storetest.WaitFor(t, waitLimit, "every job done", func() bool { return doneOverHTTP(t, srv.URL, done) })
			if tc.inFlight {
				last := submit(t, srv.URL, "in-flight", `{"prompt":"an answer paid for while the files go"}`)
				storetest.WaitFor(t, waitLimit, "the last job's call in flight", func() bool { return statusOverHTTP(t, srv.URL, last.Job.ID) == inkwell.StatusRunning })
			}
			if _, err := os.Stat(db + "-wal"); err != nil {
				t.Fatalf("no WAL to delete: %v", err)
			}
			for _, suf := range tc.remove {
				if err := os.Remove(db + suf); err != nil {
					t.Fatal(err)
				}
			}
			storetest.WaitFor(t, waitLimit, "serve saying its files were deleted", func() bool {
				return strings.Contains(srv.Log(), "database files deleted or replaced")
			})
			if tc.inFlight {
				storetest.WaitFor(t, waitLimit, "the call in flight stored", func() bool {
					return strings.Count(srv.Log(), `msg="job done"`) == jobs
				})
			}
			if tc.kill {
				srv.cmd.Process.Kill() // what it saved must not need a graceful end
			}
			select {
			case <-srv.exited:
			case <-time.After(waitLimit):
				t.Fatalf("serve still runs %v after its database files were deleted", waitLimit)
			}
			if srv.err == nil {
				t.Errorf("serve exited 0: want an error exit")
			}
			log := srv.Log()
			if !strings.Contains(log, "database files deleted or replaced") || !strings.Contains(log, tc.says) {
				t.Errorf("serve's log does not say what happened (%q):\n%s", tc.says, log)
			}
			saved := db
			if tc.remove[0] == "" {
				copies, _ := filepath.Glob(db + ".rescued-*Z") // not a .tmp (or its -journal) a kill left mid-copy
				if len(copies) != 1 {
					t.Fatalf("rescued copies %v, want one", copies)
				}
				saved = copies[0]
			}
			if tc.remove[0] == "" {
				// The restart refuses to make a new, empty database in the
				// lost one's place while its copy waits beside it.
				if code, _, stderr := runCLI(t, "migrate", "--db", db); code == 0 || !strings.Contains(stderr, "rescued copy") {
					t.Errorf("migrate beside a rescued copy: exit %d, %s; want a refusal naming the copy", code, stderr)
				}
				if _, err := os.Stat(db); !os.IsNotExist(err) {
					t.Errorf("the refused migrate made %s (%v)", db, err)
				}
			}
			st := storetest.MustOpen(t, saved, store.Options{NoMigrate: true})
			for q, want := range map[string]int{
				`SELECT COUNT(*) FROM jobs WHERE status = 'done'`: jobs,
				`SELECT COUNT(*) FROM charges`:                    jobs,
				`SELECT COUNT(*) FROM results`:                    jobs,
			} {
				var n int
				if err := st.WriteDB().QueryRow(q).Scan(&n); err != nil || n != want {
					t.Errorf("%s in %s = %d (%v), want %d", q, filepath.Base(saved), n, err, want)
				}
			}
		})
	}
}

// doneOverHTTP reports whether jobs 1…n are all done, asked of the server.
func doneOverHTTP(t *testing.T, url string, n int) bool {
	t.Helper()
	for id := 1; id <= n; id++ {
		if statusOverHTTP(t, url, int64(id)) != inkwell.StatusDone {
			return false
		}
	}
	return true
}

// statusOverHTTP is job id's status, asked of the server ("" when it does
// not answer).
func statusOverHTTP(t *testing.T, url string, id int64) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/v1/jobs/%d", url, id))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var d inkwell.JobDetail
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return ""
	}
	return d.Job.Status
}
