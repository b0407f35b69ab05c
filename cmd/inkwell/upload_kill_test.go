package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestServe_KilledMidUploadLeavesNoTemporaryFile: POST /v1/files spools
// the file part to a temporary file (internal/api files.go, spool). A
// serve killed with SIGKILL while an upload is in flight (an OOM kill, a
// node lost) runs none of its deferred clean-up, so a spool removed only
// by it would stay in the temporary directory for good, up to 100 MiB a
// crash. The spool is unlinked as soon as it is created: while the upload
// runs, serve holds it open with no name (/proc/PID/fd says so), and after
// the kill and a restart the directory holds nothing of it.
func TestServe_KilledMidUploadLeavesNoTemporaryFile(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	env := append(childEnv(), "TMPDIR="+tmp)
	srv := StartChild(t, inkwellBin, env, waitLimit, "serve", "--db", db, "--addr", "127.0.0.1:0")
	fdDir := fmt.Sprintf("/proc/%d/fd", srv.Pid())
	if _, err := os.ReadDir(fdDir); err != nil {
		t.Skipf("no %s to see serve's open files: %v", fdDir, err)
	}

	const boundary = "killBoundary"
	head := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n" +
		"--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.jsonl\"\r\n\r\n"
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/files", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	line := `{"custom_id":"x","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi"}]}}` + "\n"
	if _, err := io.WriteString(pw, head+strings.Repeat(line, 20_000)); err != nil { // ~2.3 MB, the upload left open
		t.Fatalf("write the upload: %v", err)
	}
	named := func() []string {
		m, _ := filepath.Glob(filepath.Join(tmp, "inkwell-upload-*"))
		return m
	}
	// The spool, open in serve: its fd links to "TMP/inkwell-upload-N (deleted)".
	var spool string
	storetest.WaitFor(t, waitLimit, "serve holding the spooled upload open", func() bool {
		fds, _ := os.ReadDir(fdDir)
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err != nil || !strings.HasPrefix(target, filepath.Join(tmp, "inkwell-upload-")) {
				continue
			}
			if fi, err := os.Stat(filepath.Join(fdDir, fd.Name())); err == nil && fi.Size() > 1<<20 {
				spool = target
				return true
			}
		}
		return false
	})
	if !strings.HasSuffix(spool, " (deleted)") || len(named()) > 0 {
		t.Errorf("while the upload runs its spool is %q and the directory holds %v: want it unlinked at once, open with no name", spool, named())
	}

	srv.Signal(t, syscall.SIGKILL)
	pw.CloseWithError(fmt.Errorf("test done"))
	<-done
	StartChild(t, inkwellBin, env, waitLimit, "serve", "--db", db, "--addr", "127.0.0.1:0")
	if left := named(); len(left) > 0 {
		t.Errorf("after SIGKILL mid-upload and a restart, spooled uploads remain in the temporary directory: %v", left)
	}
}
