package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
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
	c, err := st.Claim(ctx, "east")
	if err != nil || c == nil {
		t.Fatalf("Claim = %v, %v", c, err)
	}
	lock.Release() // the lane's process is gone

	code, stdout, stderr := runCLI(t, "status", "--db", db)
	if code != 0 {
		t.Fatalf("inkwell status: exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"JOBS (SELECT * FROM job_overview)",
		"queued   0     -",
		"running  1     1h00m (job 1)  restart that lane: its startup recovery closes these as failed (1 on lane east silent",
		"east  silent  1h00m ago",
		"LAST RECOVERY RUN\n  none yet",
		"NOT DONE (SELECT * FROM job_board)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inkwell status does not print %q:\n%s", want, stdout)
		}
	}

	code, stdout, stderr = runCLI(t, "status", "--db", db, "--json")
	var rep statusReport
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

func TestRedactDSN(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"inkwell.db", "inkwell.db"},
		{"/var/lib/inkwell/inkwell.db", "/var/lib/inkwell/inkwell.db"},
		{"postgres://inkwell@db:5432/inkwell", "postgres://inkwell@db:5432/inkwell"},
		{"postgres://inkwell:s3cret@db:5432/inkwell?sslmode=disable", "postgres://inkwell:xxxxx@db:5432/inkwell?sslmode=disable"},
		{"postgresql://db/inkwell?password=s3cret&sslmode=require", "postgresql://db/inkwell?password=xxxxx&sslmode=require"},
	} {
		if got := redactDSN(tc.in); got != tc.want {
			t.Errorf("redactDSN(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(redactDSN(tc.in), "s3cret") {
			t.Errorf("redactDSN(%q) leaks the password", tc.in)
		}
	}
}
