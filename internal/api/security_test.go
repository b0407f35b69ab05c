package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// The security battery (docs/security.md): every route
// registered in routes.go, walked with a missing, malformed, unknown-id,
// wrong-secret, revoked and other-account token; a client token on the
// operator routes; cross-account reads are 404; a body account naming
// another account is 403; every refusal writes nothing (every table's
// contents compared); the token secrets never appear in the logs, the
// error bodies or /metrics.
//
// Timing: a test that measures the time of a wrong id against a wrong
// secret is either loose enough never to fail or flaky on a shared
// machine. Instead store.TestStore_TokenSamePath counts, through a hook,
// that both hash and compare exactly once (a dummy hash stands in for an
// unknown id), and TestSecurity_SameAnswer checks here that both get the
// same status and the same words.

// routeAccess is who may call each route registered in routes.go when
// tokens are in force. A route missing here fails the battery: a new
// route must say who may call it.
var routeAccess = map[string]string{
	"POST /v1/jobs":                "client",
	"POST /v1/chat/completions":    "client",
	"GET /v1/jobs/{id}":            "client",
	"POST /v1/jobs/{id}/retry":     "operator",
	"POST /v1/jobs/{id}/cancel":    "operator",
	"POST /v1/batches":             "client",
	"GET /v1/batches/{id}":         "client",
	"GET /v1/batches/{id}/output":  "client",
	"GET /v1/batches/{id}/errors":  "client",
	"GET /v1/batches":              "client",
	"POST /v1/batches/{id}/cancel": "client",
	"POST /v1/files":               "client",
	"GET /v1/files/{id}":           "client",
	"GET /v1/files/{id}/content":   "client",
	"GET /v1/files":                "client",
	"DELETE /v1/files/{id}":        "client",
	"GET /v1/models":               "client",
	"GET /v1/models/{model...}":    "client",
	"GET /healthz":                 "public",
	"GET /readyz":                  "public",
	"GET /v1/overview":             "operator",
	"GET /metrics":                 "operator",
	"GET /{$}":                     "operator",
	"GET /jobs/{id}":               "operator",
	"GET /static/":                 "public",
	"GET /signin":                  "public",
	"POST /signin":                 "signin", // its own refusals: TestSecurity_SignIn
	"POST /signout":                "operator",
	"GET /openapi.json":            "public",
}

// otherAccountAnswer is what a client route answers another account's
// client token where that is not the rule (404 for a read, 201 for a
// new row): its own list, an upload (200, as OpenAI answers one), a
// cancel of another's batch (404).
var otherAccountAnswer = map[string]int{
	"GET /v1/batches":              http.StatusOK,
	"POST /v1/files":               http.StatusOK,
	"GET /v1/files":                http.StatusOK, // its own list
	"POST /v1/batches/{id}/cancel": http.StatusNotFound,
	// The models served are every account's.
	"GET /v1/models":            http.StatusOK,
	"GET /v1/models/{model...}": http.StatusOK,
	// A new job of its own account, which no lane runs here: the wait
	// (SyncWait) runs out.
	"POST /v1/chat/completions": http.StatusGatewayTimeout,
}

// registeredRoutes reads the patterns routes.go registers.
func registeredRoutes(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("routes.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`s\.mux\.Handle(?:Func)?\("([^"]+)"`).FindAllStringSubmatch(string(src), -1) {
		out = append(out, m[1])
	}
	if len(out) < len(routeAccess) {
		t.Fatalf("found %d routes in routes.go (%q), want at least %d", len(out), out, len(routeAccess))
	}
	return out
}

// secEnv is a server with tokens in force: accounts acme and globex, an
// operator token (default account), a client token of each, a revoked
// client token of acme; one job of acme and one of globex.
type secEnv struct {
	*env
	logs                            *syncBuffer
	operator, acme, globex, revoked string
	acmeJob, globexJob, failedJob   int64
	acmeBatch                       int64
	acmeFile                        string
	secrets                         []string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func setupSecurity(t *testing.T, mode api.AuthMode) *secEnv {
	t.Helper()
	se := &secEnv{env: &env{t: t}, logs: &syncBuffer{}}
	e := se.env
	e.st = storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	ctx := t.Context()
	for _, name := range []string{"acme", "globex"} {
		if _, err := e.st.CreateAccount(ctx, store.Account{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(account, role string) string {
		_, text, err := e.st.CreateToken(ctx, account, role)
		if err != nil {
			t.Fatal(err)
		}
		se.secrets = append(se.secrets, text[len(text)-64:])
		return text
	}
	se.operator, se.acme, se.globex, se.revoked = mk(inkwell.DefaultAccount, store.RoleOperator), mk("acme", store.RoleClient), mk("globex", store.RoleClient), mk("acme", store.RoleClient)
	if _, _, err := e.st.RevokeToken(ctx, se.revoked); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(se.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.api = api.New(api.Config{Store: e.st, Logger: log, Auth: mode, AuthRecheck: time.Millisecond, SyncWait: 20 * time.Millisecond})
	e.api.SetReady(true)
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	se.acmeJob = se.submit(se.acme, "acme-1", `{"prompt":"an acme poem"}`, http.StatusCreated).Job.ID
	se.globexJob = se.submit(se.globex, "globex-1", `{"prompt":"a globex poem"}`, http.StatusCreated).Job.ID
	se.failedJob = se.submit(se.acme, "acme-failed", `{"prompt":"to be cancelled"}`, http.StatusCreated).Job.ID
	if _, err := e.st.Cancel(ctx, se.failedJob, "test"); err != nil {
		t.Fatal(err)
	}
	se.acmeBatch = se.submitBatch(se.acme, "acme-batch", batchBody(2), http.StatusCreated).ID
	se.acmeFile = (&cancelEnv{t: t, srv: e.srv}).upload(se.acme, "batch", "acme.jsonl", chatLine("a", "x")).file(t).ID
	return se
}

func (se *secEnv) req(method, path, token string, header map[string]string, body []byte) reply {
	se.t.Helper()
	h := map[string]string{}
	for k, v := range header {
		h[k] = v
	}
	if token != "" {
		h["Authorization"] = token
	}
	r := se.do(method, path, h, body)
	for _, s := range se.secrets {
		if bytes.Contains(r.body, []byte(s)) {
			se.t.Errorf("%s %s: the answer holds a token secret:\n%s", method, path, r.body)
		}
	}
	return r
}

func (se *secEnv) submit(token, key, body string, want int) inkwell.JobDetail {
	se.t.Helper()
	r := se.req(http.MethodPost, "/v1/jobs", "Bearer "+token, map[string]string{"Idempotency-Key": key}, []byte(body))
	if r.status != want {
		se.t.Fatalf("POST /v1/jobs %s = %d %s, want %d", key, r.status, r.body, want)
	}
	if want >= 400 {
		return inkwell.JobDetail{}
	}
	return r.detail(se.t)
}

// snapshot is every table's contents after the pending token-use marks
// were written: an allowed request marks its token used (batched), so a
// refusal's "nothing written" is checked against a flushed state.
func (se *secEnv) snapshot() map[string][]string {
	se.t.Helper()
	if err := se.st.FlushTokenUse(se.t.Context()); err != nil {
		se.t.Fatal(err)
	}
	return se.contents()
}

// request builds a concrete request for a route pattern, on job id.
func (se *secEnv) request(pattern string, id int64, key string) (method, path string, header map[string]string, body []byte) {
	method, path, _ = strings.Cut(pattern, " ")
	path = strings.ReplaceAll(path, "{id}", fmt.Sprint(id))
	path = strings.ReplaceAll(path, "{$}", "")
	path = strings.ReplaceAll(path, "{model...}", "gpt-4o-mini")
	if path == "/static/" {
		path = "/static/style.css"
	}
	if pattern == "POST /v1/jobs" {
		return method, path, map[string]string{"Idempotency-Key": key}, []byte(`{"prompt":"a poem"}`)
	}
	if pattern == "POST /v1/chat/completions" {
		return method, path, map[string]string{"Idempotency-Key": key}, []byte(`{"messages":[{"role":"user","content":"a poem"}]}`)
	}
	_, route, _ := strings.Cut(pattern, " ")
	if strings.HasPrefix(pattern, "GET /v1/batches/") || pattern == "POST /v1/batches/{id}/cancel" {
		path = strings.ReplaceAll(route, "{id}", fmt.Sprint(se.acmeBatch))
	}
	if strings.HasPrefix(pattern, "GET /v1/files/") || pattern == "DELETE /v1/files/{id}" {
		path = strings.ReplaceAll(route, "{id}", se.acmeFile)
	}
	if pattern == "POST /v1/files" {
		body, ct := uploadForm(se.t, "batch", "f.jsonl", chatLine("a", key))
		return method, path, map[string]string{"Content-Type": ct}, []byte(body)
	}
	if pattern == "POST /v1/batches" {
		return method, path, map[string]string{"Idempotency-Key": key, "Content-Type": "application/jsonl"}, []byte(batchBody(1))
	}
	return method, path, nil, nil
}

// TestSecurity_EveryRoute walks every route with every bad token: each
// protected route answers 401 with WWW-Authenticate: Bearer and the JSON
// error form, writes nothing; the public ones answer as without a token.
func TestSecurity_EveryRoute(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	acmeID := strings.Split(se.acme, "_")[1]
	bad := map[string]string{
		"missing":        "",
		"empty bearer":   "Bearer ",
		"basic":          "Basic " + se.acme,
		"no scheme":      se.acme,
		"malformed":      "Bearer ink_nothex_" + strings.Repeat("z", 64),
		"truncated":      "Bearer " + se.acme[:len(se.acme)-1],
		"unknown id":     "Bearer ink_0123456789abcdef_" + se.acme[len(se.acme)-64:],
		"wrong secret":   "Bearer ink_" + acmeID + "_" + strings.Repeat("0", 64),
		"other's secret": "Bearer ink_" + acmeID + "_" + se.globex[len(se.globex)-64:],
		"revoked":        "Bearer " + se.revoked,
		"two tokens":     "Bearer " + se.acme + ", Bearer " + se.globex,
	}
	for i, pattern := range registeredRoutes(t) {
		level, ok := routeAccess[pattern]
		if !ok {
			t.Errorf("route %q is not in routeAccess: say who may call it", pattern)
			continue
		}
		if level == "signin" {
			continue
		}
		for name, token := range bad {
			method, path, header, body := se.request(pattern, se.acmeJob, fmt.Sprintf("bad-%d-%s", i, name))
			before := se.snapshot()
			r := se.req(method, path, token, header, body)
			if level == "public" {
				if r.status >= 400 {
					t.Errorf("%s with a %s token = %d, want the public answer", pattern, name, r.status)
				}
				continue
			}
			if r.status != http.StatusUnauthorized || r.errorBody(t).Code != inkwell.EUNAUTHENTICATED {
				t.Errorf("%s with a %s token = %d %s, want 401 unauthenticated", pattern, name, r.status, r.body)
			}
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s with a %s token: WWW-Authenticate %q, want Bearer", pattern, name, r.header.Get("WWW-Authenticate"))
			}
			se.assertUnchanged(before)
		}
		// Another account's client token on acme's job: its own submits
		// pass, acme's job is 404, operator routes 403; nothing written by
		// a refusal.
		method, path, header, body := se.request(pattern, se.acmeJob, fmt.Sprintf("globex-%d", i))
		want := map[string]int{"public": http.StatusOK, "operator": http.StatusForbidden, "client": http.StatusNotFound}[level]
		if strings.HasPrefix(pattern, "POST /v1/") && level == "client" {
			want = http.StatusCreated
		}
		if status, ok := otherAccountAnswer[pattern]; ok {
			want = status
		}
		before := se.snapshot()
		if r := se.req(method, path, "Bearer "+se.globex, header, body); r.status != want {
			t.Errorf("%s with another account's client token = %d %s, want %d", pattern, r.status, r.body, want)
		} else if want >= 400 && pattern != "POST /v1/chat/completions" { // its 504 follows a job stored
			se.assertUnchanged(before)
		}
		// The same request with an operator token is allowed.
		method, path, header, body = se.request(pattern, se.acmeJob, fmt.Sprintf("op-%d", i))
		if r := se.req(method, path, "Bearer "+se.operator, header, body); r.status == http.StatusUnauthorized || r.status == http.StatusForbidden {
			t.Errorf("%s with the operator token = %d %s", pattern, r.status, r.body)
		}
	}
	se.assertNoSecretLogged()
}

// TestSecurity_ClientScope: a client token is refused (403, nothing
// written) on the operator routes, reads only its own account's jobs
// (another account's job is 404, worded as a job that does not exist),
// and submits only for its own account (a body naming another is 403).
func TestSecurity_ClientScope(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	for i, pattern := range registeredRoutes(t) {
		if routeAccess[pattern] != "operator" {
			continue
		}
		method, path, header, body := se.request(pattern, se.failedJob, fmt.Sprintf("client-%d", i))
		before := se.snapshot()
		r := se.req(method, path, "Bearer "+se.acme, header, body)
		if r.status != http.StatusForbidden || r.errorBody(t).Code != inkwell.EFORBIDDEN {
			t.Errorf("%s with a client token = %d %s, want 403 forbidden", pattern, r.status, r.body)
		}
		se.assertUnchanged(before)
	}

	// Reads: its own job, not another account's.
	if r := se.req(http.MethodGet, fmt.Sprintf("/v1/jobs/%d", se.acmeJob), "Bearer "+se.acme, nil, nil); r.status != http.StatusOK {
		t.Errorf("acme reads its job: %d %s", r.status, r.body)
	}
	other := se.req(http.MethodGet, fmt.Sprintf("/v1/jobs/%d", se.globexJob), "Bearer "+se.acme, nil, nil)
	none := se.req(http.MethodGet, "/v1/jobs/999999", "Bearer "+se.acme, nil, nil)
	if other.status != http.StatusNotFound || none.status != http.StatusNotFound {
		t.Errorf("acme reads globex's job: %d %s; a missing job: %d; want 404 for both", other.status, other.body, none.status)
	}
	if got, want := other.errorBody(t).Message, strings.ReplaceAll(none.errorBody(t).Message, "999999", fmt.Sprint(se.globexJob)); got != want {
		t.Errorf("another account's job is worded %q, a missing one %q: they must not differ", got, want)
	}
	if r := se.req(http.MethodGet, fmt.Sprintf("/v1/jobs/%d", se.globexJob), "Bearer "+se.operator, nil, nil); r.status != http.StatusOK {
		t.Errorf("the operator reads globex's job: %d", r.status)
	}

	// Submits: the token's account pays.
	d := se.submit(se.acme, "acme-2", `{"prompt":"mine","account":"acme"}`, http.StatusCreated)
	if !payloadAccount(t, d, "acme") {
		t.Errorf("payload %s: want account acme", d.Job.Payload)
	}
	d = se.submit(se.acme, "acme-3", `{"prompt":"no account named"}`, http.StatusCreated)
	if !payloadAccount(t, d, "acme") {
		t.Errorf("payload %s: want the token's account acme", d.Job.Payload)
	}
	for i, tc := range []struct{ token, body string }{
		{se.acme, `{"prompt":"charge globex","account":"globex"}`},
		{se.acme, `{"prompt":"charge default","account":"default"}`},
		{se.operator, `{"prompt":"operator for acme","account":"acme"}`},
	} {
		before := se.snapshot()
		r := se.req(http.MethodPost, "/v1/jobs", "Bearer "+tc.token, map[string]string{"Idempotency-Key": fmt.Sprint("mismatch-", i)}, []byte(tc.body))
		if r.status != http.StatusForbidden || r.errorBody(t).Code != inkwell.EFORBIDDEN {
			t.Errorf("body %s = %d %s, want 403", tc.body, r.status, r.body)
		}
		se.assertUnchanged(before)
	}

	// Keys are unique per account: a key globex used is acme's to use too,
	// for a job of its own; globex's job is neither found nor shown.
	r := se.req(http.MethodPost, "/v1/jobs", "Bearer "+se.acme, map[string]string{"Idempotency-Key": "globex-1"}, []byte(`{"prompt":"a globex poem"}`))
	if d := r.detail(t); r.status != http.StatusCreated || d.Job.ID == se.globexJob || d.Job.Account != "acme" {
		t.Errorf("acme sends globex's key: %d %s; want 201, a new job of acme", r.status, r.body)
	}
	// The same key, another body, within one account: 422.
	before := se.snapshot()
	if r := se.req(http.MethodPost, "/v1/jobs", "Bearer "+se.acme, map[string]string{"Idempotency-Key": "globex-1"}, []byte(`{"prompt":"other words"}`)); r.status != http.StatusUnprocessableEntity {
		t.Errorf("acme re-uses its key with another body: %d %s; want 422", r.status, r.body)
	}
	se.assertUnchanged(before)
	// A re-send of its own key is answered as always.
	if d := se.submit(se.acme, "acme-1", `{"prompt":"an acme poem"}`, http.StatusOK); d.Job.ID != se.acmeJob {
		t.Errorf("acme's re-send answered job %d, want %d", d.Job.ID, se.acmeJob)
	}
	se.assertNoSecretLogged()
}

// TestSecurity_SameAnswer: an unknown id and a wrong secret get the same
// status and words (the store takes the same path for both, see
// store.TestStore_TokenSamePath).
func TestSecurity_SameAnswer(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	id := strings.Split(se.acme, "_")[1]
	unknown := se.req(http.MethodGet, "/v1/jobs/1", "Bearer ink_0123456789abcdef_"+strings.Repeat("1", 64), nil, nil)
	wrong := se.req(http.MethodGet, "/v1/jobs/1", "Bearer ink_"+id+"_"+strings.Repeat("1", 64), nil, nil)
	if unknown.status != wrong.status || unknown.errorBody(t) != wrong.errorBody(t) {
		t.Errorf("unknown id: %d %s\nwrong secret: %d %s\nwant the same answer", unknown.status, unknown.body, wrong.status, wrong.body)
	}
}

// TestSecurity_RevokeAtOnce: a token revoked while the server runs is
// refused at its next request.
func TestSecurity_RevokeAtOnce(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	path := fmt.Sprintf("/v1/jobs/%d", se.acmeJob)
	if r := se.req(http.MethodGet, path, "Bearer "+se.acme, nil, nil); r.status != http.StatusOK {
		t.Fatalf("before the revoke: %d", r.status)
	}
	if _, _, err := se.st.RevokeToken(t.Context(), se.acme); err != nil {
		t.Fatal(err)
	}
	if r := se.req(http.MethodGet, path, "Bearer "+se.acme, nil, nil); r.status != http.StatusUnauthorized {
		t.Errorf("right after the revoke: %d %s, want 401", r.status, r.body)
	}
}

// TestSecurity_Modes: auto turns tokens on once one exists; required
// refuses without a token even when none exists; off ignores them.
func TestSecurity_Modes(t *testing.T) {
	t.Parallel()
	t.Run("auto", func(t *testing.T) {
		t.Parallel()
		e := &env{t: t}
		e.st = storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
		e.api = api.New(api.Config{Store: e.st, AuthRecheck: time.Millisecond})
		e.api.SetReady(true)
		e.srv = httptest.NewServer(e.api)
		t.Cleanup(e.srv.Close)
		if r := e.post("auto-1", `{"prompt":"no token yet"}`); r.status != http.StatusCreated {
			t.Fatalf("auto, no token: %d %s", r.status, r.body)
		}
		if _, _, err := e.st.CreateToken(t.Context(), inkwell.DefaultAccount, store.RoleClient); err != nil {
			t.Fatal(err)
		}
		// A read (which writes nothing) is refused once the gate has seen
		// the token, at its first read past AuthRecheck.
		storetest.WaitFor(t, 10*time.Second, "auto mode to see the token", func() bool {
			return e.do(http.MethodGet, "/v1/jobs/1", nil, nil).status == http.StatusUnauthorized
		})
		before := e.contents()
		if r := e.post("auto-2", `{"prompt":"a token exists now"}`); r.status != http.StatusUnauthorized {
			t.Errorf("auto after a token exists: %d %s, want 401", r.status, r.body)
		}
		e.assertUnchanged(before)
		if r := e.do(http.MethodGet, "/healthz", nil, nil); r.status != http.StatusOK {
			t.Errorf("/healthz: %d", r.status)
		}
	})
	t.Run("required", func(t *testing.T) {
		t.Parallel()
		e := &env{t: t}
		e.st = storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
		e.api = api.New(api.Config{Store: e.st, Auth: api.AuthRequired})
		e.api.SetReady(true)
		e.srv = httptest.NewServer(e.api)
		t.Cleanup(e.srv.Close)
		before := e.contents()
		if r := e.post("req-1", `{"prompt":"no token"}`); r.status != http.StatusUnauthorized {
			t.Errorf("required, no token exists: %d %s, want 401", r.status, r.body)
		}
		e.assertUnchanged(before)
		if r := e.do(http.MethodGet, "/readyz", nil, nil); r.status != http.StatusOK {
			t.Errorf("/readyz: %d", r.status)
		}
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		e := &env{t: t}
		e.st = storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
		if _, _, err := e.st.CreateToken(t.Context(), inkwell.DefaultAccount, store.RoleClient); err != nil {
			t.Fatal(err)
		}
		e.api = api.New(api.Config{Store: e.st, Auth: api.AuthOff})
		e.api.SetReady(true)
		e.srv = httptest.NewServer(e.api)
		t.Cleanup(e.srv.Close)
		if r := e.post("off-1", `{"prompt":"off","account":"anyone"}`); r.status != http.StatusCreated {
			t.Errorf("off with tokens: %d %s, want 201", r.status, r.body)
		}
	})
}

// TestSecurity_NoSecretInMetrics: /metrics, read by the operator after
// every kind of refusal, names no secret (refusals are counted by route
// and code only).
func TestSecurity_NoSecretInMetrics(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	id := strings.Split(se.acme, "_")[1]
	for _, tok := range []string{"Bearer " + se.revoked, "Bearer ink_" + id + "_" + se.globex[len(se.globex)-64:], "Bearer " + se.acme} {
		se.req(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/retry", se.failedJob), tok, nil, nil)
	}
	r := se.req(http.MethodGet, "/metrics", "Bearer "+se.operator, nil, nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `reason="unauthenticated"`) || !strings.Contains(string(r.body), `reason="forbidden"`) {
		t.Errorf("/metrics = %d, want the refusals counted by reason:\n%s", r.status, r.body)
	}
	for _, s := range se.secrets {
		if strings.Contains(string(r.body), s) || strings.Contains(string(r.body), s[:16]) {
			t.Errorf("/metrics names a token secret")
		}
	}
	se.assertNoSecretLogged()
}

func payloadAccount(t *testing.T, d inkwell.JobDetail, want string) bool {
	t.Helper()
	var req inkwell.Request
	if err := json.Unmarshal(d.Job.Payload, &req); err != nil {
		t.Fatal(err)
	}
	return req.Account == want
}

func (se *secEnv) assertNoSecretLogged() {
	se.t.Helper()
	logs := se.logs.String()
	if !strings.Contains(logs, "request refused") {
		se.t.Errorf("the capture saw no refusal logged: is the logger wired?\n%s", logs)
	}
	for _, s := range se.secrets {
		if strings.Contains(logs, s) {
			se.t.Errorf("a token secret is in the log:\n%s", logs)
		}
	}
}

// TestSecurity_CrossSiteWithToken: a browser POST on behalf of another
// site's page is refused whatever the token (a form post carries none,
// but a proxy that adds one must not make it pass), and writes nothing.
func TestSecurity_CrossSiteWithToken(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	for i, h := range []map[string]string{{"Sec-Fetch-Site": "cross-site"}, {"Origin": "http://evil.example"}} {
		for _, path := range []string{"/v1/jobs", fmt.Sprintf("/v1/jobs/%d/retry", se.failedJob), fmt.Sprintf("/v1/jobs/%d/cancel", se.acmeJob)} {
			h["Idempotency-Key"] = fmt.Sprint("xsite-", i)
			before := se.snapshot()
			r := se.req(http.MethodPost, path, "Bearer "+se.operator, h, []byte(`{"prompt":"from another site"}`))
			if r.status != http.StatusForbidden || r.errorBody(t).Code != inkwell.EFORBIDDEN {
				t.Errorf("cross-site POST %s with %v = %d %s, want 403", path, h, r.status, r.body)
			}
			se.assertUnchanged(before)
		}
	}
}

// sessionClient is an HTTP client that keeps no cookies and follows no
// redirect: each test request says what it carries.
func sessionClient() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// sessionReq sends one request with the given cookie (none when ""),
// form body (none when nil) and headers.
func (se *secEnv) sessionReq(method, path, cookie string, form url.Values, header map[string]string) (*http.Response, string) {
	se.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(se.t.Context(), method, se.srv.URL+path, body)
	if err != nil {
		se.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: "inkwell_session", Value: cookie})
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := sessionClient().Do(req)
	if err != nil {
		se.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, s := range se.secrets {
		if strings.Contains(string(b), s) {
			se.t.Errorf("%s %s: the answer holds a token secret", method, path)
		}
	}
	return resp, string(b)
}

// signIn signs in with token and returns the session cookie and the CSRF
// token the dashboard page carries.
func (se *secEnv) signIn(token string) (cookie, csrf string) {
	se.t.Helper()
	resp, body := se.sessionReq(http.MethodPost, "/signin", "", url.Values{"token": {token}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		se.t.Fatalf("sign in = %d (to %q) %s, want 303 to /", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "inkwell_session" {
			cookie = c.Value
		}
	}
	_, page := se.sessionReq(http.MethodGet, "/", cookie, nil, nil)
	m := regexp.MustCompile(`<meta name="csrf-token" content="([0-9a-f]{64})">`).FindStringSubmatch(page)
	if cookie == "" || m == nil {
		se.t.Fatalf("after sign-in: cookie %q, dashboard without a CSRF token:\n%.400s", cookie, page)
	}
	return cookie, m[1]
}

// TestSecurity_SignIn: only a valid operator token signs in (a wrong,
// revoked or client token is refused, sets no cookie and writes
// nothing); the cookie is HttpOnly, SameSite=Strict, Path=/, and Secure
// behind TLS (as a proxy says with X-Forwarded-Proto); a browser without
// a session is sent to /signin, an API client gets 401.
func TestSecurity_SignIn(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	for name, token := range map[string]string{"wrong": "ink_0123456789abcdef_" + strings.Repeat("1", 64), "revoked": se.revoked, "client": se.acme, "empty": ""} {
		before := se.snapshot()
		resp, body := se.sessionReq(http.MethodPost, "/signin", "", url.Values{"token": {token}}, nil)
		want := map[bool]int{true: http.StatusForbidden, false: http.StatusUnauthorized}[name == "client"]
		if resp.StatusCode != want || len(resp.Cookies()) != 0 || !strings.Contains(body, `id="signin-error"`) {
			t.Errorf("sign in with a %s token = %d, cookies %v; want %d, no cookie, the form with why", name, resp.StatusCode, resp.Cookies(), want)
		}
		se.assertUnchanged(before)
	}
	// A cross-site sign-in (login CSRF) is refused before the token is read.
	if resp, _ := se.sessionReq(http.MethodPost, "/signin", "", url.Values{"token": {se.operator}}, map[string]string{"Sec-Fetch-Site": "cross-site"}); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Errorf("cross-site sign-in = %d, cookies %v; want 403, none", resp.StatusCode, resp.Cookies())
	}

	for _, tls := range []bool{false, true} {
		h := map[string]string{}
		if tls {
			h["X-Forwarded-Proto"] = "https"
		}
		resp, _ := se.sessionReq(http.MethodPost, "/signin", "", url.Values{"token": {se.operator}}, h)
		cs := resp.Cookies()
		if resp.StatusCode != http.StatusSeeOther || len(cs) != 1 {
			t.Fatalf("sign in (tls %v) = %d, cookies %v; want 303 and one cookie", tls, resp.StatusCode, cs)
		}
		c := cs[0]
		if c.Name != "inkwell_session" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure != tls || len(c.Value) != 64 {
			t.Errorf("session cookie (tls %v) = %+v; want inkwell_session, HttpOnly, SameSite=Strict, Path=/, Secure %v", tls, c, tls)
		}
		if strings.Contains(resp.Header.Get("Set-Cookie"), se.operator[len(se.operator)-64:]) {
			t.Errorf("the cookie holds the token's secret")
		}
	}

	if resp, _ := se.sessionReq(http.MethodGet, "/", "", nil, map[string]string{"Accept": "text/html"}); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin" {
		t.Errorf("a browser without a session on / = %d to %q; want 303 to /signin", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := se.sessionReq(http.MethodGet, "/", "no-such-session", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unknown session on / = %d; want 401", resp.StatusCode)
	}
	if resp, page := se.sessionReq(http.MethodGet, "/signin", "", nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(page, `name="token"`) {
		t.Errorf("GET /signin = %d; want the form", resp.StatusCode)
	}
	se.assertNoSecretLogged()
}

// TestSecurity_SessionCSRF: under a session, a GET needs nothing more,
// but a POST (Retry, Cancel, sign-out) without the session's CSRF token,
// or with a wrong one, or sent cross-site whatever it carries, is refused
// and writes nothing; with it (header or form field) the retry is done
// and audit_log names the session's token. An Authorization header
// decides alone, whatever cookie comes with it.
func TestSecurity_SessionCSRF(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	cookie, csrf := se.signIn(se.operator)
	retry := fmt.Sprintf("/v1/jobs/%d/retry", se.failedJob)
	for name, h := range map[string]map[string]string{
		"no CSRF token":          {},
		"a wrong CSRF token":     {"X-CSRF-Token": strings.Repeat("0", 64)},
		"cross-site with token":  {"X-CSRF-Token": csrf, "Sec-Fetch-Site": "cross-site"},
		"foreign origin":         {"X-CSRF-Token": csrf, "Origin": "http://evil.example"},
		"another session's CSRF": {"X-CSRF-Token": strings.Repeat("a", 64)},
	} {
		before := se.snapshot()
		if resp, body := se.sessionReq(http.MethodPost, retry, cookie, nil, h); resp.StatusCode != http.StatusForbidden {
			t.Errorf("retry under a session with %s = %d %s; want 403", name, resp.StatusCode, body)
		}
		se.assertUnchanged(before)
	}
	// A cross-site form post: no header, a form without csrf_token.
	before := se.snapshot()
	if resp, _ := se.sessionReq(http.MethodPost, retry, cookie, url.Values{"x": {"1"}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("form post without csrf_token = %d; want 403", resp.StatusCode)
	}
	se.assertUnchanged(before)
	// An Authorization header decides alone: a client token with the
	// operator's session cookie is a client.
	if resp, _ := se.sessionReq(http.MethodPost, retry, cookie, nil, map[string]string{"X-CSRF-Token": csrf, "Authorization": "Bearer " + se.acme}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("client bearer with an operator session = %d; want 403", resp.StatusCode)
	}
	se.assertUnchanged(before)

	// With the token, as a form field: done, and audited as the token.
	if resp, body := se.sessionReq(http.MethodPost, retry, cookie, url.Values{"csrf_token": {csrf}}, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("retry with the session's CSRF token = %d %s; want 200", resp.StatusCode, body)
	}
	rows, err := se.st.AuditLog(t.Context(), se.failedJob, 0)
	if opID := strings.Split(se.operator, "_")[1]; err != nil || len(rows) != 2 || rows[0].Actor != "token "+opID || rows[0].Action != "retry" {
		t.Errorf("audit of the job = %+v, %v; want its cancel (setup), then a retry by token %s", rows, err, opID)
	}
	// Cancel with the header.
	if resp, body := se.sessionReq(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/cancel", se.acmeJob), cookie, nil, map[string]string{"X-CSRF-Token": csrf}); resp.StatusCode != http.StatusOK {
		t.Errorf("cancel with the session's CSRF token = %d %s; want 200", resp.StatusCode, body)
	}

	// Sign-out needs the token too, then ends the session.
	before = se.snapshot()
	if resp, _ := se.sessionReq(http.MethodPost, "/signout", cookie, url.Values{}, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("sign-out without the CSRF token = %d; want 403", resp.StatusCode)
	}
	resp, _ := se.sessionReq(http.MethodPost, "/signout", cookie, url.Values{"csrf_token": {csrf}}, nil)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 {
		t.Errorf("sign-out = %d, cookies %v; want 303 and the cookie removed", resp.StatusCode, resp.Cookies())
	}
	if resp, _ := se.sessionReq(http.MethodGet, "/", cookie, nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the signed-out session on / = %d; want 401", resp.StatusCode)
	}
	se.assertUnchanged(before)
	se.assertNoSecretLogged()
}

// TestSecurity_SessionEndsWithItsToken: revoking the token a session
// signed in with ends the session at its next request.
func TestSecurity_SessionEndsWithItsToken(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	tok, text, err := se.st.CreateToken(t.Context(), inkwell.DefaultAccount, store.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	se.secrets = append(se.secrets, text[len(text)-64:])
	cookie, csrf := se.signIn(text)
	if _, _, err := se.st.RevokeToken(t.Context(), tok.ID); err != nil {
		t.Fatal(err)
	}
	before := se.snapshot()
	if resp, _ := se.sessionReq(http.MethodGet, "/", cookie, nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("dashboard after its token was revoked = %d; want 401", resp.StatusCode)
	}
	if resp, _ := se.sessionReq(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/retry", se.failedJob), cookie, nil, map[string]string{"X-CSRF-Token": csrf}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("retry after its token was revoked = %d; want 401", resp.StatusCode)
	}
	se.assertUnchanged(before)
}
