package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestCLI_StatusAndShow builds a job left running by a lane that went
// silent an hour ago, reads it with 'inkwell status' (text and JSON), does
// what the next action says with 'inkwell recover', and reads the closed
// attempt's recovery evidence with 'inkwell show'.
func TestCLI_StatusAndShow(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	hourAgo := func() time.Time { return time.Now().Add(-time.Hour).UTC() }
	st := storetest.MustOpen(t, db, store.Options{NowFunc: hourAgo})
	ctx := t.Context()
	payload := []byte(`{"prompt":"a haiku about ink","account":"default","max_words":50}`)
	if _, _, err := st.Accept(ctx, store.AcceptParams{IdempotencyKey: "k1", RequestHash: inkwell.RequestHash(payload), Payload: payload}); err != nil {
		t.Fatal(err)
	}
	lock, err := st.LockLane(ctx, "east")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterLane(ctx, lock); err != nil {
		t.Fatal(err)
	}
	cs, err := st.ClaimUpTo(ctx, lock, 1)
	if err != nil || len(cs) != 1 {
		t.Fatalf("ClaimUpTo = %v, %v", cs, err)
	}
	lock.Release() // the lane's process is gone

	code, stdout, stderr := runCLI(t, "status", "--db", db)
	if code != 0 {
		t.Fatalf("inkwell status: exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"JOBS (SELECT * FROM job_overview)",
		"queued   0     -",
		"running  1     1h00m (job 1)  lane east silent for 1h00m (pid ",
		"east  silent  1h00m ago",
		"LAST RECOVERY RUN\n  none yet",
		"NOT DONE (SELECT * FROM job_board)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inkwell status does not print %q:\n%s", want, stdout)
		}
	}

	code, stdout, stderr = runCLI(t, "status", "--db", db, "--json")
	var rep api.OverviewResponse
	if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil {
		t.Fatalf("inkwell status --json: exit %d, stderr %q, stdout %q", code, stderr, stdout)
	}
	if len(rep.Overview) != 4 || len(rep.Lanes) != 1 || rep.Lanes[0].Alive || len(rep.Jobs) != 1 || rep.LastRecoveryRun != nil {
		t.Errorf("status --json = %+v; want 4 statuses, 1 silent lane, 1 job, no recovery run", rep)
	}

	if code, stdout, stderr = runCLI(t, "recover", "--db", db, "--lane", "east"); code != 0 {
		t.Fatalf("inkwell recover: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "show", "1", "--db", db)
	if code != 0 {
		t.Fatalf("inkwell show 1: exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"worker restarted (recovery run 1)",
		"closed by startup recovery\n  run 1 on lane east",
		"closed 1 attempt(s), back-filled 0, failed 1 job(s)",
		"evidence (flock): flock(LOCK_EX|LOCK_NB) granted",
		"previous holder: pid " + fmt.Sprint(os.Getpid()),
		"next: inspect the error, then inkwell retry 1 (the worker died during the attempt",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inkwell show 1 does not print %q:\n%s", want, stdout)
		}
	}
}

// TestCLI_StatusByClass: inkwell status prints each failed job's class and
// its class's next action, the jobs waiting for back-off, and the class in
// --json.
func TestCLI_StatusByClass(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	st := storetest.MustOpen(t, db, store.Options{})
	ctx := t.Context()
	lock, err := st.LockLane(ctx, "east")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	if err := st.RegisterLane(ctx, lock); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
	for i, p := range []store.FailParams{
		{Error: "provider: provider call: client error: HTTP 401: invalid API key", Class: inkwell.ClassRejected},
		{Error: "provider: provider call: timeout: context deadline exceeded", Class: inkwell.ClassTimeout},
		{Error: "provider: provider call: server error: HTTP 503", Class: inkwell.ClassProviderError, RetryAt: &at},
	} {
		payload := []byte(fmt.Sprintf(`{"prompt":"a haiku about ink %d","account":"default","max_words":50}`, i))
		if _, _, err := st.Accept(ctx, store.AcceptParams{IdempotencyKey: fmt.Sprint("k", i), RequestHash: inkwell.RequestHash(payload), Payload: payload}); err != nil {
			t.Fatal(err)
		}
		cs, err := st.ClaimUpTo(ctx, lock, 1)
		if err != nil || len(cs) != 1 {
			t.Fatalf("ClaimUpTo = %v, %v", cs, err)
		}
		p.JobID, p.AttemptID = cs[0].Job.ID, cs[0].Attempt.ID
		if err := st.FailIfRunning(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := runCLI(t, "status", "--db", db)
	if code != 0 {
		t.Fatalf("inkwell status: exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"ATTEMPT  FOR",
		"CLASS",
		"wait: 1 waiting for back-off, next at " + at.Format("2006-01-02T15:04:05Z"),
		"; 1 rejected by the provider: fix its cause first",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inkwell status does not print %q:\n%s", want, stdout)
		}
	}
	// Each job's line: its class, then its error, then its class's action.
	for prefix, wants := range map[string][]string{
		"  3   queued": {"provider_error", "provider: provider call: server error: HTTP 503",
			"wait: back-off after attempt 1 failed (provider_error): automatic retry, claimed from "},
		"  1   failed": {"rejected", "provider: provider call: client error: HTTP 401: invalid API key",
			"fix its cause first (the API key, the model or the request; inspect the error), then inkwell retry 1"},
		"  2   failed": {"timeout", "provider: provider call: timeout", "with a provider that ignores keys (openai) a retry may bill twice"},
	} {
		var line string
		for _, l := range strings.Split(stdout, "\n") {
			if strings.HasPrefix(l, prefix) {
				line = l
			}
		}
		at := 0
		for _, w := range wants {
			i := strings.Index(line[at:], w)
			if i < 0 {
				t.Errorf("inkwell status: the line of %q does not print %q after column %d:\n%s", prefix, w, at, line)
				break
			}
			at += i + len(w)
		}
	}
	code, stdout, stderr = runCLI(t, "status", "--db", db, "--json")
	var rep api.OverviewResponse
	if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil {
		t.Fatalf("inkwell status --json: exit %d, stderr %q, stdout %q", code, stderr, stdout)
	}
	classes := map[int64]string{}
	for _, j := range rep.Jobs {
		classes[j.ID] = j.ErrorClass
	}
	if want := map[int64]string{1: "rejected", 2: "timeout", 3: "provider_error"}; fmt.Sprint(classes) != fmt.Sprint(want) {
		t.Errorf("status --json jobs' error_class = %v, want %v", classes, want)
	}
}

// TestCLI_NeverPrintsThePassword runs commands against a real PostgreSQL
// with a password in the URL (the test server trusts local connections,
// so the password is ignored by the server but still in --db): neither a
// success nor a refusal prints it, however it is spelled.
func TestCLI_NeverPrintsThePassword(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(storetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "s3cr@t") // percent-encoded in the URL
	withParam := *u
	withParam.User = url.User("nosuchuser")
	withParam.RawQuery += "&password=s3cr3t"
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"MigrateEncoded", []string{"migrate", "--db", u.String()}, 0},
		{"RefusedEncoded", []string{"status", "--db", strings.Replace(u.String(), "//"+u.User.Username()+":", "//nosuchuser:", 1)}, 1},
		{"RefusedParameter", []string{"status", "--db", withParam.String()}, 1},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		if code != tc.code {
			t.Errorf("%s: inkwell %s: exit %d, want %d; stdout %q, stderr %q", tc.name, tc.args[0], code, tc.code, stdout, stderr)
		}
		for _, secret := range []string{"s3cr", "s3cr3t"} {
			if strings.Contains(stdout+stderr, secret) {
				t.Errorf("%s: inkwell %s prints the password:\nstdout %q\nstderr %q", tc.name, tc.args[0], stdout, stderr)
			}
		}
		if tc.code == 0 && !strings.Contains(stdout, "xxxxx") {
			t.Errorf("%s: inkwell %s does not show the redacted URL:\nstdout %q\nstderr %q", tc.name, tc.args[0], stdout, stderr)
		}
	}
}
