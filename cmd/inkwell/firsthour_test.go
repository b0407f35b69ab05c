package main

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The first hour: what a new user meets first.

// TestServe_RefusesStrayArguments: a word serve does not take is refused
// before any file is created (it used to be ignored, and serve created
// inkwell.db beside it).
func TestServe_RefusesStrayArguments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inkwell.db")
	for _, args := range [][]string{
		{"serve", "--db", db, "mydata.db"},
		{"serve", "mydata.db", "--db", db},
		{"serve", "--db", db, "--", "--addr"},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, "unexpected argument") || stdout != "" {
			t.Errorf("inkwell %q: exit %d, stderr %q; want 2 naming the argument", args, code, stderr)
		}
		assertNoFiles(t, dir)
	}
}

// TestServe_OpenAIFlagsRefusedBeforeAnythingIsCreated: a zero timeout
// (every call would fail at once) and a negative price are refused with
// the flag named, and no database is created.
func TestServe_OpenAIFlagsRefusedBeforeAnythingIsCreated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inkwell.db")
	for flagName, args := range map[string][]string{
		"--provider-timeout":          {"--provider-timeout", "500ms"},
		"--provider-micros-per-token": {"--provider-micros-per-token", "-1"},
	} {
		all := append([]string{"serve", "--db", db, "--provider", "openai", "--provider-url", "http://127.0.0.1:9"}, args...)
		code, _, stderr := runCLI(t, all...)
		if code != 2 || !strings.Contains(stderr, flagName) {
			t.Errorf("inkwell %q: exit %d, stderr %q; want 2 naming %s", all, code, stderr, flagName)
		}
		assertNoFiles(t, dir)
	}
}

// TestServe_OpenAISaysWhatItUses: the openai provider logs, as it is
// built (before serve opens the database), the URL each call goes to, the
// model, the timeout and the price per token; never the key.
func TestServe_OpenAISaysWhatItUses(t *testing.T) {
	t.Setenv("INKWELL_PROVIDER_KEY", "sk-secret-never-logged")
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := addProviderFlags(fs)
	if err := fs.Parse([]string{"--provider", "openai", "--provider-url", "http://127.0.0.1:9", "--model", "tiny",
		"--provider-timeout", "7s", "--provider-micros-per-token", "25"}); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	f.log = slog.New(slog.NewTextHandler(&logs, nil))
	if err := f.checkOpenAI(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.build(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"msg=\"provider openai\"", "url=http://127.0.0.1:9/v1/chat/completions", "model=tiny", "timeout=7s",
		"price=\"25 micros per token, unless the answer names its amount\"", "key_set=true"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("start log lacks %s:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "sk-secret") {
		t.Errorf("the provider key is in the log:\n%s", logs.String())
	}
}

// TestCLI_HelpCommandAndOneFlagStyle: 'inkwell help serve' is serve's
// help, and every command's help writes its flags one way, --name, as the
// README and the docs do.
func TestCLI_HelpCommandAndOneFlagStyle(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCLI(t, "help", "serve")
	assertUsageOnce(t, []string{"help", "serve"}, code, 0, stdout, stderr, "Usage: inkwell serve ")
	if !strings.Contains(stdout, "  --db string") {
		t.Errorf("inkwell help serve does not list --db:\n%s", stdout)
	}
	singleDash := regexp.MustCompile(`(?m)^\s+-[a-z]`)
	for name := range commands {
		_, stdout, _ := runCLI(t, name, "--help")
		if m := singleDash.FindString(stdout); m != "" {
			t.Errorf("inkwell %s --help lists a flag with one dash (%q):\n%s", name, m, stdout)
		}
	}
}

func assertNoFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("%s was created", filepath.Join(dir, e.Name()))
	}
}
