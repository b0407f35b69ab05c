package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/metrics"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/prometheus/client_golang/prometheus"
)

// A scene is a real server on 127.0.0.1 over a real SQLite file, with jobs
// in every state, built only through the store's transitions. The store's
// clock is set at offsets from the wall clock, because the operator views
// compare against the wall clock (see store/overview_test.go):
//
//	jobs 1-3   done on lane west, two hours ago
//	job 4      failed "worker restarted": lane west died under it and its
//	           restart's recovery closed it (recovery run 1)
//	job 5      failed after the provider call had begun ("provider: …")
//	job 6      failed before any call (unreadable payload)
//	job 7      running on lane east, silent for an hour: restart that lane
//	job 8      running on lane west, alive
//	jobs 9-10  queued: lane west is alive but busy
type scene struct {
	st  *store.Store
	srv *api.Server
	url string
	clk *storetest.WallClock
	// locks are the lanes' locks the scene holds: claims go under them.
	locks map[string]*store.LaneLock

	restarted, providerFailed, unreadable, deadRunning, liveRunning int64
	queued                                                          []int64
}

func mustScene(t *testing.T) *scene {
	t.Helper()
	sc := &scene{clk: &storetest.WallClock{}}
	sc.clk.At(-2 * time.Hour)
	sc.st = storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{NowFunc: sc.clk.Now})

	west := sc.lane(t, "west")
	for i := 1; i <= 3; i++ {
		sc.accept(t, fmt.Sprintf("done-%d", i), "a haiku about ink, number "+fmt.Sprint(i))
		c := sc.claim(t, "west")
		sc.must(t, sc.st.CompleteIfRunning(t.Context(), store.CompleteParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID,
			Text: "Ink settles slowly / the page remembers the hand / that let the words go", Account: "default",
			AmountMicros: 1250, ProviderRequestID: fmt.Sprintf("chatcmpl-%04d", i)}))
	}

	// Lane west dies mid-call; its restart proves it dead and recovers.
	sc.clk.At(-40 * time.Minute)
	sc.restarted = sc.accept(t, "crash", "a sonnet about lighthouses").ID
	sc.claim(t, "west")
	west.Release()
	sc.clk.At(-5 * time.Minute)
	west = sc.lock(t, "west")
	if _, err := sc.st.Recover(t.Context(), west, false); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	sc.must(t, sc.st.RegisterLane(t.Context(), west))
	sc.providerFailed = sc.accept(t, "provider-500", "a limerick about databases").ID
	sc.fail(t, sc.claim(t, "west"), inkwell.ClassProviderError, "provider: HTTP 502 from the provider: upstream timed out")
	sc.unreadable = sc.accept(t, "unreadable", "a shopping list").ID
	sc.fail(t, sc.claim(t, "west"), inkwell.ClassRejected, "payload unreadable: unexpected end of JSON input")

	// Lane east claimed a job an hour ago and has been silent since.
	sc.clk.At(-time.Hour)
	sc.lane(t, "east")
	sc.deadRunning = sc.accept(t, "orphan", "an ode to write-ahead logs").ID
	sc.claim(t, "east")

	// Lane west is alive (its heartbeat a minute ahead stays fresh for the
	// test's length), running one job with two queued behind it.
	sc.clk.At(time.Minute)
	sc.must(t, sc.st.Heartbeat(t.Context(), west, store.LaneBeat{}))
	sc.liveRunning = sc.accept(t, "live", "a story about a river").ID
	sc.claim(t, "west")
	sc.queued = append(sc.queued, sc.accept(t, "queued-1", "a recipe for bread").ID, sc.accept(t, "queued-2", "a letter to the future").ID)

	sc.srv = api.New(api.Config{Store: sc.st, Logger: storetest.TestLogger(t)})
	sc.srv.SetReady(true)
	hs := httptest.NewServer(sc.srv)
	t.Cleanup(hs.Close)
	sc.url = hs.URL
	return sc
}

func (sc *scene) must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (sc *scene) lock(t *testing.T, lane string) *store.LaneLock {
	t.Helper()
	l, err := sc.st.LockLane(t.Context(), lane)
	if err != nil {
		t.Fatalf("LockLane(%s): %v", lane, err)
	}
	t.Cleanup(func() { l.Release() })
	if sc.locks == nil {
		sc.locks = map[string]*store.LaneLock{}
	}
	sc.locks[lane] = l
	return l
}

func (sc *scene) lane(t *testing.T, lane string) *store.LaneLock {
	t.Helper()
	l := sc.lock(t, lane)
	sc.must(t, sc.st.RegisterLane(t.Context(), l))
	return l
}

func (sc *scene) accept(t *testing.T, key, prompt string) inkwell.Job {
	t.Helper()
	payload, _ := json.Marshal(inkwell.Request{Prompt: prompt, Account: "default", MaxWords: 50})
	job, _, err := sc.st.Accept(t.Context(), store.AcceptParams{IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload})
	if err != nil {
		t.Fatalf("Accept(%s): %v", key, err)
	}
	return job
}

func (sc *scene) claim(t *testing.T, lane string) *store.Claimed {
	t.Helper()
	cs, err := sc.st.ClaimUpTo(t.Context(), sc.locks[lane], 1)
	if err != nil || len(cs) != 1 {
		t.Fatalf("ClaimUpTo(%s, 1) = %v, %v; want a job", lane, cs, err)
	}
	return cs[0]
}

func (sc *scene) fail(t *testing.T, c *store.Claimed, class inkwell.ErrorClass, msg string) {
	t.Helper()
	sc.must(t, sc.st.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: msg, Class: class}))
}

func (sc *scene) counts(t *testing.T) map[string]int64 {
	t.Helper()
	rows, err := sc.st.Overview(t.Context())
	if err != nil {
		t.Fatalf("Overview: %v", err)
	}
	m := map[string]int64{}
	for _, r := range rows {
		m[r.Status] = r.Jobs
	}
	return m
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: read: %v", url, err)
	}
	return res.StatusCode, string(b)
}

func wantContains(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s does not contain %q", what, w)
		}
	}
}

func TestDashboard_Pages(t *testing.T) {
	t.Parallel()
	sc := mustScene(t)
	want := map[string]int64{"queued": 2, "running": 2, "failed": 3, "done": 3}
	got := sc.counts(t)
	for st, n := range want {
		if got[st] != n {
			t.Fatalf("scene %s = %d, want %d (the scene is built wrong)", st, got[st], n)
		}
	}

	t.Run("Dashboard", func(t *testing.T) {
		code, body := get(t, sc.url+"/")
		if code != http.StatusOK {
			t.Fatalf("GET / = %d, want 200", code)
		}
		for st, n := range want {
			wantContains(t, "GET /", body, fmt.Sprintf(`id="count-%s" data-count="%d"`, st, n))
		}
		wantContains(t, "GET /", body,
			fmt.Sprintf(`data-retry="%d"`, sc.restarted), fmt.Sprintf(`data-retry="%d"`, sc.providerFailed), fmt.Sprintf(`data-retry="%d"`, sc.unreadable),
			"lane east silent for 1h0", // its holder still runs (this test): the words name its process
			"wait: lane west claims next, when its running job ends",
			`<span class="pill l-silent">silent</span>`, `<span class="pill l-alive">alive</span>`,
			"1</b> attempts", // the last recovery run closed one attempt
			// each failed job's class, and the words of its class
			`<span class="pill c-worker_restarted">worker_restarted</span>`, `<span class="pill c-provider_error">provider_error</span>`,
			`<span class="pill c-rejected">rejected</span>`,
			fmt.Sprintf("safe to retry: inkwell retry %d", sc.providerFailed),
			fmt.Sprintf("fix its cause first (the API key, the model or the request; inspect the error), then inkwell retry %d", sc.unreadable),
		)
		// A Cancel button on every queued and running job, saying which it
		// is (app.js asks before it aborts a call in flight); none on a
		// failed one, which has Retry.
		for _, id := range append([]int64{sc.deadRunning, sc.liveRunning}, sc.queued...) {
			wantContains(t, "GET /", body, fmt.Sprintf(`data-cancel="%d"`, id))
		}
		wantContains(t, "GET /", body, fmt.Sprintf(`data-cancel="%d" data-status="running"`, sc.liveRunning),
			fmt.Sprintf(`data-cancel="%d" data-status="queued"`, sc.queued[0]))
		for _, id := range []int64{sc.restarted, sc.providerFailed, sc.unreadable} {
			if strings.Contains(body, fmt.Sprintf(`data-cancel="%d"`, id)) {
				t.Errorf("GET / has a Cancel button for failed job %d", id)
			}
		}
	})
	t.Run("JobPageCancel", func(t *testing.T) {
		_, body := get(t, fmt.Sprintf("%s/jobs/%d", sc.url, sc.queued[0]))
		wantContains(t, "queued job page", body, fmt.Sprintf(`data-cancel="%d"`, sc.queued[0]))
		_, body = get(t, fmt.Sprintf("%s/jobs/%d", sc.url, sc.restarted))
		if strings.Contains(body, "data-cancel") {
			t.Errorf("failed job page has a Cancel button")
		}
	})
	t.Run("JobTimelineShowsRecoveryEvidence", func(t *testing.T) {
		code, body := get(t, fmt.Sprintf("%s/jobs/%d", sc.url, sc.restarted))
		if code != http.StatusOK {
			t.Fatalf("GET /jobs/%d = %d, want 200", sc.restarted, code)
		}
		wantContains(t, "job page", body, "a sonnet about lighthouses", "attempt 1 started on lane west",
			"attempt 1 failed", "error: worker restarted", "closed by recovery run 1 of lane west", "evidence: flock",
			"previous holder: pid", "the provider may already have billed it")
	})
	t.Run("DoneJobShowsResultAndCharge", func(t *testing.T) {
		code, body := get(t, sc.url+"/jobs/1")
		if code != http.StatusOK {
			t.Fatalf("GET /jobs/1 = %d, want 200", code)
		}
		wantContains(t, "done job page", body, "attempt 1 done after", "charged 0.001250 to account default (provider request chatcmpl-0001)",
			"Ink settles slowly", "nothing to do: the job is done")
	})
	t.Run("JobPageNotFound", func(t *testing.T) {
		if code, _ := get(t, sc.url+"/jobs/999"); code != http.StatusNotFound {
			t.Errorf("GET /jobs/999 = %d, want 404", code)
		}
	})
	t.Run("OverviewJSON", func(t *testing.T) {
		code, body := get(t, sc.url+"/v1/overview")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/overview = %d, want 200", code)
		}
		var ov api.OverviewResponse
		if err := json.Unmarshal([]byte(body), &ov); err != nil {
			t.Fatalf("GET /v1/overview: %v\n%s", err, body)
		}
		run := ov.LastRecoveryRun
		if len(ov.Overview) != 4 || len(ov.Lanes) != 2 || run == nil || run.AttemptsClosed != 1 {
			t.Fatalf("GET /v1/overview = %d rows, %d lanes, run %+v; want 4, 2, a run that closed 1 attempt", len(ov.Overview), len(ov.Lanes), run)
		}
		// Times are times, and the evidence is JSON, not text to parse again.
		var ev store.Evidence
		if run.StartedAt.IsZero() || json.Unmarshal(run.Evidence, &ev) != nil || ev.Proof == "" {
			t.Errorf("last_recovery_run = started %v, evidence %s; want a time and the evidence as an object", run.StartedAt, run.Evidence)
		}
	})
	t.Run("Static", func(t *testing.T) {
		code, body := get(t, sc.url+"/static/app.js")
		if code != http.StatusOK || !strings.Contains(body, "data-retry") {
			t.Errorf("GET /static/app.js = %d, want 200 with the retry handler", code)
		}
		// The Cancel button's request: POST /v1/jobs/{id}/cancel, as Retry
		// sends POST /v1/jobs/{id}/retry, with the refusal's message shown.
		wantContains(t, "app.js", body, `button[data-cancel]`, `"/cancel"`, `method: "POST"`, `(await res.json()).error.message`,
			`dataset.status === "running"`)
	})
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	sc := mustScene(t)
	post := func(key, body string) int {
		req, _ := http.NewRequest(http.MethodPost, sc.url+"/v1/jobs", strings.NewReader(body))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST /v1/jobs: %v", err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := post("m-1", `{"prompt":"x"}`); code != http.StatusCreated {
		t.Fatalf("POST new = %d, want 201", code)
	}
	if code := post("m-1", `{"prompt":"x"}`); code != http.StatusOK {
		t.Fatalf("POST re-send = %d, want 200", code)
	}
	if code := post("m-1", `{"prompt":"y"}`); code != http.StatusUnprocessableEntity {
		t.Fatalf("POST other body = %d, want 422", code)
	}
	if code := post("", `{"prompt":"x"}`); code != http.StatusBadRequest {
		t.Fatalf("POST without key = %d, want 400", code)
	}
	// Refusals before a handler runs are counted under the route too: a
	// method the path does not take (under the path alone: a made-up
	// method must not make a label of its own), a compressed body.
	for _, c := range []struct {
		method, path string
		header       map[string]string
		want         int
	}{
		{"DELETE", "/v1/jobs/1", nil, http.StatusMethodNotAllowed},
		{"BREW", "/v1/jobs/1", nil, http.StatusMethodNotAllowed},
		{"POST", "/v1/jobs", map[string]string{"Content-Encoding": "gzip", "Idempotency-Key": "m-2"}, http.StatusUnsupportedMediaType},
		{"GET", "/v1/nothing-here", nil, http.StatusNotFound},
	} {
		req, _ := http.NewRequest(c.method, sc.url+c.path, strings.NewReader(`{"prompt":"x"}`))
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Fatalf("%s %s = %d, want %d", c.method, c.path, res.StatusCode, c.want)
		}
	}

	code, body := get(t, sc.url+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d, want 200", code)
	}
	wantContains(t, "GET /metrics", body,
		"inkwell_overview_up 1\n",
		`inkwell_jobs{status="queued"} 3`+"\n", // two from the scene, one posted here
		`inkwell_jobs{status="running"} 2`+"\n",
		`inkwell_jobs{status="failed"} 3`+"\n",
		`inkwell_jobs{status="done"} 3`+"\n",
		"inkwell_live_lanes 1\n",
		`inkwell_lane_alive{lane="east",state="silent"} 0`+"\n",
		`inkwell_lane_alive{lane="west",state="alive"} 1`+"\n",
		`inkwell_lane_running_jobs{lane="east"} 1`+"\n",
		"inkwell_requests_accepted_total 1\n",
		"inkwell_requests_answered_from_key_total 1\n",
		`inkwell_requests_refused_total{reason="key_reused",route="POST /v1/jobs"} 1`+"\n",
		`inkwell_requests_refused_total{reason="invalid",route="POST /v1/jobs"} 1`+"\n",
		`inkwell_requests_refused_total{reason="method_not_allowed",route="/v1/jobs/{id}"} 2`+"\n",
		`inkwell_requests_refused_total{reason="unsupported_media_type",route="POST /v1/jobs"} 1`+"\n",
		`inkwell_requests_refused_total{reason="not_found",route="unmatched"} 1`+"\n",
	)
	if !strings.Contains(body, `inkwell_lane_heartbeat_age_seconds{lane="east"} 36`) {
		t.Errorf("GET /metrics: want lane east's heartbeat age at about 3600 s")
	}
}

func TestMetrics_Observer(t *testing.T) {
	t.Parallel()
	sc := mustScene(t)
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, sc.st)
	accepted := time.Now().Add(-90 * time.Second)
	m.Claimed("west")
	m.Finished("west", "done", 1.5, inkwell.Job{ID: 1, CreatedAt: accepted})
	m.Finished("west", "failed", 0.2, inkwell.Job{ID: 2, CreatedAt: accepted})
	m.Finished("west", "failed", 0, inkwell.Job{ID: 3, CreatedAt: accepted}) // no call made
	m.Recovered(store.RecoveryReport{Lane: "west", RunID: 7, AttemptsClosed: 2, JobsFailed: 2})
	m.Recovered(store.RecoveryReport{Lane: "west", DryRun: true, AttemptsClosed: 5})

	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			key := f.GetName()
			for _, l := range mt.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case mt.GetCounter() != nil:
				got[key] = mt.GetCounter().GetValue()
			case mt.GetHistogram() != nil:
				got[key+",count"] = float64(mt.GetHistogram().GetSampleCount())
				got[key+",sum"] = mt.GetHistogram().GetSampleSum()
			}
		}
	}
	for key, want := range map[string]float64{
		"inkwell_attempts_started_total,lane=west":                       1,
		"inkwell_attempts_total,lane=west,outcome=done":                  1,
		"inkwell_attempts_total,lane=west,outcome=failed":                2,
		"inkwell_provider_call_seconds,outcome=done,count":               1,
		"inkwell_provider_call_seconds,outcome=failed,count":             1,
		"inkwell_job_accept_to_done_seconds,count":                       1,
		"inkwell_recovery_runs_total,lane=west":                          1,
		"inkwell_recovery_rows_total,kind=attempts_closed,lane=west":     2,
		"inkwell_recovery_rows_total,kind=jobs_failed,lane=west":         2,
		"inkwell_recovery_rows_total,kind=attempts_backfilled,lane=west": 0,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
	if s := got["inkwell_job_accept_to_done_seconds,sum"]; s < 90 || s > 90+60 {
		t.Errorf("accept-to-done sum = %v s, want about 90", s)
	}
}

func TestDashboard_EmptyDatabase(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	srv := api.New(api.Config{Store: st})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	code, body := get(t, hs.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("GET / = %d, want 200", code)
	}
	wantContains(t, "empty dashboard", body, `id="count-queued" data-count="0"`, `id="count-done" data-count="0"`,
		"nothing queued", "No lane has ever registered", "No lane has run startup recovery", "No failed jobs.", "Nothing running or queued.",
		"This server has not finished startup recovery") // SetReady was never called
}

// TestDashboard_JobLifeStates: the dashboard shows what automatic retry
// and cancel leave behind (docs/design.md §9), in the views' words: a job
// waiting for back-off, one automatic retry gave up on, a possible poison
// job (graded as needing a person now), and a job cancelled in flight.
func TestDashboard_JobLifeStates(t *testing.T) {
	t.Parallel()
	sc := &scene{clk: &storetest.WallClock{}}
	sc.clk.At(time.Minute)
	sc.st = storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{NowFunc: sc.clk.Now})
	sc.lane(t, "west")

	waiting := sc.accept(t, "waiting", "a poem about patience").ID
	c := sc.claim(t, "west")
	at := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
	sc.must(t, sc.st.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "provider: provider call: server error: HTTP 503",
		Class: inkwell.ClassProviderError, RetryAt: &at}))
	gaveUp := sc.accept(t, "gave-up", "a poem about persistence").ID
	c = sc.claim(t, "west")
	sc.must(t, sc.st.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "provider: provider call: server error: HTTP 503",
		Class: inkwell.ClassProviderError, GaveUpAfter: 5}))
	poison := sc.accept(t, "poison", "a poem that kills workers").ID
	sc.fail(t, sc.claim(t, "west"), inkwell.ClassWorkerRestarted, "worker restarted")
	if _, err := sc.st.RetryIfFailed(t.Context(), poison, store.ActorCLI); err != nil {
		t.Fatal(err)
	}
	sc.fail(t, sc.claim(t, "west"), inkwell.ClassWorkerRestarted, "worker restarted")
	inFlight := sc.accept(t, "in-flight", "a poem nobody wants").ID
	sc.claim(t, "west")
	if _, err := sc.st.Cancel(t.Context(), inFlight, "operator"); err != nil {
		t.Fatal(err)
	}

	// Retention pruned a failed job: it cannot run again, so no Retry.
	pruned := sc.accept(t, "pruned", "a poem long forgotten").ID
	sc.fail(t, sc.claim(t, "west"), inkwell.ClassNotSent, "provider: provider call: connection refused")
	if _, err := sc.st.WriteDB().ExecContext(t.Context(), fmt.Sprintf(`UPDATE jobs SET pruned_at = finished_at WHERE id = %d`, pruned)); err != nil {
		t.Fatal(err)
	}

	srv := api.New(api.Config{Store: sc.st, Logger: storetest.TestLogger(t)})
	srv.SetReady(true)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	code, body := get(t, hs.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("GET / = %d, want 200", code)
	}
	next := at.Format("2006-01-02T15:04:05Z")
	wantContains(t, "GET /", body,
		"wait: 1 waiting for back-off, next at "+next,
		"wait: back-off after attempt 1 failed (provider_error): automatic retry, claimed from "+next,
		fmt.Sprintf(`data-cancel="%d" data-status="queued"`, waiting),
		fmt.Sprintf("gave up after 5 attempts (the last provider_error): automatic retry stopped; check the provider (its status, limits and API key), then inkwell retry %d", gaveUp),
		fmt.Sprintf(`<span class="action act-bad">possible poison job: it may be what kills the worker; inspect it before a retry (its last two attempts both ended worker_restarted: inkwell show %d)</span>`, poison),
		fmt.Sprintf("nothing to do: cancelled after a call that may have billed it (inkwell retry %d", inFlight),
		`<span class="pill c-cancelled">cancelled</span>`,
		"1 possible poison job (the last two attempts ended worker_restarted)",
		fmt.Sprintf(`id="failed-%d"`, pruned), "nothing to do: pruned by retention at ",
		fmt.Sprintf(`data-retry="%d"`, gaveUp),
	)
	if strings.Contains(body, fmt.Sprintf(`data-retry="%d"`, pruned)) {
		t.Errorf("GET / has a Retry button for pruned job %d", pruned)
	}
	if i, j := strings.Index(body, fmt.Sprintf(`id="failed-%d"`, pruned)), strings.Index(body, fmt.Sprintf(`id="failed-%d"`, gaveUp)); i < j {
		t.Errorf("GET / lists pruned job %d before job %d: pruned jobs go last", pruned, gaveUp)
	}
}
