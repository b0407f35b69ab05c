package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/inkwell/inkwell/internal/webhook"
)

// Webhooks in serve (docs/design.md §11): the sender loop that posts the
// deliveries the store writes when a job of an account with a webhook URL
// ends (internal/webhook, docs/webhooks.md). Every serve runs one; on
// PostgreSQL several claim apart (SKIP LOCKED and a lease).

// webhookFlags are serve's flags for the webhook sender.
type webhookFlags struct {
	timeout, retryBase, retryCap *time.Duration
	maxAttempts, concurrency     *int
}

func addWebhookFlags(fs *flag.FlagSet) webhookFlags {
	return webhookFlags{
		timeout:     fs.Duration("webhook-timeout", 15*time.Second, "webhooks: how long one delivery may take before it counts as failed"),
		retryBase:   fs.Duration("webhook-retry-base", 5*time.Second, "webhooks: back-off after a delivery's first failed send; it doubles per send, with jitter (a Retry-After wins)"),
		retryCap:    fs.Duration("webhook-retry-cap", time.Hour, "webhooks: the longest back-off"),
		maxAttempts: fs.Int("webhook-max-attempts", 30, "webhooks: sends per delivery before it is given up ('inkwell webhooks replay ID' sends it again)"),
		concurrency: fs.Int("webhook-concurrency", 4, "webhooks: deliveries sent at once"),
	}
}

func (f webhookFlags) check() error {
	switch {
	case *f.timeout <= 0 || *f.retryBase <= 0 || *f.retryCap <= 0:
		return fmt.Errorf("--webhook-timeout, --webhook-retry-base and --webhook-retry-cap must be positive (got %s, %s, %s)", *f.timeout, *f.retryBase, *f.retryCap)
	case *f.retryCap < *f.retryBase:
		return fmt.Errorf("--webhook-retry-cap (%s) must not be shorter than --webhook-retry-base (%s)", *f.retryCap, *f.retryBase)
	case *f.maxAttempts < 1:
		return fmt.Errorf("--webhook-max-attempts must be at least 1, not %d", *f.maxAttempts)
	case *f.concurrency < 1:
		return fmt.Errorf("--webhook-concurrency must be at least 1, not %d", *f.concurrency)
	}
	return nil
}

func (f webhookFlags) config() webhook.Config {
	return webhook.Config{Timeout: *f.timeout, RetryBase: *f.retryBase, RetryCap: *f.retryCap, MaxAttempts: *f.maxAttempts, Concurrency: *f.concurrency}
}

// newWebhookSender makes serve's sender (OpenMain), before the lane, which
// wakes it at every job's end (worker.Config.OnEnded), so a delivery goes
// out at once rather than at the next poll.
func (m *Main) newWebhookSender() *webhook.Sender {
	cfg := m.cfg.Webhooks
	cfg.Logger = m.log.With("component", "webhooks")
	cfg.Observer = m.metrics
	return webhook.New(m.st, cfg)
}

// startWebhooks starts the sender and returns the function that stops it
// and waits for it: a send in flight is cut short and recorded as failed,
// due again at once (the next start sends it).
func (m *Main) startWebhooks(ctx context.Context) (stop func()) {
	snd := m.webhooks
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = snd.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
