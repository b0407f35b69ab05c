package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/prometheus/client_golang/prometheus"
)

// configRoutes builds serve's routes from a config file's catalog
// (docs/providers.md): for each provider its client, its key read from its
// key_env (never from the file), and its own limiter, whose metrics carry
// provider="name".
func configRoutes(cat *catalog.Catalog, log *slog.Logger, reg prometheus.Registerer) (*Routes, error) {
	r := &Routes{Catalog: cat}
	for _, p := range cat.Providers {
		labels := prometheus.Labels{"provider": p.Name}
		client, err := providerClient(p, log, reg, labels)
		if err != nil {
			return nil, fmt.Errorf("provider %q: %w", p.Name, err)
		}
		lim, err := newLimiter(p.RPM, p.TPM, log.With("provider", p.Name), reg, labels)
		if err != nil {
			return nil, fmt.Errorf("provider %q: %w", p.Name, err)
		}
		r.AddProvider(p, client, lim)
		log.Info("provider", "name", p.Name, "kind", p.Kind, "url", p.URL, "key_env", p.KeyEnv, "key_set", p.KeyEnv != "" && os.Getenv(p.KeyEnv) != "",
			"rpm", p.RPM, "tpm", p.TPM, "timeout", p.Timeout.String(), "honours_keys", p.HonoursKeys)
	}
	for _, m := range cat.Models {
		log.Info("model", "name", m.Name, "provider", m.Provider, "upstream", m.Upstream, "default", m.Name == cat.Default,
			"input_micros_per_mtok", m.InputMicrosPerMTok, "output_micros_per_mtok", m.OutputMicrosPerMTok, "max_output_tokens", m.MaxOutputTokens)
	}
	for _, w := range cat.TimeoutWarnings() {
		log.Warn("config: " + w)
	}
	return r, nil
}

// providerClient is the client of one config provider.
func providerClient(p catalog.Provider, log *slog.Logger, reg prometheus.Registerer, labels prometheus.Labels) (inkwell.Provider, error) {
	key := ""
	if p.KeyEnv != "" {
		key = os.Getenv(p.KeyEnv)
	}
	switch p.Kind {
	case catalog.KindSim:
		return provider.NewSim(p.Latency), nil
	case catalog.KindOpenAI:
		resends, err := resendCounter(reg, labels)
		if err != nil {
			return nil, err
		}
		return provider.NewOpenAI(provider.OpenAIConfig{URL: p.URL, APIKey: key, Timeout: p.Timeout, LimitField: p.LimitField,
			Logger: log.With("provider", p.Name), OnResend: resends.Inc})
	case catalog.KindAnthropic:
		resends, err := resendCounter(reg, labels)
		if err != nil {
			return nil, err
		}
		return provider.NewAnthropic(provider.AnthropicConfig{URL: p.URL, APIKey: key, Timeout: p.Timeout, Logger: log.With("provider", p.Name), OnResend: resends.Inc})
	}
	return nil, fmt.Errorf("kind %q is not one of %v", p.Kind, catalog.Kinds)
}

// resendCounter is inkwell_provider_http_resends_total for one provider.
func resendCounter(reg prometheus.Registerer, labels prometheus.Labels) (prometheus.Counter, error) {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name:        "inkwell_provider_http_resends_total",
		Help:        "Provider calls the HTTP transport sent again on another connection (a provider that ignores idempotency keys bills each twice). Should stay 0.",
		ConstLabels: labels,
	})
	if reg != nil {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register provider metrics: %w", err)
		}
	}
	return c, nil
}
