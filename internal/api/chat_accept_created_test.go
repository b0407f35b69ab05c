package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
)

// TestWriteCreated_IsWriteJSONButForThePayloadsIndent: the 201 is the
// answer writeJSON writes, but for the white space inside the payload;
// indented again, it is writeJSON's byte for byte.
func TestWriteCreated_IsWriteJSONButForThePayloadsIndent(t *testing.T) {
	created := time.Date(2026, 12, 1, 8, 42, 49, 123456000, time.UTC)
	for _, tc := range pinnedHashes {
		r := httptest.NewRequest(http.MethodPost, "/v1/jobs", nil)
		_, payload, err := readJob(r, []byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"k-1", `"payload": null`, `a"b\c<>&`} {
			job := inkwell.Job{ID: 7, IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload, Status: inkwell.StatusQueued, CreatedAt: created, Account: "acme"}
			got, want := httptest.NewRecorder(), httptest.NewRecorder()
			writeCreated(got, job, payload)
			writeJSON(want, http.StatusCreated, inkwell.JobDetail{Job: job, Attempts: []inkwell.Attempt{}})
			var indented bytes.Buffer
			if err := json.Indent(&indented, got.Body.Bytes(), "", "  "); err != nil {
				t.Fatalf("%s: the 201 is not JSON: %v\n%s", tc.name, err, got.Body)
			}
			if got.Code != http.StatusCreated || got.Header().Get("Content-Type") != "application/json" || indented.String() != want.Body.String() {
				t.Errorf("%s, key %q: writeCreated wrote %d %q\n%s\nindented:\n%s\nwant\n%s", tc.name, key, got.Code, got.Header().Get("Content-Type"), got.Body, &indented, want.Body)
			}
			if cl := got.Header().Get("Content-Length"); cl != strconv.Itoa(got.Body.Len()) {
				t.Errorf("%s: Content-Length %q for a body of %d bytes", tc.name, cl, got.Body.Len())
			}
			if !strings.Contains(got.Body.String(), "\n    \"payload\": "+string(payload)+",\n") {
				t.Errorf("%s: the payload is not written as stored:\n%s", tc.name, got.Body)
			}
		}
	}
	// A job that comes back with another payload than the one stored is
	// written by writeJSON.
	job := inkwell.Job{ID: 1, Payload: json.RawMessage(`{"prompt":"x"}`), CreatedAt: created}
	got, want := httptest.NewRecorder(), httptest.NewRecorder()
	writeCreated(got, job, []byte(`{"prompt":"y"}`))
	writeJSON(want, http.StatusCreated, inkwell.JobDetail{Job: job, Attempts: []inkwell.Attempt{}})
	if got.Body.String() != want.Body.String() {
		t.Errorf("another payload: writeCreated wrote\n%s\nwant\n%s", got.Body, want.Body)
	}
}
