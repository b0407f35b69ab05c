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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal starts a graceful stop, a second one ends the
	// process at once, saying so.
	context.AfterFunc(ctx, func() {
		stop()
		second := make(chan os.Signal, 1)
		signal.Notify(second, os.Interrupt, syscall.SIGTERM)
		go exitOnSecond(second, os.Stderr)
	})
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
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
