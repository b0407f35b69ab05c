// Command inkwell is Inkwell's single binary: the server (serve), its
// operator commands (status, show, retry, recover, migrate), a client
// (submit), the provider simulator and the crash drill.
package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// One channel for every signal, registered before any arrives: the
	// first starts a graceful stop, a second ends the process at once,
	// saying so. (Registering the second's channel only once the first
	// had come left a moment when a quick second signal met the default
	// action, and the process died without a word.)
	// The cause stays context.Canceled, as signal.NotifyContext's was: a
	// lane reads its context's cause, and a stop by signal is no error.
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP) // SIGHUP: a closed terminal or SSH session stops serve gracefully too
	go func() {
		<-sigs
		cancel()
		exitOnSecond(sigs, os.Stderr)
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}

// exitOnSecond ends the process at the second signal, with a log line:
// what the graceful stop had not finished is left as it is, and a serve's
// calls still in flight stay running until the next start's recovery
// closes them (docs/recovery.md). The exit status is the shell's for a
// death by that signal (128 + its number).
func exitOnSecond(second <-chan os.Signal, stderr io.Writer) {
	sig := <-second
	slog.New(slog.NewTextHandler(stderr, nil)).Error("second signal: stopping at once, without finishing the graceful stop; "+
		"a serve's calls still in flight stay running until the next start's recovery closes them as 'worker restarted'", "signal", sig.String())
	code := 1
	if s, ok := sig.(syscall.Signal); ok {
		code = 128 + int(s)
	}
	os.Exit(code)
}
