package api_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/inkwell/inkwell"
)

// TestDashboard_E2E drives the dashboard in headless Chromium (Debian's
// chromium package) through chromedp: it loads the page from a real server
// over a real SQLite file, reads the counts, clicks Retry on a failed job,
// sees the job leave failed (in the page and in the database), clicks
// Cancel on a queued job and on a running one (POST /v1/jobs/{id}/cancel)
// and sees them failed, class cancelled, opens a job's timeline, and saves
// screenshots.
//
// Screenshots go to $INKWELL_TEST_ARTIFACTS (a relative path is read from
// the module root; unset, the test's temp dir, gone when it ends). With
// INKWELL_DOCS_SCREENSHOT=path the dashboard shot is also written there
// (docs/dashboard.png is made this way).
//
// Without a chromium binary it skips, saying why, unless CI is set: then
// it fails, since .ci/run installs chromium.
func TestDashboard_E2E(t *testing.T) {
	t.Parallel()
	browser := findChromium(t)
	sc := mustScene(t)
	before := sc.counts(t)

	ctx := newBrowser(t, browser)
	// Paused: the page then refreshes only after an action (app.js's
	// send), never while the test reads it. Unpaused, a refresh every 5 s
	// replaces #live between a query's finding a node and reading it ("No
	// node with given id") once a loaded machine makes each step slow.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1440, 1000), chromedp.Navigate(sc.url+"/"),
		chromedp.WaitVisible("#count-failed"), chromedp.Click("#pause")); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	for _, st := range inkwell.JobStatuses {
		text, err := chromedp.Run(ctx, chromedp.Text("#count-"+st))
		if err != nil {
			t.Fatalf("read count of %s: %v", st, err)
		}
		if got, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64); err != nil || got != before[st] {
			t.Errorf("page shows %s = %q, want %d (the database's count)", st, text, before[st])
		}
	}
	action, err := chromedp.Run(ctx, chromedp.Text("#tile-running .action"))
	if err != nil || !strings.HasPrefix(action, "lane east silent for ") {
		t.Errorf("running tile action = %q, %v; want the silent lane's action", action, err)
	}
	saveShot(t, ctx, "dashboard.png", os.Getenv("INKWELL_DOCS_SCREENSHOT"))

	// Retry the job that failed after its provider call had begun.
	id := sc.providerFailed
	wantFailed := before[inkwell.StatusFailed] - 1
	if err := chromedp.Do(ctx, chromedp.Click(fmt.Sprintf(`button[data-retry="%d"]`, id))); err != nil {
		t.Fatalf("click Retry on job %d: %v", id, err)
	}
	left := fmt.Sprintf(`document.getElementById("count-failed").dataset.count === "%d" && !document.getElementById("failed-%d")`, wantFailed, id)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](left,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Text("#tile-failed"))
		t.Fatalf("after clicking Retry on job %d, the page never showed %d failed and the job gone: %v (failed tile: %q)", id, wantFailed, err, text)
	}
	job, err := sc.st.Job(t.Context(), id)
	if err != nil || job.Status != inkwell.StatusQueued {
		t.Errorf("job %d after Retry = %q, %v; want queued in the database", id, job.Status, err)
	}
	if n := sc.counts(t)[inkwell.StatusQueued]; n != before[inkwell.StatusQueued]+1 {
		t.Errorf("queued after Retry = %d, want %d", n, before[inkwell.StatusQueued]+1)
	}
	queued, err := chromedp.Run(ctx, chromedp.Text(fmt.Sprintf("#active-%d", id)))
	if err != nil || !strings.Contains(queued, "queued") {
		t.Errorf("in-flight row of job %d = %q, %v; want it listed as queued", id, queued, err)
	}
	saveShot(t, ctx, "dashboard-after-retry.png", "")

	// Cancel a queued job: it leaves the jobs in flight and shows among the
	// failed ones, cancelled before it ran.
	cancelled := sc.queued[1]
	if err := chromedp.Do(ctx, chromedp.Click(fmt.Sprintf(`button[data-cancel="%d"]`, cancelled))); err != nil {
		t.Fatalf("click Cancel on job %d: %v", cancelled, err)
	}
	moved := fmt.Sprintf(`!document.getElementById("active-%d") && !!document.getElementById("failed-%d")`, cancelled, cancelled)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](moved,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("after clicking Cancel on queued job %d, the page never listed it as failed: %v", cancelled, err)
	}
	row, err := chromedp.Run(ctx, chromedp.Text(fmt.Sprintf("#failed-%d", cancelled)))
	if err != nil || !strings.Contains(row, "cancelled") || !strings.Contains(row, "nothing to do: cancelled before any call that could bill it") {
		t.Errorf("failed row of job %d = %q, %v; want class cancelled, cancelled before any call that could bill it", cancelled, row, err)
	}
	if job, err := sc.st.Job(t.Context(), cancelled); err != nil || job.Status != inkwell.StatusFailed || job.ErrorClass != inkwell.ClassCancelled {
		t.Errorf("job %d after Cancel = %q (%q), %v; want failed, cancelled, in the database", cancelled, job.Status, job.ErrorClass, err)
	}
	// Cancel the running job: the page asks first (its call is in flight),
	// and the answer here is yes.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.confirm = function () { return true; }; true`)); err != nil {
		t.Fatalf("answer the confirmation: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(fmt.Sprintf(`button[data-cancel="%d"]`, sc.liveRunning))); err != nil {
		t.Fatalf("click Cancel on running job %d: %v", sc.liveRunning, err)
	}
	moved = fmt.Sprintf(`!document.getElementById("active-%d") && !!document.getElementById("failed-%d")`, sc.liveRunning, sc.liveRunning)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](moved,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("after clicking Cancel on running job %d, the page never listed it as failed: %v", sc.liveRunning, err)
	}
	row, err = chromedp.Run(ctx, chromedp.Text(fmt.Sprintf("#failed-%d", sc.liveRunning)))
	if err != nil || !strings.Contains(row, "cancelled after a call that may have billed it") {
		t.Errorf("failed row of job %d = %q, %v; want it cancelled in flight, maybe billed", sc.liveRunning, row, err)
	}
	saveShot(t, ctx, "dashboard-after-cancel.png", "")

	// The timeline of the job recovery closed names the run and its evidence.
	if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", sc.url, sc.restarted)), chromedp.WaitVisible(".timeline")); err != nil {
		t.Fatalf("load job %d: %v", sc.restarted, err)
	}
	tl, err := chromedp.Run(ctx, chromedp.Text(".timeline"))
	if err != nil || !strings.Contains(tl, "closed by recovery run 1 of lane west") || !strings.Contains(tl, "evidence: flock") {
		t.Errorf("timeline of job %d = %q, %v; want the recovery run and its evidence", sc.restarted, tl, err)
	}
	saveShot(t, ctx, "job.png", "")
}

// findChromium returns the browser to drive: $INKWELL_CHROMIUM, or the
// first of chromium, chromium-browser, google-chrome on PATH.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("INKWELL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const why = "no chromium on PATH (apt-get install -y chromium, or set INKWELL_CHROMIUM)"
	if os.Getenv("CI") != "" {
		t.Fatal("CI is set but " + why)
	}
	t.Skip("dashboard e2e skipped: " + why)
	return ""
}

// newBrowser starts a fresh headless Chromium with its own profile and
// stops it, and every goroutine chromedp started, when the test ends.
//
// Chromium keeps its singleton socket in a new org.chromium.Chromium.XXXXXX
// directory under TMPDIR, not in the profile, and leaves it there when it
// is stopped. So it gets a TMPDIR of the test's own, which the testing
// package removes (and fails the test if it cannot), and the test checks
// through the profile's SingletonSocket link, which names this browser's
// directory and no other's, that the directory is in there.
func newBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	tmp, profile := t.TempDir(), t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Env("TMPDIR=" + tmp),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1440, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	tctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute) // a bound, not a measure: a loaded 2-core machine takes minutes
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(tctx); err != nil { // starts the browser
		t.Fatalf("start %s: %v", path, err)
	}
	sock, err := os.Readlink(filepath.Join(profile, "SingletonSocket"))
	if err != nil {
		t.Fatalf("find the browser's singleton directory: %v", err)
	}
	if singletonDir := filepath.Dir(sock); filepath.Dir(singletonDir) != tmp {
		t.Errorf("the browser's singleton directory is %s, want it under its own TMPDIR %s", singletonDir, tmp)
	}
	return tctx
}

// saveShot writes a full-page PNG to the artifacts directory, and to extra
// when extra is set.
func saveShot(t *testing.T, ctx context.Context, name, extra string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := artifactsDir(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifacts dir: %v", err)
	}
	for _, p := range []string{filepath.Join(dir, name), extra} {
		if p == "" {
			continue
		}
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatalf("save screenshot: %v", err)
		}
		t.Logf("screenshot: %s", p)
	}
}

// artifactsDir is where screenshots are kept: $INKWELL_TEST_ARTIFACTS, a
// relative value read from the module root (go test runs each package in
// its own directory, but .ci/run names one directory for the whole clone),
// or the test's temporary directory when it is unset.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("INKWELL_TEST_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if filepath.IsAbs(dir) {
		return dir
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			return filepath.Join(root, dir)
		}
		parent := filepath.Dir(root)
		if parent == root {
			t.Fatalf("INKWELL_TEST_ARTIFACTS=%s is relative, and no go.mod above %s to read it from", dir, root)
		}
		root = parent
	}
}
