// Command inkwell is Inkwell's single binary: the server (serve), its
// operator commands (status, show, retry, recover, migrate), a client
// (submit), the provider simulator and the crash drill.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal starts a graceful stop, a second one kills the
	// process the ordinary way.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
