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
// even when serve is killed (SIGKILL) the moment it has said so.
func TestServe_DatabaseFilesDeletedUnderIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		remove []string // suffixes of the database's name
		says   string
		kill   bool // SIGKILL once it has said so, instead of letting it end
	}{
		{"WALAndSHM", []string{"-wal", "-shm"}, "every commit was copied into", false},
		{"WALAndSHMThenKilled", []string{"-wal", "-shm"}, "every commit was copied into", true},
		{"DatabaseFile", []string{"", "-wal", "-shm"}, "a whole copy of the database", false},
		{"DatabaseFileThenKilled", []string{"", "-wal", "-shm"}, "a whole copy of the database", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "inkwell.db")
			srv := startServe(t, db, "--sim-latency", "10ms", "--heartbeat", "100ms")
			const jobs = 3
			for i := range jobs {
				submit(t, srv.URL, fmt.Sprintf("k%d", i), `{"prompt":"a poem worth keeping"}`)
			}
			storetest.WaitFor(t, waitLimit, "every job done", func() bool { return doneOverHTTP(t, srv.URL, jobs) })
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
				copies, _ := filepath.Glob(db + ".rescued-*")
				if len(copies) != 1 {
					t.Fatalf("rescued copies %v, want one", copies)
				}
				saved = copies[0]
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
		resp, err := http.Get(fmt.Sprintf("%s/v1/jobs/%d", url, id))
		if err != nil {
			return false
		}
		var d inkwell.JobDetail
		err = json.NewDecoder(resp.Body).Decode(&d)
		resp.Body.Close()
		if err != nil || d.Job.Status != inkwell.StatusDone {
			return false
		}
	}
	return true
}
