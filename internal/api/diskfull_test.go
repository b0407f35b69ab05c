package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestAccept_DiskFull fills a real SQLite file to its limit: SQLite's
// max_page_count makes the database report SQLITE_FULL exactly as a full
// disk does. The request that does not fit gets 503 with Retry-After,
// nothing of it is written, and the server keeps serving.
func TestAccept_DiskFull(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, filepath.Join(t.TempDir(), "full.db"), store.Options{})
	srv := httptest.NewServer(api.New(api.Config{Store: st}))
	t.Cleanup(srv.Close)
	db := st.WriteDB() // the store's one write connection: the pragma applies to it
	var pages int
	if err := db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+8)); err != nil {
		t.Fatal(err)
	}
	prompt := strings.Repeat("ink ", 1900) // ~7.6 KB: a few pages a job
	var full *http.Response
	for i := 0; i < 200 && full == nil; i++ {
		before := countJobsFull(t, st)
		resp := postFull(t, srv.URL, fmt.Sprintf("full-%d", i), `{"prompt":"`+prompt+`"}`)
		switch resp.StatusCode {
		case http.StatusCreated:
		case http.StatusServiceUnavailable:
			full = resp
			if got := countJobsFull(t, st); got != before {
				t.Fatalf("jobs after a refused accept = %d, want %d (nothing written)", got, before)
			}
		default:
			t.Fatalf("POST %d: status %d, want 201 or 503", i, resp.StatusCode)
		}
	}
	if full == nil {
		t.Fatal("the database never filled up")
	}
	if got := full.Header.Get("Retry-After"); got == "" {
		t.Error("503 without Retry-After")
	}
	resp, err := http.Get(srv.URL + "/v1/jobs/1")
	if err != nil {
		t.Fatalf("GET /v1/jobs/1 while full: %v", err)
	}
	resp.Body.Close() // an unclosed body keeps its connection (goleak in TestMain)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/jobs/1 while full: %d, want 200", resp.StatusCode)
	}
	if _, err := db.Exec(`PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	if resp := postFull(t, srv.URL, "after-full", `{"prompt":"room again"}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST after space came back: status %d, want 201", resp.StatusCode)
	}
}

func postFull(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"/v1/jobs", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func countJobsFull(t *testing.T, st *store.Store) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRow(`SELECT COUNT(*) FROM jobs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
