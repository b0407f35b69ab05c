package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// catalogTestdata is the config files internal/catalog's tests read.
const catalogTestdata = "../../internal/catalog/testdata"

// runModelsCLI runs 'inkwell models args...' in this process.
func runModelsCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), append([]string{"models"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestModels_Tables prints a file's providers and models, says whether
// each key's variable is set, and never prints a key.
func TestModels_Tables(t *testing.T) {
	const secret = "sk-test-models-never-printed"
	t.Setenv("OPENAI_API_KEY", secret)
	t.Setenv("ANTHROPIC_API_KEY", "")
	path := filepath.Join(catalogTestdata, "full.toml")
	code, stdout, stderr := runModelsCLI(t, "--config", path)
	if code != 0 || stderr != "" {
		t.Fatalf("inkwell models: exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"CONFIG " + path + "\n",
		"  NAME       KIND       URL                          KEY_ENV            KEY      RPM        TPM        TIMEOUT  HONOURS KEYS\n",
		"  local      sim        (in process, latency 250ms)  -                  -        60         unlimited  1m0s     yes\n",
		"  openai     openai     https://api.openai.com       OPENAI_API_KEY     set      500        200000     1m30s    yes\n",
		"  anthropic  anthropic  https://api.anthropic.com/   ANTHROPIC_API_KEY  NOT SET  unlimited  unlimited  2m0s     no\n",
		"  ANTHROPIC_API_KEY is not set in this environment",
		"MODELS (prices in currency units per million tokens)\n",
		"  NAME         PROVIDER   UPSTREAM                INPUT      OUTPUT     MAX OUTPUT TOKENS  MAX IMAGE TOKENS  MAX INPUT TOKENS  DEFAULT\n",
		"  gpt-4o-mini  openai     gpt-4o-mini-2024-07-18  0.15       0.60       16384              48169             128000            no\n",
		"  claude-x     anthropic  claude-x-20250101       3.00       15.00      8192               0                 -                 yes\n",
		// No price is not free: 0.00 and 0.00 would read so.
		"  echo         local      echo                    unpriced*  unpriced*  1                  50000             -                 no\n",
		"  * no price: charged what the provider says it billed",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inkwell models does not print %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, secret) {
		t.Errorf("inkwell models printed the key's value:\n%s", stdout)
	}
}

// TestModels_JSON prints the catalog in the config file's key names;
// INKWELL_CONFIG is --config's default.
func TestModels_JSON(t *testing.T) {
	t.Setenv("INKWELL_CONFIG", filepath.Join(catalogTestdata, "full.toml"))
	t.Setenv("OPENAI_API_KEY", "sk-test")
	code, stdout, stderr := runModelsCLI(t, "--json")
	var got catalogJSON
	if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil {
		t.Fatalf("inkwell models --json: exit %d, stderr %q, stdout %q", code, stderr, stdout)
	}
	if got.DefaultModel != "claude-x" || got.AnyModel || len(got.Providers) != 3 || len(got.Models) != 3 {
		t.Fatalf("models --json = %+v; want 3 providers, 3 models, default claude-x", got)
	}
	if p := got.Providers[1]; p.Name != "openai" || !p.KeySet || p.Timeout != "1m30s" || p.RPM != 500 {
		t.Errorf("providers[1] = %+v", p)
	}
	if m := got.Models[0]; m.MaxInputTokens != 128_000 {
		t.Errorf("models[0].max_input_tokens = %d, want 128000", m.MaxInputTokens)
	}
	if m := got.Models[1]; m.Name != "claude-x" || !m.Default || m.InputMicrosPerMTok != 3_000_000 || m.Upstream != "claude-x-20250101" {
		t.Errorf("models[1] = %+v", m)
	}
	if strings.Contains(stdout, "sk-test") {
		t.Errorf("models --json printed the key's value:\n%s", stdout)
	}
}

// TestModels_BadFile: a file serve would refuse is exit 2, the error with
// its line on stderr, nothing on stdout.
func TestModels_BadFile(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--config", filepath.Join(catalogTestdata, "refused", "unknown_key.toml")},
		{"--config", filepath.Join(catalogTestdata, "refused", "unknown_key.toml"), "--json"},
	} {
		code, stdout, stderr := runModelsCLI(t, args...)
		want := "inkwell models: " + filepath.Join(catalogTestdata, "refused", "unknown_key.toml") + `:17: [[model]] #2 "gpt-4o-mini": unknown key "input_micros_per_token": did you mean "input_micros_per_mtok"?`
		if code != 2 || stdout != "" || !strings.HasPrefix(stderr, want) {
			t.Errorf("inkwell models %v: exit %d, stdout %q, stderr %q; want exit 2, no stdout, stderr starting %q", args, code, stdout, stderr, want)
		}
	}
	code, stdout, stderr := runModelsCLI(t, "--config", filepath.Join(t.TempDir(), "none.toml"))
	if code != 2 || stdout != "" || !strings.Contains(stderr, "none.toml") {
		t.Errorf("inkwell models --config (missing): exit %d, stdout %q, stderr %q; want exit 2 naming the file", code, stdout, stderr)
	}
	code, _, stderr = runModelsCLI(t, "extra")
	if code != 2 || !strings.Contains(stderr, `unexpected argument "extra"`) {
		t.Errorf("inkwell models extra: exit %d, stderr %q; want exit 2", code, stderr)
	}
}

// TestModels_NoConfig says what serve runs without a file.
func TestModels_NoConfig(t *testing.T) {
	t.Setenv("INKWELL_CONFIG", "")
	os.Unsetenv("INKWELL_CONFIG")
	code, stdout, stderr := runModelsCLI(t)
	if code != 0 || stderr != "" || !strings.Contains(stdout, "--provider sim") || !strings.Contains(stdout, "answers any model name") {
		t.Errorf("inkwell models: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	code, stdout, _ = runModelsCLI(t, "--json")
	var got catalogJSON
	if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil || !got.AnyModel || got.Path != "" || len(got.Providers) != 1 || got.Providers[0].Kind != "sim" {
		t.Errorf("inkwell models --json: exit %d, %+v; want the sim answering any model", code, got)
	}
}
