package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// TestDashboard_E2ESignIn drives the dashboard with tokens in force in
// headless Chromium (see TestDashboard_E2E for the browser and the
// screenshots): the dashboard sends the browser to /signin; a request
// without the session, a cross-site form post (a page on another port
// auto-submitting a form to Retry, without the CSRF token) and a
// same-origin POST under the session but without its CSRF token are each
// refused and write nothing; then the operator signs in with an operator
// token, clicks Retry (the job leaves failed, audit_log names the token),
// and signs out (the dashboard asks for a sign-in again).
func TestDashboard_E2ESignIn(t *testing.T) {
	t.Parallel()
	browser := findChromium(t)
	sc := mustScene(t)
	tok, text, err := sc.st.CreateToken(t.Context(), inkwell.DefaultAccount, store.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	id := sc.providerFailed
	stillFailed := func(what string) {
		t.Helper()
		if job, err := sc.st.Job(t.Context(), id); err != nil || job.Status != inkwell.StatusFailed {
			t.Errorf("after %s, job %d = %q, %v; want still failed", what, id, job.Status, err)
		}
		if rows, err := sc.st.AuditLog(t.Context(), 0, 0); err != nil || len(rows) != 0 {
			t.Errorf("after %s, audit_log = %+v, %v; want nothing written", what, rows, err)
		}
	}

	// Without a session: an API request is 401, the browser goes to /signin.
	resp, err := http.Post(fmt.Sprintf("%s/v1/jobs/%d/retry", sc.url, id), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("retry without a session = %d, want 401", resp.StatusCode)
	}
	stillFailed("a retry without a session")
	ctx := newBrowser(t, browser)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1440, 1000), chromedp.Navigate(sc.url+"/"), chromedp.WaitVisible("#token")); err != nil {
		t.Fatalf("load dashboard without a session (want the sign-in form): %v", err)
	}
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || !strings.HasSuffix(loc, "/signin") {
		t.Errorf("dashboard without a session went to %q, %v; want /signin", loc, err)
	}
	saveShot(t, ctx, "signin.png", "")

	// Sign in with a wrong token first: refused, no session.
	if err := chromedp.Do(ctx, chromedp.SendKeys("#token", "ink_0123456789abcdef_"+strings.Repeat("1", 64)), chromedp.Click("#signin"),
		chromedp.WaitVisible("#signin-error")); err != nil {
		t.Fatalf("sign in with a wrong token: %v", err)
	}

	// Sign in with the operator token.
	if err := chromedp.Do(ctx, chromedp.SetValue("#token", text), chromedp.Click("#signin"), chromedp.WaitVisible("#count-failed"),
		chromedp.Click("#pause")); err != nil { // refreshed after actions only: see TestDashboard_E2E
		t.Fatalf("sign in: %v", err)
	}
	who, err := chromedp.Run(ctx, chromedp.Text(".signout"))
	if err != nil || !strings.Contains(who, "token "+tok.ID) {
		t.Errorf("signed-in header = %q, %v; want token %s", who, err, tok.ID)
	}

	// Under the session, a same-origin POST without the CSRF token.
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`fetch("/v1/jobs/%d/retry", {method: "POST"}).then(r => r.status)`, id),
		chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusForbidden {
		t.Errorf("POST under the session without the CSRF token = %d, %v; want 403", status, err)
	}
	stillFailed("a POST without the CSRF token")

	// A page of another origin posts a form to Retry: the browser sends the
	// session cookie along (same site), but neither the CSRF token nor a
	// same-origin Sec-Fetch-Site.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><form method="post" action="%s/v1/jobs/%d/retry"><input name="x" value="1"></form><script>document.forms[0].submit()</script>`, sc.url, id)
	}))
	t.Cleanup(evil.Close)
	if err := chromedp.Do(ctx, chromedp.Navigate(evil.URL), chromedp.WaitReady("body")); err != nil {
		t.Fatalf("load the other site's page: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`location.href.startsWith(%q)`, sc.url),
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the other site's form never posted: %v", err)
	}
	body, err := chromedp.Run(ctx, chromedp.Text("body"))
	if err != nil || !strings.Contains(body, "forbidden") {
		t.Errorf("the cross-site form post answered %q, %v; want 403 forbidden", body, err)
	}
	stillFailed("a cross-site form post")

	// Back on the dashboard: Retry with the session's CSRF token.
	if err := chromedp.Do(ctx, chromedp.Navigate(sc.url+"/"), chromedp.WaitVisible("#count-failed"), chromedp.Click("#pause"),
		chromedp.Click(fmt.Sprintf(`button[data-retry="%d"]`, id))); err != nil {
		t.Fatalf("click Retry on job %d: %v", id, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`!document.getElementById("failed-%d")`, id),
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("after clicking Retry on job %d, the page never showed it gone from failed: %v", id, err)
	}
	if job, err := sc.st.Job(t.Context(), id); err != nil || job.Status != inkwell.StatusQueued {
		t.Errorf("job %d after Retry = %q, %v; want queued", id, job.Status, err)
	}
	if rows, err := sc.st.AuditLog(t.Context(), id, 0); err != nil || len(rows) != 1 || rows[0].Actor != "token "+tok.ID || rows[0].Action != "retry" {
		t.Errorf("audit of job %d = %+v, %v; want one retry by token %s", id, rows, err, tok.ID)
	}
	saveShot(t, ctx, "dashboard-signed-in.png", "")

	// Sign out: the dashboard asks for a sign-in again.
	if err := chromedp.Do(ctx, chromedp.Click("#signout"), chromedp.WaitVisible("#token"), chromedp.Navigate(sc.url+"/"), chromedp.WaitVisible("#token")); err != nil {
		t.Fatalf("sign out, then load the dashboard (want the sign-in form): %v", err)
	}
}
