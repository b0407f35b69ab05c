package api_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(storetest.Exit)) // storetest.Exit: a line when PostgreSQL tests were skipped
}

// env is a real api.Server over a real store on a SQLite file, served on
// 127.0.0.1 by httptest.
type env struct {
	t        *testing.T
	st       *store.Store
	api      *api.Server
	srv      *httptest.Server
	accepted atomic.Int64 // OnAccepted calls
}

func setup(t *testing.T, opts store.Options) *env {
	t.Helper()
	e := &env{t: t}
	e.st = storetest.MustOpen(t, storetest.SQLitePath(t), opts)
	e.api = api.New(api.Config{Store: e.st, Logger: storetest.TestLogger(t), OnAccepted: func() { e.accepted.Add(1) }})
	e.api.SetReady(true)
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	return e
}

// reply is one HTTP answer, read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) errorBody(t *testing.T) inkwell.Error {
	t.Helper()
	var e struct {
		Error *inkwell.Error `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == nil {
		t.Fatalf("status %d body %q is not {\"error\": {\"code\", \"message\"}}: %v", r.status, r.body, err)
	}
	return *e.Error
}

func (r reply) detail(t *testing.T) inkwell.JobDetail {
	t.Helper()
	var d inkwell.JobDetail
	if err := json.Unmarshal(r.body, &d); err != nil {
		t.Fatalf("status %d body %q is not a job: %v", r.status, r.body, err)
	}
	return d
}

func (e *env) do(method, path string, header map[string]string, body []byte) reply {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func (e *env) post(key, body string) reply {
	e.t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return e.do(http.MethodPost, "/v1/jobs", h, []byte(body))
}

// counts is the number of rows in every table of the database.
func (e *env) counts() map[string]int {
	e.t.Helper()
	out := map[string]int{}
	for tbl, rows := range e.contents() {
		out[tbl] = len(rows)
	}
	return out
}

// contents is every row of every table, each row one line naming each
// value's type (so NULL, an empty string and 0 differ), sorted: two
// snapshots are equal only if no row was added, removed or changed in any
// column.
func (e *env) contents() map[string][]string {
	e.t.Helper()
	out := map[string][]string{}
	for _, tbl := range e.tables() {
		out[tbl] = e.tableRows(tbl)
	}
	return out
}

func (e *env) tables() []string {
	e.t.Helper()
	rows, err := e.st.DB().QueryContext(context.Background(), `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		tables = append(tables, n)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	if len(tables) < 6 {
		e.t.Fatalf("found tables %q, want at least Inkwell's six", tables)
	}
	return tables
}

func (e *env) tableRows(tbl string) []string {
	e.t.Helper()
	rows, err := e.st.DB().QueryContext(context.Background(), `SELECT * FROM "`+tbl+`"`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		e.t.Fatal(err)
	}
	out := []string{}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			e.t.Fatal(err)
		}
		var line strings.Builder
		for i, v := range vals {
			fmt.Fprintf(&line, "%s=%T:%q ", cols[i], v, fmt.Sprint(v))
		}
		out = append(out, line.String())
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// assertUnchanged fails when any table's contents differ from before, a
// snapshot taken with contents: a refusal must write nothing, not even
// an update that keeps the row counts.
func (e *env) assertUnchanged(before map[string][]string) {
	e.t.Helper()
	if diff := cmp.Diff(before, e.contents()); diff != "" {
		e.t.Errorf("database changed (-before +after):\n%s", diff)
	}
}

func assertError(t *testing.T, r reply, status int, code string) inkwell.Error {
	t.Helper()
	if r.status != status {
		t.Errorf("status = %d, want %d (body %s)", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	e := r.errorBody(t)
	if e.Code != code || strings.TrimSpace(e.Message) == "" {
		t.Errorf("error = %+v, want code %q and a message", e, code)
	}
	return e
}

func TestAccept_BadInputIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	// One accepted job, so "nothing written" also covers a key already in use.
	if r := e.post("existing", `{"prompt":"already here"}`); r.status != http.StatusCreated {
		t.Fatalf("setup POST: %d %s", r.status, r.body)
	}
	const ok = `{"prompt":"a haiku about ink"}`
	longPrompt := strings.Repeat("p", inkwell.MaxPromptBytes+1)
	tests := []struct {
		name, key, body string
		status          int
		code            string
		mention         string // a word the message must contain, so the client knows what to fix
	}{
		{"NoKey", "", ok, 400, inkwell.EINVALID, "Idempotency-Key"},
		{"KeyTooLong", strings.Repeat("k", inkwell.MaxKeyBytes+1), ok, 400, inkwell.EINVALID, "Idempotency-Key"},
		{"KeyNotASCII", "clé-1", ok, 400, inkwell.EINVALID, "Idempotency-Key"},
		{"KeyWithSpace", "a key", ok, 400, inkwell.EINVALID, "Idempotency-Key"},
		{"EmptyBody", "k", "", 400, inkwell.EINVALID, "empty"},
		{"InvalidJSON", "k", `{"prompt": "unterminated`, 400, inkwell.EINVALID, "JSON"},
		{"NotAnObject", "k", `["a haiku"]`, 400, inkwell.EINVALID, "JSON"},
		{"JSONString", "k", `"a haiku"`, 400, inkwell.EINVALID, "JSON"},
		{"JSONNull", "k", `null`, 400, inkwell.EINVALID, "prompt"},
		{"UnknownField", "k", `{"prompt":"x","temperature":0.5}`, 400, inkwell.EINVALID, "temperature"},
		{"PromptWrongType", "k", `{"prompt":42}`, 400, inkwell.EINVALID, "prompt"},
		{"MaxWordsString", "k", `{"prompt":"x","max_words":"10"}`, 400, inkwell.EINVALID, "max_words"},
		{"MaxWordsFraction", "k", `{"prompt":"x","max_words":1.5}`, 400, inkwell.EINVALID, "max_words"},
		{"AccountWrongType", "k", `{"prompt":"x","account":7}`, 400, inkwell.EINVALID, "account"},
		{"NoPrompt", "k", `{}`, 400, inkwell.EINVALID, "prompt"},
		{"EmptyPrompt", "k", `{"prompt":""}`, 400, inkwell.EINVALID, "prompt"},
		{"BlankPrompt", "k", `{"prompt":" \n\t "}`, 400, inkwell.EINVALID, "prompt"},
		{"PromptWithNUL", "k", `{"prompt":"a\u0000b"}`, 400, inkwell.EINVALID, "NUL"},
		{"PromptOverLimit", "k", `{"prompt":"` + longPrompt + `"}`, 400, inkwell.EINVALID, "prompt"},
		{"BodyOverLimit", "k", `{"prompt":"` + strings.Repeat("b", inkwell.MaxBodyBytes) + `"}`, 413, inkwell.ETOOLARGE, "body"},
		{"InvalidUTF8", "k", "{\"prompt\":\"ink \xff\xfe\"}", 400, inkwell.EINVALID, "UTF-8"},
		{"TrailingGarbage", "k", `{"prompt":"x"} and more`, 400, inkwell.EINVALID, "one JSON object"},
		{"TwoObjects", "k", `{"prompt":"x"}{"prompt":"y"}`, 400, inkwell.EINVALID, "one JSON object"},
		{"TrailingBrace", "k", `{"prompt":"x"}}`, 400, inkwell.EINVALID, "one JSON object"},
		{"TrailingBracket", "k", `{"prompt":"x"}]`, 400, inkwell.EINVALID, "one JSON object"},
		{"MaxWordsNegative", "k", `{"prompt":"x","max_words":-1}`, 400, inkwell.EINVALID, "max_words"},
		{"MaxWordsTooMany", "k", fmt.Sprintf(`{"prompt":"x","max_words":%d}`, inkwell.MaxMaxWords+1), 400, inkwell.EINVALID, "max_words"},
		{"MaxWordsHuge", "k", `{"prompt":"x","max_words":99999999999999999999}`, 400, inkwell.EINVALID, "max_words"},
		{"AccountWithSpace", "k", `{"prompt":"x","account":"two words"}`, 400, inkwell.EINVALID, "account"},
		{"AccountTooLong", "k", `{"prompt":"x","account":"` + strings.Repeat("a", inkwell.MaxAccountBytes+1) + `"}`, 400, inkwell.EINVALID, "account"},
		{"AccountLeadingDash", "k", `{"prompt":"x","account":"-acme"}`, 400, inkwell.EINVALID, "account"},
		{"AccountNotASCII", "k", `{"prompt":"x","account":"société"}`, 400, inkwell.EINVALID, "account"},
		{"ExistingKeyBadBody", "existing", `{"prompt":""}`, 400, inkwell.EINVALID, "prompt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Not parallel: each case checks that the whole database is unchanged.
			before := e.contents()
			r := e.post(tc.key, tc.body)
			got := assertError(t, r, tc.status, tc.code)
			if !strings.Contains(got.Message, tc.mention) {
				t.Errorf("message %q does not mention %q", got.Message, tc.mention)
			}
			e.assertUnchanged(before)
		})
	}
	if n := e.accepted.Load(); n != 1 {
		t.Errorf("OnAccepted called %d times, want 1 (the setup job only)", n)
	}
}

// TestContents_SeesAnUpdateThatKeepsTheCounts guards the "writes nothing"
// checks above: a refusal that changed one column of one row, leaving
// every count as it was, must still show as a change.
func TestContents_SeesAnUpdateThatKeepsTheCounts(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	if r := e.post("k", `{"prompt":"before"}`); r.status != http.StatusCreated {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	counts, before := e.counts(), e.contents()
	if _, err := e.st.WriteDB().ExecContext(t.Context(), `UPDATE jobs SET request_hash = 'changed'`); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(counts, e.counts()); diff != "" {
		t.Fatalf("an UPDATE changed the counts:\n%s", diff)
	}
	if cmp.Equal(before, e.contents()) {
		t.Errorf("contents() did not see an UPDATE of jobs.request_hash")
	}
}

// TestAccept_LimitsAreInclusive: input exactly at each documented limit is accepted.
func TestAccept_LimitsAreInclusive(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	body := fmt.Sprintf(`{"prompt":%q,"account":%q,"max_words":%d}`,
		strings.Repeat("p", inkwell.MaxPromptBytes), strings.Repeat("a", inkwell.MaxAccountBytes), inkwell.MaxMaxWords)
	r := e.post(strings.Repeat("k", inkwell.MaxKeyBytes), body)
	if r.status != http.StatusCreated {
		t.Fatalf("status %d (body %s), want 201", r.status, r.body)
	}
}

func TestAccept_Idempotent(t *testing.T) {
	t.Parallel()
	t.Run("NewThenResend", func(t *testing.T) {
		t.Parallel()
		e := setup(t, store.Options{})
		r := e.post("key-1", `{"prompt":"a haiku about ink"}`)
		if r.status != http.StatusCreated {
			t.Fatalf("first POST: %d %s, want 201", r.status, r.body)
		}
		created := r.detail(t)
		if created.Job.ID < 1 || created.Job.Status != inkwell.StatusQueued || created.Job.IdempotencyKey != "key-1" {
			t.Errorf("201 body job = %+v, want a queued job with key key-1", created.Job)
		}
		before := e.contents()
		// The same request, spelled with the defaults written out, is the same request.
		for _, body := range []string{`{"prompt":"a haiku about ink"}`, `{"max_words":50,"account":"default","prompt":"a haiku about ink"}`} {
			r = e.post("key-1", body)
			if r.status != http.StatusOK {
				t.Fatalf("re-send %s: %d %s, want 200", body, r.status, r.body)
			}
			if again := r.detail(t); again.Job.ID != created.Job.ID {
				t.Errorf("re-send answered job %d, want %d", again.Job.ID, created.Job.ID)
			}
		}
		e.assertUnchanged(before)
		if n := e.accepted.Load(); n != 1 {
			t.Errorf("OnAccepted called %d times, want 1", n)
		}
	})
	t.Run("DoneJobComesBackWithItsText", func(t *testing.T) {
		t.Parallel()
		e := setup(t, store.Options{})
		body := `{"prompt":"a haiku about ink","account":"acme","max_words":17}`
		if r := e.post("key-done", body); r.status != http.StatusCreated {
			t.Fatalf("POST: %d %s", r.status, r.body)
		}
		c := storetest.ClaimAs(t, e.st, "local")
		if c == nil {
			t.Fatal("claim: nothing queued")
		}
		var req inkwell.Request
		if err := json.Unmarshal(c.Job.Payload, &req); err != nil || req.Account != "acme" || req.MaxWords != 17 {
			t.Errorf("stored payload %s, want account acme and max_words 17 (err %v)", c.Job.Payload, err)
		}
		if err := e.st.CompleteIfRunning(t.Context(), store.CompleteParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID,
			Text: "ink flows, paper waits", Account: req.Account, AmountMicros: 42, ProviderRequestID: "req-1"}); err != nil {
			t.Fatal(err)
		}
		r := e.post("key-done", body)
		if r.status != http.StatusOK {
			t.Fatalf("re-send of a done job: %d %s, want 200", r.status, r.body)
		}
		d := r.detail(t)
		if d.Job.Status != inkwell.StatusDone || d.Result == nil || d.Result.Text != "ink flows, paper waits" ||
			d.Charge == nil || d.Charge.AmountMicros != 42 || d.Charge.Account != "acme" || len(d.Attempts) != 1 {
			t.Errorf("re-send of a done job answered %s; want it done with its text, charge and attempt", r.body)
		}
	})
	t.Run("OtherBodyIs422", func(t *testing.T) {
		t.Parallel()
		e := setup(t, store.Options{})
		first := e.post("key-2", `{"prompt":"first"}`)
		if first.status != http.StatusCreated {
			t.Fatalf("POST: %d %s", first.status, first.body)
		}
		before := e.contents()
		for _, body := range []string{`{"prompt":"second"}`, `{"prompt":"first","max_words":51}`} {
			r := e.post("key-2", body)
			assertError(t, r, http.StatusUnprocessableEntity, inkwell.EKEYREUSED)
		}
		e.assertUnchanged(before)
		// Keys are unique per account: under another account it is
		// another job.
		if r := e.post("key-2", `{"prompt":"first","account":"other"}`); r.status != http.StatusCreated || r.detail(t).Job.Account != "other" {
			t.Errorf("the same key under account other: %d %s; want 201, a job of other", r.status, r.body)
		}
		job, err := e.st.Job(t.Context(), first.detail(t).Job.ID)
		if err != nil || !strings.Contains(string(job.Payload), `"first"`) {
			t.Errorf("stored job %s (err %v), want the first body kept", job.Payload, err)
		}
	})
	t.Run("FiftyConcurrentMakeOneJob", func(t *testing.T) {
		t.Parallel()
		e := setup(t, store.Options{})
		const n = 50
		replies := make([]reply, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				replies[i] = e.postNoFatal("same-key", `{"prompt":"once only"}`)
			})
		}
		close(start)
		wg.Wait()
		statuses := map[int]int{}
		var id int64
		for i, r := range replies {
			statuses[r.status]++
			if r.status != http.StatusCreated && r.status != http.StatusOK {
				t.Errorf("POST %d: %d %s", i, r.status, r.body)
				continue
			}
			d := r.detail(t)
			if id == 0 {
				id = d.Job.ID
			}
			if d.Job.ID != id {
				t.Errorf("POST %d answered job %d, another answered %d", i, d.Job.ID, id)
			}
		}
		if statuses[http.StatusCreated] != 1 || statuses[http.StatusOK] != n-1 {
			t.Errorf("statuses %v, want one 201 and %d 200", statuses, n-1)
		}
		if got := e.counts()["jobs"]; got != 1 {
			t.Errorf("jobs rows = %d, want 1", got)
		}
		if got := e.accepted.Load(); got != 1 {
			t.Errorf("OnAccepted called %d times, want 1", got)
		}
	})
}

// postNoFatal is post for goroutines other than the test's own.
func (e *env) postNoFatal(key, body string) reply {
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/jobs", strings.NewReader(body))
	if err != nil {
		return reply{status: -1, body: []byte(err.Error())}
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return reply{status: -1, body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func TestShow(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	r := e.post("k", `{"prompt":"show me"}`)
	id := r.detail(t).Job.ID
	got := e.do(http.MethodGet, fmt.Sprintf("/v1/jobs/%d", id), nil, nil)
	if got.status != http.StatusOK || got.detail(t).Job.ID != id || got.detail(t).Attempts == nil {
		t.Errorf("GET job %d: %d %s, want 200 with the job and an attempts list", id, got.status, got.body)
	}
	assertError(t, e.do(http.MethodGet, "/v1/jobs/999", nil, nil), http.StatusNotFound, inkwell.ENOTFOUND)
	for _, bad := range []string{"abc", "0", "-1", "1.5", "99999999999999999999"} {
		t.Run(bad, func(t *testing.T) {
			assertError(t, e.do(http.MethodGet, "/v1/jobs/"+bad, nil, nil), http.StatusBadRequest, inkwell.EINVALID)
		})
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	id := e.post("k", `{"prompt":"retry me"}`).detail(t).Job.ID
	path := fmt.Sprintf("/v1/jobs/%d/retry", id)

	before := e.counts()
	assertError(t, e.do(http.MethodPost, path, nil, nil), http.StatusConflict, inkwell.ECONFLICT) // queued
	c := storetest.ClaimAs(t, e.st, "local")
	if c == nil {
		t.Fatal("claim: nothing queued")
	}
	assertError(t, e.do(http.MethodPost, path, nil, nil), http.StatusConflict, inkwell.ECONFLICT) // running
	if err := e.st.FailIfRunning(t.Context(), store.FailParams{JobID: id, AttemptID: c.Attempt.ID, Error: "provider: 500", Class: inkwell.ClassProviderError}); err != nil {
		t.Fatal(err)
	}
	wokenBefore := e.accepted.Load()
	r := e.do(http.MethodPost, path, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("retry of a failed job: %d %s, want 200", r.status, r.body)
	}
	var body struct{ Job inkwell.Job }
	if err := json.Unmarshal(r.body, &body); err != nil || body.Job.ID != id || body.Job.Status != inkwell.StatusQueued {
		t.Errorf("retry answered %s, want job %d queued", r.body, id)
	}
	if e.accepted.Load() != wokenBefore+1 {
		t.Errorf("retry did not wake the lane")
	}
	if after := e.counts(); after["job_attempts"] != before["job_attempts"]+1 || after["jobs"] != before["jobs"] {
		t.Errorf("after claim, fail and retry: %v, want one attempt more and the same jobs (before %v)", after, before)
	}
	unchanged := e.contents()
	assertError(t, e.do(http.MethodPost, path, nil, nil), http.StatusConflict, inkwell.ECONFLICT) // queued again
	assertError(t, e.do(http.MethodPost, "/v1/jobs/424242/retry", nil, nil), http.StatusNotFound, inkwell.ENOTFOUND)
	assertError(t, e.do(http.MethodPost, "/v1/jobs/x/retry", nil, nil), http.StatusBadRequest, inkwell.EINVALID)
	e.assertUnchanged(unchanged)
}

func TestReadiness(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	s := api.New(api.Config{Store: st})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	get := func(path string) int {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/healthz"); got != http.StatusOK {
		t.Errorf("healthz before ready = %d, want 200", got)
	}
	if got := get("/readyz"); got != http.StatusServiceUnavailable {
		t.Errorf("readyz before SetReady = %d, want 503", got)
	}
	s.SetReady(true)
	if got := get("/readyz"); got != http.StatusOK {
		t.Errorf("readyz after SetReady = %d, want 200", got)
	}
}

// TestAccept_BusyDatabase holds SQLite's write lock from another connection
// (as another process would) for longer than the store's busy timeout.
func TestAccept_BusyDatabase(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{BusyTimeout: 100 * time.Millisecond})
	if r := e.post("first", `{"prompt":"before the lock"}`); r.status != http.StatusCreated {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	failedID := e.failedJob("to-retry")

	other, err := sql.Open("sqlite", e.st.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatalf("take the write lock: %v", err)
	}
	before := e.contents()
	r := e.post("while-busy", `{"prompt":"during the lock"}`)
	assertError(t, r, http.StatusServiceUnavailable, inkwell.EUNAVAILABLE)
	if r.header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
	r = e.do(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/retry", failedID), nil, nil)
	assertError(t, r, http.StatusServiceUnavailable, inkwell.EUNAVAILABLE)
	if got := e.do(http.MethodGet, "/v1/jobs/1", nil, nil); got.status != http.StatusOK {
		t.Errorf("GET while the write lock is held: %d, want 200 (reads go on)", got.status)
	}
	e.assertUnchanged(before)

	if _, err := conn.ExecContext(t.Context(), `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if r := e.post("while-busy", `{"prompt":"during the lock"}`); r.status != http.StatusCreated {
		t.Errorf("the same request after the lock is released: %d %s, want 201 (nothing was stored before)", r.status, r.body)
	}
	if r := e.do(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/retry", failedID), nil, nil); r.status != http.StatusOK {
		t.Errorf("retry after the lock is released: %d %s, want 200", r.status, r.body)
	}
}

// failedJob accepts a job and fails it through the store.
func (e *env) failedJob(key string) int64 {
	e.t.Helper()
	r := e.post(key, `{"prompt":"fails"}`)
	if r.status != http.StatusCreated {
		e.t.Fatalf("POST: %d %s", r.status, r.body)
	}
	c := storetest.ClaimAs(e.t, e.st, "local")
	for c != nil && c.Job.IdempotencyKey != key {
		c = storetest.ClaimAs(e.t, e.st, "local")
	}
	if c == nil {
		e.t.Fatalf("claim %s: not queued", key)
	}
	if err := e.st.FailIfRunning(e.t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "boom", Class: inkwell.ClassProviderError}); err != nil {
		e.t.Fatal(err)
	}
	return c.Job.ID
}
