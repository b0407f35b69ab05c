package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/limiter"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/prometheus/client_golang/prometheus"
)

type providerFlags struct {
	kind, url, model *string
	latency, timeout *time.Duration
	rpm, tpm         *int
	microsPerToken   *int64

	// metrics and log are set by the command before build, not by flags.
	// With --provider openai, build registers
	// inkwell_provider_http_resends_total in metrics (none when nil) and
	// the provider warns through log (slog.Default() when nil); limiter
	// registers the limiter's metrics there, and logs its pauses.
	metrics prometheus.Registerer
	log     *slog.Logger
}

func addProviderFlags(fs *flag.FlagSet) providerFlags {
	f := providerFlags{
		kind:    fs.String("provider", "sim", "text provider: sim (in-process, deterministic, free) or openai (OpenAI-compatible API; key from env INKWELL_PROVIDER_KEY)"),
		latency: fs.Duration("sim-latency", 2*time.Second, "with --provider sim: how long each call takes (long enough to watch a job run, or kill it mid-call)"),
		url:     fs.String("provider-url", "", "with --provider openai: the API's base URL, e.g. http://127.0.0.1:9090 (a provider-sim) or https://api.openai.com"),
		model:   fs.String("model", "", "with --provider openai: the model name sent with each call"),
		timeout: fs.Duration("provider-timeout", 60*time.Second, "with --provider openai: bound on one provider call (at least 1s)"),
		rpm:     fs.Int("provider-rpm", 0, "the lane's provider calls per minute, spread evenly (0: unlimited); set it a little under the provider's limit"),
		tpm:     fs.Int("provider-tpm", 0, "the lane's provider tokens per minute, estimated from the prompt and max_words before each call and corrected by the answer's usage (0: unlimited)"),
	}
	f.microsPerToken = fs.Int64("provider-micros-per-token", 0, "with --provider openai: the price of one token in micros (millionths of the currency unit), charged as usage.total_tokens times this when the answer names no amount (0: Inkwell's own price by the word)")
	return f
}

// checkLimits refuses a negative limit before anything is created.
func (f providerFlags) checkLimits() error {
	if *f.rpm < 0 || *f.tpm < 0 {
		return fmt.Errorf("--provider-rpm and --provider-tpm must be 0 (unlimited) or more, not %d and %d", *f.rpm, *f.tpm)
	}
	return nil
}

// checkOpenAI refuses an unknown --provider, a negative simulated latency,
// a negative price, and (with --provider openai) no URL or a provider call
// with no time to run, before anything is created.
func (f providerFlags) checkOpenAI() error {
	switch {
	case *f.microsPerToken < 0 || *f.microsPerToken > 1_000_000:
		return fmt.Errorf("--provider-micros-per-token must be 0 (Inkwell's price by the word) to 1000000 (one currency unit a token), not %d", *f.microsPerToken)
	case *f.kind != "sim" && *f.kind != "openai":
		return fmt.Errorf("--provider %q: want sim or openai (or a config file, --config, for more providers)", *f.kind)
	case *f.kind == "sim" && *f.latency < 0:
		return fmt.Errorf("--sim-latency must not be negative, not %s", *f.latency)
	case *f.kind == "openai" && *f.url == "":
		return fmt.Errorf("--provider openai needs --provider-url")
	case *f.kind == "openai" && *f.timeout < catalog.MinTimeout:
		return fmt.Errorf("--provider-timeout must be at least %s, not %s: it bounds each provider call, and a call cut off while the provider answers may still be billed", catalog.MinTimeout, *f.timeout)
	}
	return nil
}

// limiter returns the lane's provider limiter. There is always one: a 429
// pauses every call of the lane even when no limit is set. Its metrics are
// registered in f.metrics (none when nil).
func (f providerFlags) limiter() (*limiter.Limiter, error) {
	return newLimiter(*f.rpm, *f.tpm, f.log, f.metrics, nil)
}

// newLimiter is one provider's limiter (rpm, tpm, and the pause after a
// 429), its metrics registered in reg (none when nil) under labels (a
// config file's provider="name"; none for the flags' one provider).
func newLimiter(rpm, tpm int, log *slog.Logger, reg prometheus.Registerer, labels prometheus.Labels) (*limiter.Limiter, error) {
	wait := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:        "inkwell_provider_limiter_wait_seconds",
		Help:        "Time each provider call waited for its provider's limits (rpm, tpm) and for a pause after a 429 before it was sent, or until the lane stopped.",
		Buckets:     []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120},
		ConstLabels: labels,
	})
	lim := limiter.New(limiter.Config{RPM: rpm, TPM: tpm, Logger: log,
		OnWait: func(d time.Duration) { wait.Observe(d.Seconds()) }})
	if reg == nil {
		return lim, nil
	}
	collectors := []prometheus.Collector{
		wait,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "inkwell_provider_calls_in_flight",
			Help:        "Provider calls sent and not answered yet.",
			ConstLabels: labels,
		}, func() float64 { return float64(lim.InFlight()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "inkwell_provider_429_total",
			Help:        "Provider calls answered 429 (rate limited); each pauses every call to that provider.",
			ConstLabels: labels,
		}, func() float64 { return float64(lim.RateLimited()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "inkwell_provider_paused_until_seconds",
			Help:        "Unix time until which no call is sent to the provider after a 429 (its Retry-After, or a back-off); 0 when not paused.",
			ConstLabels: labels,
		}, func() float64 { return unixSeconds(lim.PausedUntil()) }),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register limiter metrics: %w", err)
		}
	}
	return lim, nil
}

// unixSeconds is t as fractional Unix seconds; 0 for the zero time.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// build returns the configured provider. The key is read from the
// environment only, so it never shows in a process listing or a log.
func (f providerFlags) build() (inkwell.Provider, error) {
	// The flags' one check (runServe asks it first, before anything is
	// created; asked again here for any other caller).
	if err := errors.Join(f.checkLimits(), f.checkOpenAI()); err != nil {
		return nil, inkwell.Errorf(inkwell.EINVALID, "%v", err)
	}
	switch *f.kind {
	case "sim":
		return provider.NewSim(*f.latency), nil
	case "openai":
		// Each connection the HTTP transport obtains for one call after
		// the first is a request the provider may bill twice: counted here,
		// and warned about by the provider with the job's provider key.
		resends := prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inkwell_provider_http_resends_total",
			Help: "Provider calls the HTTP transport sent again on another connection (a provider that ignores idempotency keys bills each twice). Should stay 0.",
		})
		p, err := provider.NewOpenAI(provider.OpenAIConfig{
			URL: *f.url, Model: *f.model, APIKey: os.Getenv("INKWELL_PROVIDER_KEY"), Timeout: *f.timeout,
			MicrosPerToken: *f.microsPerToken, Logger: f.log, OnResend: resends.Inc,
		})
		if err != nil {
			return nil, err
		}
		price := "Inkwell's price by the word, unless the answer names its amount"
		if *f.microsPerToken > 0 {
			price = fmt.Sprintf("%d micros per token, unless the answer names its amount", *f.microsPerToken)
		}
		log := f.log
		if log == nil {
			log = slog.Default()
		}
		log.Info("provider openai", "url", p.Endpoint(), "model", p.Model(), "timeout", p.Timeout().String(),
			"price", price, "key_set", os.Getenv("INKWELL_PROVIDER_KEY") != "")
		if f.metrics != nil {
			if err := f.metrics.Register(resends); err != nil {
				return nil, fmt.Errorf("register provider metrics: %w", err)
			}
		}
		return p, nil
	}
	return nil, inkwell.Errorf(inkwell.EINVALID, "--provider %q: want sim or openai", *f.kind) // checkOpenAI refused it already
}
