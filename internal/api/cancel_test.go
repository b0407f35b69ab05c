package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// POST /v1/jobs/{id}/cancel (docs/design.md §9), on both dialects, over a real
// store and a real server.

// cancelEnv is an api.Server over a store of either dialect; OnCancelled
// goes to onCancelled (a lane's CancelAttempt when the test runs one).
type cancelEnv struct {
	t           *testing.T
	st          *store.Store
	srv         *httptest.Server
	mu          sync.Mutex
	onCancelled func(int64)
	cancelled   []int64 // every OnCancelled call
}

func newCancelEnv(t *testing.T, st *store.Store) *cancelEnv {
	t.Helper()
	e := &cancelEnv{t: t, st: st}
	a := api.New(api.Config{Store: st, Logger: storetest.TestLogger(t), OnCancelled: func(id int64) {
		e.mu.Lock()
		e.cancelled = append(e.cancelled, id)
		f := e.onCancelled
		e.mu.Unlock()
		if f != nil {
			f(id)
		}
	}})
	a.SetReady(true)
	e.srv = httptest.NewServer(a)
	t.Cleanup(e.srv.Close)
	return e
}

func (e *cancelEnv) hooked() []int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.cancelled)
}

func (e *cancelEnv) do(method, path string, header map[string]string, body string) reply {
	e.t.Helper()
	return (&env{t: e.t, srv: e.srv}).do(method, path, header, []byte(body))
}

func (e *cancelEnv) cancel(id int64) reply {
	e.t.Helper()
	return e.do(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/cancel", id), nil, "")
}

func (e *cancelEnv) accept(key string) inkwell.Job {
	e.t.Helper()
	r := e.do(http.MethodPost, "/v1/jobs", map[string]string{"Idempotency-Key": key, "Content-Type": "application/json"},
		`{"prompt":"a line about `+key+`","max_words":5}`)
	if r.status != http.StatusCreated {
		e.t.Fatalf("accept %s: %d %s", key, r.status, r.body)
	}
	return r.detail(e.t).Job
}

func (e *cancelEnv) show(id int64) inkwell.JobDetail {
	e.t.Helper()
	d, err := e.st.Show(context.Background(), id)
	if err != nil {
		e.t.Fatalf("Show %d: %v", id, err)
	}
	return d
}

// snapshot is every row of every table, each row one line naming each
// value's type, sorted (as api_test.go's contents, on either dialect).
func (e *cancelEnv) snapshot() map[string][]string {
	e.t.Helper()
	q := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`
	if e.st.Dialect() == "postgres" {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`
	}
	rows, err := e.st.DB().QueryContext(context.Background(), q)
	if err != nil {
		e.t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	if len(tables) < 6 {
		e.t.Fatalf("found tables %q, want at least Inkwell's six", tables)
	}
	out := map[string][]string{}
	for _, tbl := range tables {
		out[tbl] = tableLines(e.t, e.st, tbl)
	}
	return out
}

func tableLines(t *testing.T, st *store.Store, tbl string) []string {
	t.Helper()
	rows, err := st.DB().QueryContext(context.Background(), `SELECT * FROM "`+tbl+`"`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var line strings.Builder
		for i, v := range vals {
			fmt.Fprintf(&line, "%s=%T:%q ", cols[i], v, fmt.Sprint(v))
		}
		out = append(out, line.String())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func (e *cancelEnv) assertUnchanged(what string, before map[string][]string) {
	e.t.Helper()
	if diff := cmp.Diff(before, e.snapshot()); diff != "" {
		e.t.Errorf("%s changed the database (-before +after):\n%s", what, diff)
	}
}

// claim claims the oldest queued job as lane "test" would, under its lock.
func claim(t *testing.T, st *store.Store, l *store.LaneLock) *store.Claimed {
	t.Helper()
	cs, err := st.ClaimUpTo(t.Context(), l, 1)
	if err != nil || len(cs) != 1 {
		t.Fatalf("ClaimUpTo 1: %v, %v; want one claim", cs, err)
	}
	return cs[0]
}

func lockLane(t *testing.T, st *store.Store, name string) *store.LaneLock {
	t.Helper()
	l, err := st.LockLane(t.Context(), name)
	if err != nil {
		t.Fatalf("LockLane %s: %v", name, err)
	}
	t.Cleanup(func() { l.Release() })
	return l
}

func complete(t *testing.T, st *store.Store, c *store.Claimed) error {
	t.Helper()
	return st.CompleteIfRunning(t.Context(), store.CompleteParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID,
		Text: "the text", Account: inkwell.DefaultAccount, AmountMicros: 10, ProviderRequestID: fmt.Sprintf("req-%d", c.Job.ID)})
}

// cancelConflict is a cancel's 409: the error form and the job detail.
type cancelConflict struct {
	Error *inkwell.Error `json:"error"`
	inkwell.JobDetail
}

func (r reply) conflict(t *testing.T) cancelConflict {
	t.Helper()
	if r.status != http.StatusConflict {
		t.Errorf("status = %d, want 409 (body %s)", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var c cancelConflict
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.Error == nil || c.Job.ID == 0 {
		t.Fatalf("status %d body %s is not {\"error\": …, \"job\": …, \"attempts\": …}: %v", r.status, r.body, err)
	}
	if c.Error.Code != inkwell.ECONFLICT || strings.TrimSpace(c.Error.Message) == "" {
		t.Errorf("error = %+v, want code %q and a message", c.Error, inkwell.ECONFLICT)
	}
	return c
}

// TestCancel_Route: a queued job is cancelled at once (200, the job
// detail as GET answers it); a second cancel answers 200 with the same
// job and writes nothing; a done job or one failed otherwise is 409 with
// the error and the job as it is; unknown 404; bad id 400; a cross-site
// browser POST 403. Every refusal writes nothing.
func TestCancel_Route(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := newCancelEnv(t, st)
		queued := e.accept("queued")

		r := e.cancel(queued.ID)
		if r.status != http.StatusOK {
			t.Fatalf("cancel queued: %d %s, want 200", r.status, r.body)
		}
		d := r.detail(t)
		if d.Job.ID != queued.ID || d.Job.Status != inkwell.StatusFailed || d.Job.ErrorClass != inkwell.ClassCancelled ||
			d.Job.Error != "cancelled by api" || d.Job.FinishedAt == nil || len(d.Attempts) != 0 || d.Attempts == nil {
			t.Errorf("cancel queued answered %s; want the job failed, class cancelled, by api, no attempts", r.body)
		}
		if get := e.do(http.MethodGet, fmt.Sprintf("/v1/jobs/%d", queued.ID), nil, ""); !bytes.Equal(get.body, r.body) {
			t.Errorf("cancel answered\n%s\nGET answers\n%s\nwant the same job detail", r.body, get.body)
		}
		if h := e.hooked(); len(h) != 0 {
			t.Errorf("OnCancelled called with %v for a queued job; want no call (no attempt to abort)", h)
		}

		before := e.snapshot()
		again := e.cancel(queued.ID)
		if again.status != http.StatusOK || !bytes.Equal(again.body, r.body) {
			t.Errorf("cancel twice: %d %s; want 200 with the same job", again.status, again.body)
		}
		e.assertUnchanged("a second cancel", before)

		// Done: the completion won.
		l := lockLane(t, st, "test")
		doneJob := e.accept("done")
		c := claim(t, st, l)
		if err := complete(t, st, c); err != nil {
			t.Fatal(err)
		}
		// Failed for another reason.
		failedJob := e.accept("failed")
		fc := claim(t, st, l)
		if err := st.FailIfRunning(t.Context(), store.FailParams{JobID: fc.Job.ID, AttemptID: fc.Attempt.ID,
			Error: "provider: HTTP 400", Class: inkwell.ClassRejected}); err != nil {
			t.Fatal(err)
		}
		before = e.snapshot()
		for _, want := range []struct {
			id     int64
			status string
		}{{doneJob.ID, inkwell.StatusDone}, {failedJob.ID, inkwell.StatusFailed}} {
			r := e.cancel(want.id)
			got := r.conflict(t)
			if got.Job.ID != want.id || got.Job.Status != want.status || len(got.Attempts) != 1 {
				t.Errorf("cancel of a %s job: %s; want 409 with the job %s and its attempt", want.status, r.body, want.status)
			}
			if want.status == inkwell.StatusDone && (got.Result == nil || got.Charge == nil) {
				t.Errorf("cancel of a done job: %s; want its result and charge in the answer", r.body)
			}
			if !strings.Contains(got.Error.Message, want.status) {
				t.Errorf("409 message %q does not say the job is %s", got.Error.Message, want.status)
			}
		}
		assertError(t, e.cancel(999), http.StatusNotFound, inkwell.ENOTFOUND)
		for _, bad := range []string{"0", "-1", "abc", "1.5"} {
			assertError(t, e.do(http.MethodPost, "/v1/jobs/"+bad+"/cancel", nil, ""), http.StatusBadRequest, inkwell.EINVALID)
		}
		assertError(t, e.do(http.MethodGet, fmt.Sprintf("/v1/jobs/%d/cancel", doneJob.ID), nil, ""), http.StatusMethodNotAllowed, inkwell.EMETHOD)

		// A page of another site may not cancel: the same guard as retry's.
		live := e.accept("live")
		before = e.snapshot()
		for _, h := range []map[string]string{
			{"Sec-Fetch-Site": "cross-site"},
			{"Sec-Fetch-Site": "same-site"},
			{"Origin": "http://evil.example"},
		} {
			assertError(t, e.do(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/cancel", live.ID), h, ""), http.StatusForbidden, inkwell.EFORBIDDEN)
		}
		e.assertUnchanged("refused cancels (409, 404, 400, 405, 403)", before)
		if r := e.do(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/cancel", live.ID),
			map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": e.srv.URL}, ""); r.status != http.StatusOK {
			t.Errorf("same-origin cancel: %d %s, want 200", r.status, r.body)
		}
	})
}

// TestCancel_RunningAbortsTheCall: a running job's cancel answers 200 with
// the job and its attempt failed, class cancelled, and the lane's
// provider call is aborted at once through OnCancelled: the provider
// simulator sees its client leave (nothing billed), and the lane's slot is
// free long before the simulator's 30 s latency.
func TestCancel_RunningAbortsTheCall(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		sim := simtest.MustStart(t, providersim.Config{Latency: 30 * time.Second})
		obs := &finishes{}
		lane := runLane(t, st, sim, obs, time.Hour) // cross-process look far away: only the hook can abort it
		e := newCancelEnv(t, st)
		e.onCancelled = lane.CancelAttempt

		job := e.accept("slow")
		lane.Wake()
		storetest.WaitFor(t, 10*time.Second, "the job running", func() bool { return e.show(job.ID).Job.Status == inkwell.StatusRunning })
		start := time.Now()
		r := e.cancel(job.ID)
		if r.status != http.StatusOK {
			t.Fatalf("cancel running: %d %s, want 200", r.status, r.body)
		}
		d := r.detail(t)
		if d.Job.Status != inkwell.StatusFailed || d.Job.ErrorClass != inkwell.ClassCancelled || len(d.Attempts) != 1 ||
			d.Attempts[0].Status != inkwell.StatusFailed || d.Attempts[0].ErrorClass != inkwell.ClassCancelled ||
			!strings.Contains(d.Attempts[0].Error, "may have billed") {
			t.Errorf("cancel running answered %s; want job and attempt failed, class cancelled, saying the provider may have billed", r.body)
		}
		if h := e.hooked(); len(h) != 1 || h[0] != d.Attempts[0].ID {
			t.Errorf("OnCancelled calls %v, want one with attempt %d", h, d.Attempts[0].ID)
		}
		storetest.WaitFor(t, 10*time.Second, "the aborted call's outcome", func() bool { return obs.count(worker.OutcomeCancelled) == 1 })
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("the call ended %v after the cancel; want it aborted at once", took)
		}
		if n := obs.count(worker.OutcomeFailed) + obs.count(worker.OutcomeFenced); n != 0 {
			t.Errorf("the aborted call counted as failed or fenced %d times; want only %q", n, worker.OutcomeCancelled)
		}
		if l := sim.MustLedger(t); len(l.Entries) != 0 {
			t.Errorf("the simulator billed %+v; want nothing (its client left before the answer)", l.Entries)
		}
		after := e.show(job.ID)
		if after.Result != nil || after.Charge != nil || after.Job.Status != inkwell.StatusFailed {
			t.Errorf("after the abort the job is %+v; want failed, no result, no charge", after)
		}
		// The slot is free: the lane's one slot claims the next job, whose
		// cancel aborts its call the same way.
		next := e.accept("next")
		lane.Wake()
		storetest.WaitFor(t, 10*time.Second, "the next job claimed in the freed slot", func() bool {
			return e.show(next.ID).Job.Status == inkwell.StatusRunning
		})
		if r := e.cancel(next.ID); r.status != http.StatusOK {
			t.Fatalf("cancel next: %d %s", r.status, r.body)
		}
		storetest.WaitFor(t, 10*time.Second, "the second aborted call's outcome", func() bool { return obs.count(worker.OutcomeCancelled) == 2 })
	})
}

// TestCancel_CompletionRace: cancels race completions of the same running
// attempts. Whichever commits first wins, and the answer says which: 200
// with the job cancelled and no result, or 409 with the job done, its
// result and charge. Never both, never neither.
func TestCancel_CompletionRace(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := newCancelEnv(t, st)
		l := lockLane(t, st, "race")
		const n = 12
		var claimed []*store.Claimed
		for i := range n {
			e.accept(fmt.Sprintf("race-%02d", i))
			claimed = append(claimed, claim(t, st, l))
		}
		wins := map[int]int{}
		for _, c := range claimed {
			var wg sync.WaitGroup
			var completeErr error
			wg.Go(func() { completeErr = complete(t, st, c) })
			r := e.cancel(c.Job.ID)
			wg.Wait()
			d := e.show(c.Job.ID)
			wins[r.status]++
			switch r.status {
			case http.StatusOK:
				if inkwell.ErrorCode(completeErr) != inkwell.ECONFLICT || d.Job.Status != inkwell.StatusFailed || d.Result != nil || d.Charge != nil {
					t.Errorf("job %d: cancel won (200) but completion said %v and the job is %+v", c.Job.ID, completeErr, d)
				}
			case http.StatusConflict:
				got := r.conflict(t)
				if completeErr != nil || got.Job.Status != inkwell.StatusDone || got.Result == nil || d.Job.Status != inkwell.StatusDone {
					t.Errorf("job %d: cancel refused (409 %s) but completion said %v and the job is %+v", c.Job.ID, r.body, completeErr, d.Job)
				}
			default:
				t.Errorf("job %d: cancel answered %d %s", c.Job.ID, r.status, r.body)
			}
		}
		t.Logf("cancel won %d, completion won %d of %d races", wins[http.StatusOK], wins[http.StatusConflict], n)
		// The completion that committed first, for certain: 409 with done.
		e.accept("first")
		c := claim(t, st, l)
		if err := complete(t, st, c); err != nil {
			t.Fatal(err)
		}
		before := e.snapshot()
		r := e.cancel(c.Job.ID)
		if got := r.conflict(t); got.Job.Status != inkwell.StatusDone {
			t.Errorf("cancel after the completion: %s; want 409 with the job done", r.body)
		}
		e.assertUnchanged("a cancel refused after the completion", before)
	})
}

// finishes counts lane outcomes (worker.Observer).
type finishes struct {
	mu  sync.Mutex
	out []string
}

func (f *finishes) Claimed(string) {}
func (f *finishes) Finished(_, outcome string, _ float64, _ inkwell.Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.out = append(f.out, outcome)
}

func (f *finishes) count(outcome string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, o := range f.out {
		if o == outcome {
			n++
		}
	}
	return n
}

// runLane runs a worker lane over st calling sim, until the test ends.
func runLane(t *testing.T, st *store.Store, sim *simtest.Sim, obs worker.Observer, cancelPoll time.Duration) *worker.Lane {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	p, err := provider.NewOpenAI(provider.OpenAIConfig{URL: sim.URL, Timeout: time.Minute, Client: &http.Client{Transport: tr},
		Logger: storetest.TestLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	lane := worker.New(st, worker.Config{Name: "local", Provider: p, Logger: storetest.TestLogger(t), Concurrency: 1,
		Poll: 50 * time.Millisecond, Grace: 5 * time.Second, Observer: obs, CancelPoll: cancelPoll})
	if _, err := lane.Open(t.Context()); err != nil {
		t.Fatalf("lane Open: %v", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lane.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("lane Run did not return within 30s of its stop")
		}
		lane.Close()
	})
	return lane
}
