package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
)

// TestCancel_NamesTheTokenThatAskedForIt: a cancel over HTTP with a token
// stores who asked ("cancelled by token <id>"), never the secret.
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
}
