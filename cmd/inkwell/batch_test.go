package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// `inkwell batch` against a real `inkwell serve` child, and a batch sent to
// a server killed with SIGKILL just before and just after its commit.

func batchFile(t *testing.T, lines ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "requests.jsonl")
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func jobLine(customID, prompt string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/jobs","body":{"prompt":%q,"max_words":5}}`, customID, prompt)
}

func TestCLI_BatchEndToEnd(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--sim-latency", "10ms")
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})

	bad := batchFile(t, jobLine("a", "a poem"), jobLine("b", " "))
	code, stdout, stderr := runCLI(t, "batch", "submit", bad, "--server", srv.URL)
	if code != 1 || !strings.Contains(stderr, "line 2: body: prompt is required") {
		t.Errorf("batch submit of a bad line: exit %d, stdout %q, stderr %q; want 1 naming line 2's prompt", code, stdout, stderr)
	}
	if n := countWhere(t, st, `SELECT COUNT(*) FROM jobs`); n != 0 {
		t.Fatalf("a refused batch stored %d jobs", n)
	}

	good := batchFile(t, jobLine("first", "a haiku about ink"), "", jobLine("second", "a letter to the sea"))
	code, stdout, stderr = runCLI(t, "batch", "submit", good, "--server", srv.URL)
	m := regexp.MustCompile(`(?m)^batch (\d+) accepted: 2 lines\nkey (\S+)`).FindStringSubmatch(stdout)
	if code != 0 || m == nil {
		t.Fatalf("batch submit: exit %d, stdout %q, stderr %q; want the batch id, 2 lines and the key", code, stdout, stderr)
	}
	id, key := m[1], m[2]
	code, stdout, _ = runCLI(t, "batch", "submit", good, "--server", srv.URL, "--key", key)
	if code != 0 || !strings.Contains(stdout, "batch "+id+" already accepted") {
		t.Errorf("re-submit with --key %s: exit %d, %q; want batch %s already accepted", key, code, stdout, id)
	}
	storetest.WaitFor(t, waitLimit, "both jobs done", func() bool {
		return countWhere(t, st, `SELECT COUNT(*) FROM jobs WHERE status = 'done'`) == 2
	})
	code, stdout, _ = runCLI(t, "batch", "status", id, "--server", srv.URL)
	if code != 0 || !strings.Contains(stdout, "queued 0  running 0  done 2  failed 0  (ended") {
		t.Errorf("batch status: exit %d, %q; want 2 done and ended", code, stdout)
	}
	code, stdout, _ = runCLI(t, "batch", "output", id, "--server", srv.URL)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], `"custom_id":"first","response":{"status_code":200`) ||
		!strings.Contains(lines[1], `"custom_id":"second"`) || !strings.HasSuffix(lines[1], `"error":null}`) {
		t.Errorf("batch output: exit %d, %q; want two done lines in the OpenAI output form", code, stdout)
	}
	if code, _, stderr = runCLI(t, "batch", "output", "99", "--server", srv.URL); code != 1 || !strings.Contains(stderr, "batch 99 not found") {
		t.Errorf("batch output 99: exit %d, stderr %q; want 1, not found", code, stderr)
	}
}

// TestServe_BatchCrashAroundCommit: a server killed just before the batch
// commits stored nothing of it, and the re-send after restart creates it;
// one killed just after stored all of it, and the re-send answers 200 with
// the same batch and creates nothing.
func TestServe_BatchCrashAroundCommit(t *testing.T) {
	t.Parallel()
	body := strings.Join([]string{jobLine("a", "one"), jobLine("b", "two"), jobLine("c", "three")}, "\n")
	for _, tc := range []struct {
		point      string
		jobs, want int
	}{{"accept.before-commit", 0, http.StatusCreated}, {"accept.after-commit", 3, http.StatusOK}} {
		t.Run(tc.point, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "inkwell.db")
			crashing := StartChild(t, inkwellBin, append(childEnv(), "INKWELL_CRASH_AT="+tc.point), waitLimit,
				"serve", "--db", db, "--addr", "127.0.0.1:0", "--sim-latency", "1h")
			if status, err := postBatch(crashing.URL, "crash-batch", body); err == nil {
				t.Fatalf("POST /v1/batches to a server set to crash at %s answered %d", tc.point, status)
			}
			<-crashing.exited
			srv := startServe(t, db, "--sim-latency", "1h")
			st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
			if n := countWhere(t, st, `SELECT COUNT(*) FROM jobs WHERE batch_id IS NOT NULL`); n != tc.jobs {
				t.Errorf("after the crash at %s: %d jobs of the batch, want %d (all or nothing)", tc.point, n, tc.jobs)
			}
			status, err := postBatch(srv.URL, "crash-batch", body)
			if err != nil || status != tc.want {
				t.Errorf("re-send after restart: %d %v, want %d", status, err, tc.want)
			}
			if n := countWhere(t, st, `SELECT COUNT(*) FROM jobs`); n != 3 {
				t.Errorf("after the re-send: %d jobs, want 3", n)
			}
			if n := countWhere(t, st, `SELECT COUNT(*) FROM batches`); n != 1 {
				t.Errorf("after the re-send: %d batches, want 1", n)
			}
		})
	}
}

func postBatch(url, key, body string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/batches", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/jsonl")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
