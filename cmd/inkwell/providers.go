package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/prometheus/client_golang/prometheus"
)

type providerFlags struct {
	kind, url, model *string
	latency, timeout *time.Duration

	// metrics and log are set by the command before build, not by flags.
	// With --provider openai, build registers
	// inkwell_provider_http_resends_total in metrics (none when nil) and
	// the provider warns through log (slog.Default() when nil).
	metrics prometheus.Registerer
	log     *slog.Logger
}

func addProviderFlags(fs *flag.FlagSet) providerFlags {
	return providerFlags{
		kind:    fs.String("provider", "sim", "text provider: sim (in-process, deterministic, free) or openai (OpenAI-compatible API; key from env INKWELL_PROVIDER_KEY)"),
		latency: fs.Duration("sim-latency", 2*time.Second, "with --provider sim: how long each call takes (long enough to watch a job run, or kill it mid-call)"),
		url:     fs.String("provider-url", "", "with --provider openai: the API's base URL, e.g. http://127.0.0.1:9090 (a provider-sim) or https://api.openai.com"),
		model:   fs.String("model", "", "with --provider openai: the model name sent with each call"),
		timeout: fs.Duration("provider-timeout", 60*time.Second, "with --provider openai: bound on one provider call"),
	}
}

// build returns the configured provider. The key is read from the
// environment only, so it never shows in a process listing or a log.
func (f providerFlags) build() (inkwell.Provider, error) {
	switch *f.kind {
	case "sim":
		if *f.latency < 0 {
			return nil, fmt.Errorf("--sim-latency must not be negative")
		}
		return provider.NewSim(*f.latency), nil
	case "openai":
		if *f.url == "" {
			return nil, fmt.Errorf("--provider openai needs --provider-url")
		}
		// Each connection the HTTP transport obtains for one call after
		// the first is a request the provider may bill twice: counted here,
		// and warned about by the provider with the job's provider key.
		resends := prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inkwell_provider_http_resends_total",
			Help: "Provider calls the HTTP transport sent again on another connection (a provider that ignores idempotency keys bills each twice). Should stay 0.",
		})
		p, err := provider.NewOpenAI(provider.OpenAIConfig{
			URL: *f.url, Model: *f.model, APIKey: os.Getenv("INKWELL_PROVIDER_KEY"), Timeout: *f.timeout,
			Logger: f.log, OnResend: resends.Inc,
		})
		if err != nil {
			return nil, err
		}
		if f.metrics != nil {
			if err := f.metrics.Register(resends); err != nil {
				return nil, fmt.Errorf("register provider metrics: %w", err)
			}
		}
		return p, nil
	}
	return nil, fmt.Errorf("--provider %q: want sim or openai", *f.kind)
}
