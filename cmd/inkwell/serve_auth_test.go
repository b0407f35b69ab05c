package main

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// serve --auth (docs/design.md §10): beyond loopback with no token, serve
// refuses to start and says how to create one; --auth off is refused
// beyond loopback; once a token exists it starts; on loopback with no
// token the README's tour still needs none.

func authMainConfig(db, addr, auth string) MainConfig {
	return MainConfig{DB: db, Addr: addr, Lane: "local", Grace: 5 * time.Second, Heartbeat: 100 * time.Millisecond,
		Poll: time.Second, Rescue: time.Second, Provider: provider.NewSim(0), ProviderName: "sim", Auth: auth}
}

func TestServe_AuthStartRefusals(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	for _, c := range []struct{ addr, auth, want string }{
		{"0.0.0.0:0", "", "inkwell tokens create --account default --role operator"},
		{"0.0.0.0:0", "auto", "inkwell tokens create --account default --role operator"},
		{"0.0.0.0:0", "required", "inkwell tokens create --account default --role operator"},
		{":0", "auto", "beyond loopback"},
		{"0.0.0.0:0", "off", "--auth off is allowed on loopback only"},
		{"127.0.0.1:0", "sometimes", "--auth must be auto, required or off"},
	} {
		m, err := OpenMain(t.Context(), authMainConfig(db, c.addr, c.auth))
		if err == nil {
			m.Close()
			t.Errorf("--addr %s --auth %q with no token: started", c.addr, c.auth)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("--addr %s --auth %q: %v; want it to say %q", c.addr, c.auth, err, c.want)
		}
	}
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	if exist, _ := st.TokensExist(t.Context()); exist {
		t.Fatal("a refused start wrote a token")
	}
	if _, _, err := st.CreateToken(t.Context(), inkwell.DefaultAccount, store.RoleOperator); err != nil {
		t.Fatal(err)
	}
	m, err := OpenMain(t.Context(), authMainConfig(db, "0.0.0.0:0", ""))
	if err != nil {
		t.Fatalf("beyond loopback with a token: %v", err)
	}
	m.Close()
	if m, err := OpenMain(t.Context(), authMainConfig(db, "0.0.0.0:0", "off")); err == nil {
		m.Close()
		t.Error("--auth off beyond loopback started once a token exists")
	}
}

// TestServe_AuthRefusalFromTheCommand: the words reach the operator.
func TestServe_AuthRefusalFromTheCommand(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	code, _, stderr := runCLI(t, "serve", "--db", db, "--addr", "0.0.0.0:0")
	if code != 1 || !strings.Contains(stderr, "inkwell tokens create --account default --role operator") {
		t.Errorf("serve --addr 0.0.0.0:0 with no token = %d\n%s\nwant 1 and how to create a token", code, stderr)
	}
	// A bad --auth is a usage error, like every other bad flag value: exit
	// 2, before the database is opened.
	for _, args := range [][]string{
		{"--auth", "maybe"},
		{"--auth", "off", "--addr", "0.0.0.0:0"},
	} {
		want := map[string]string{"maybe": "--auth must be auto, required or off", "off": "--auth off is allowed on loopback only"}[args[1]]
		none := filepath.Join(t.TempDir(), "none.db")
		code, stdout, stderr := runCLI(t, append([]string{"serve", "--db", none}, args...)...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, want) {
			t.Errorf("serve %q = %d\nstdout %q\nstderr %q\nwant 2 and %q", args, code, stdout, stderr, want)
		}
		if _, err := os.Stat(none); err == nil {
			t.Errorf("serve %q created the database %s", args, none)
		}
	}
}

// TestServe_AuthInProcess: a Main on loopback serves without a token
// until one exists (the README tour), then requires it.
func TestServe_AuthInProcess(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	m, err := OpenMain(t.Context(), authMainConfig(db, "127.0.0.1:0", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	url, stop := runMain(t, m)
	submit(t, url, "tour", `{"prompt":"a haiku about ink"}`) // no token exists: 201
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	_, text, err := st.CreateToken(t.Context(), inkwell.DefaultAccount, store.RoleClient)
	if err != nil {
		t.Fatal(err)
	}
	storetest.WaitFor(t, waitLimit, "tokens in force", func() bool {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/jobs", strings.NewReader(`{"prompt":"x"}`))
		req.Header.Set("Idempotency-Key", "no-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusUnauthorized
	})
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/jobs", strings.NewReader(`{"prompt":"with a token"}`))
	req.Header.Set("Idempotency-Key", "with-token")
	req.Header.Set("Authorization", "Bearer "+text)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("with the token: %d, want 201", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestServe_AuthOffWarnsOfTokens: --auth off on loopback while tokens
// exist says at start how many (not revoked) it ignores; with none, or in
// auto, it says nothing of the kind.
func TestServe_AuthOffWarnsOfTokens(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	start := func(auth string) string {
		t.Helper()
		var logs lockedBuffer
		cfg := authMainConfig(db, "127.0.0.1:0", auth)
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		m, err := OpenMain(t.Context(), cfg)
		if err != nil {
			t.Fatalf("--auth %s: %v", auth, err)
		}
		m.Close()
		return logs.String()
	}
	if logs := start("off"); strings.Contains(logs, "ignored") {
		t.Errorf("--auth off with no token warned of ignored tokens:\n%s", logs)
	}
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	var ids []string
	for _, role := range []string{store.RoleOperator, store.RoleClient, store.RoleClient} {
		tok, _, err := st.CreateToken(t.Context(), inkwell.DefaultAccount, role)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tok.ID)
	}
	if _, _, err := st.RevokeToken(t.Context(), ids[2]); err != nil {
		t.Fatal(err)
	}
	logs := start("off")
	if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "2 API token(s) exist and are ignored") || !strings.Contains(logs, "tokens=2") {
		t.Errorf("--auth off with 2 tokens (and 1 revoked): the log does not warn that 2 are ignored:\n%s", logs)
	}
	if logs := start("auto"); strings.Contains(logs, "ignored") {
		t.Errorf("--auth auto warned of ignored tokens:\n%s", logs)
	}
}

// TestServe_AuthRequiredWarnsOfPublicRoutes: --auth required on loopback
// with no token warns that every request but the public routes is
// refused, and the routes it names are the ones that answer without a
// token (an operator route does not).
func TestServe_AuthRequiredWarnsOfPublicRoutes(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	var logs lockedBuffer
	cfg := authMainConfig(db, "127.0.0.1:0", "required")
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	m, err := OpenMain(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, list, ok := strings.Cut(logs.String(), "every request but ")
	list, _, ok2 := strings.Cut(list, " is refused until one is created")
	if !ok || !ok2 {
		t.Fatalf("no warning naming the routes that need no token:\n%s", logs.String())
	}
	var public []string
	for _, p := range strings.Split(strings.ReplaceAll(list, " and ", ", "), ", ") {
		public = append(public, strings.TrimSuffix(p, "…"))
	}
	url, stop := runMain(t, m)
	for _, p := range []string{"/healthz", "/readyz", "/openapi.json", "/static/", "/signin"} {
		if !slices.Contains(public, p) {
			t.Errorf("the warning leaves out %s, which needs no token (it names %q)", p, public)
		}
	}
	paths := slices.Clone(public)
	for _, p := range []string{"/metrics", "/v1/overview"} { // operator routes
		if !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	for _, p := range paths {
		resp, err := http.Get(url + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if wantRefused := !slices.Contains(public, p); (resp.StatusCode == http.StatusUnauthorized) != wantRefused {
			t.Errorf("GET %s with no token under --auth required: %d (named public: %v)", p, resp.StatusCode, !wantRefused)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}
