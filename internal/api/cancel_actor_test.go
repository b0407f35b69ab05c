package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
)

// TestCancel_NamesTheTokenThatAskedForIt: a cancel over HTTP with a token
// stores who asked ("cancelled by token <id>"), never the secret, in the
// job's error and in audit_log.
func TestCancel_NamesTheTokenThatAskedForIt(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthRequired)
	r := se.req(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/cancel", se.acmeJob), "Bearer "+se.operator, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	d, err := se.st.Show(t.Context(), se.acmeJob)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.Split(se.operator, "_")[1] // ink_<id>_<secret>
	if d.Job.ErrorClass != inkwell.ClassCancelled || d.Job.Error != "cancelled by token "+id {
		t.Errorf("cancelled job says %q (%s), want %q", d.Job.Error, d.Job.ErrorClass, "cancelled by token "+id)
	}
	if rows, err := se.st.AuditLog(t.Context(), se.acmeJob, 0); err != nil || len(rows) != 1 || rows[0].Actor != "token "+id || rows[0].Action != "cancel" {
		t.Errorf("audit_log of job %d = %+v, %v; want one cancel by token %s", se.acmeJob, rows, err, id)
	}
}

// TestRetry_WithoutTokensIsAuditedAsAPI: with tokens not in force (on
// loopback, no token yet), a retry over HTTP is recorded as "api".
func TestRetry_WithoutTokensIsAuditedAsAPI(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	id := e.post("k", `{"prompt":"p"}`).detail(t).Job.ID
	if _, err := e.st.Cancel(t.Context(), id, store.ActorCLI); err != nil {
		t.Fatal(err)
	}
	if r := e.do(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/retry", id), nil, nil); r.status != http.StatusOK {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	rows, err := e.st.AuditLog(t.Context(), id, 0)
	if err != nil || len(rows) != 2 || rows[0].Actor != store.ActorAPI || rows[0].Action != store.AuditRetry || rows[1].Actor != store.ActorCLI {
		t.Errorf("audit_log of job %d = %+v, %v; want a cli cancel, then an api retry", id, rows, err)
	}
}
