package main

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/inkwell/inkwell/internal/provider/providersim"
)

func init() {
	register("provider-sim", "run the provider simulator: an OpenAI-compatible API that bills into its own ledger", runProviderSim)
}

const providerSimHelp = `
Provider-sim plays the paid outside world. It answers POST
/v1/chat/completions like an OpenAI-compatible server, and bills each new
Idempotency-Key once in its own SQLite ledger (--ledger): a repeated key gets
the same completion and no new bill, a call without a key is billed every
time. It answers POST /v1/messages like Anthropic's Messages API too, which
honours no key: every message is billed. GET /ledger reports, per key, the
calls, the bills and the amount.

Point 'inkwell serve --provider openai --provider-url http://ADDR' at it,
or a config file's openai or anthropic provider (url = "http://ADDR").
--fail-rate and --hang-rate inject 500 answers (529 overloaded on
/v1/messages) and calls that never answer; --seed makes their sequence
reproducible. Neither is ever billed.

--rpm and --tpm enforce requests and tokens per minute as a hosted API
does, over short windows (a bucket holding one second's allowance): a call
past either is answered 429 with a Retry-After and is not billed. Every
answer reports its usage (prompt, completion and total tokens).

It logs "listening addr=..." once it accepts connections (--addr
127.0.0.1:0 picks a free port), and stops cleanly on SIGTERM or SIGINT.`

func runProviderSim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("provider-sim", "--addr ADDR --ledger FILE [flags]", providerSimHelp, stdout, stderr)
	addr := fs.String("addr", "127.0.0.1:9090", "listen address (loopback by default)")
	ledger := fs.String("ledger", "provider-ledger.db", "the simulator's ledger, a SQLite file (created when missing)")
	latency := fs.Duration("latency", 0, "how long each completion takes before it is billed and answered")
	failRate := fs.Float64("fail-rate", 0, "chance, 0 to 1, that a call is answered 500 and not billed")
	hangRate := fs.Float64("hang-rate", 0, "chance, 0 to 1, that a call is never answered (until the client gives up) and not billed")
	seed := fs.Int64("seed", 1, "seed of the failure and hang draws: the same seed gives the same sequence")
	rpm := fs.Int("rpm", 0, "requests per minute it accepts; past it a call is answered 429 with Retry-After, unbilled (0: no limit)")
	tpm := fs.Int("tpm", 0, "tokens per minute it accepts, counted by each answer's usage; past it a call is answered 429 with Retry-After, unbilled (0: no limit)")
	logf := addLogFlags(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if !flagsOnly(fs, stderr, "see --help") {
		return 2
	}
	if *latency < 0 {
		fmt.Fprintln(stderr, "inkwell provider-sim: --latency must not be negative")
		return 2
	}
	if *rpm < 0 || *tpm < 0 {
		fmt.Fprintf(stderr, "inkwell provider-sim: --rpm and --tpm must be 0 (no limit) or more, not %d and %d\n", *rpm, *tpm)
		return 2
	}
	log, err := logf.logger(stderr)
	if err != nil {
		return fail(stderr, "provider-sim", err)
	}
	srv, err := providersim.New(providersim.Config{
		Addr: *addr, LedgerPath: *ledger, Latency: *latency,
		FailRate: *failRate, HangRate: *hangRate, Seed: *seed, RPM: *rpm, TPM: *tpm, Logger: log,
	})
	if err != nil {
		return fail(stderr, "provider-sim", err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fail(stderr, "provider-sim", fmt.Errorf("listen %s: %w", *addr, err))
	}
	// Serve logs "listening" with the bound address, then answers until
	// ctx ends (SIGTERM/SIGINT), cutting hung calls as a dying provider would.
	if err := srv.Serve(ctx, ln); err != nil {
		return fail(stderr, "provider-sim", err)
	}
	log.Info("provider simulator stopped")
	return 0
}
