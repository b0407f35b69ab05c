package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestCLI_HelpPrintsOnce: asking for help prints the usage once, to
// stdout, and nothing to stderr; a bad flag prints the mistake and the
// usage once, to stderr, and nothing to stdout. (The flag package prints
// the usage itself before it reports -h, so printing it again is easy.)
func TestCLI_HelpPrintsOnce(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCLI(t, args...)
			assertUsageOnce(t, args, code, 0, stdout, stderr, "Usage: inkwell COMMAND")
		})
	}
	for _, name := range slices.Sorted(maps.Keys(commands)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			usage := "Usage: inkwell " + name + " "
			for _, help := range []string{"--help", "-h"} {
				code, stdout, stderr := runCLI(t, name, help)
				assertUsageOnce(t, []string{name, help}, code, 0, stdout, stderr, usage)
			}
			args := []string{name, "--no-such-flag"}
			code, stdout, stderr := runCLI(t, args...)
			assertUsageOnce(t, args, code, 2, stderr, stdout, usage)
			if !strings.Contains(stderr, "flag provided but not defined: -no-such-flag") {
				t.Errorf("inkwell %s: stderr does not name the bad flag:\n%s", strings.Join(args, " "), stderr)
			}
		})
	}
}

// assertUsageOnce checks the exit code, that out holds usage exactly
// once, and that other holds no usage at all.
func assertUsageOnce(t *testing.T, args []string, code, wantCode int, out, other, usage string) {
	t.Helper()
	cmd := "inkwell " + strings.Join(args, " ")
	if code != wantCode {
		t.Errorf("%s: exit %d, want %d", cmd, code, wantCode)
	}
	if n := strings.Count(out, usage); n != 1 {
		t.Errorf("%s printed %q %d times, want once:\n%s", cmd, usage, n, out)
	}
	if strings.Contains(other, "Usage:") {
		t.Errorf("%s also printed the usage on the other stream:\n%s", cmd, other)
	}
}

// TestCLI_SubcommandsListed: a command whose summary lists its
// subcommands in parentheses lists exactly those it takes (as its
// "unknown subcommand" answer names them), and each answers --help.
// (Only these commands: others, such as provider-sim, would run.)
func TestCLI_SubcommandsListed(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"accounts", "tokens", "webhooks"} {
		code, _, stderr := runCLI(t, name, "no-such-subcommand")
		_, want, ok := strings.Cut(strings.TrimSpace(stderr), `unknown subcommand "no-such-subcommand": want `)
		if !ok {
			t.Errorf("inkwell %s no-such-subcommand: %q does not name the subcommands", name, stderr)
			continue
		}
		if code != 2 {
			t.Errorf("inkwell %s no-such-subcommand: exit %d, want 2", name, code)
		}
		summary := commands[name].summary
		if !strings.HasSuffix(summary, "("+want+")") {
			t.Errorf("inkwell %s: summary %q does not end with its subcommands (%s)", name, summary, want)
		}
		for _, sub := range strings.Split(want, ", ") {
			if code, _, stderr := runCLI(t, name, sub, "--help"); code != 0 {
				t.Errorf("inkwell %s %s --help: exit %d\n%s", name, sub, code, stderr)
			}
		}
	}
}
