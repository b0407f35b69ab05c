package metrics

import (
	"context"
	"time"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Webhook metrics (docs/design.md §11): what this process's sender did, and
// the deliveries pending in the database at scrape time.

type webhookMetrics struct {
	sends   *prometheus.CounterVec
	seconds *prometheus.HistogramVec
}

// webhookSource is the store's read of the pending deliveries.
type webhookSource interface {
	WebhookBacklog(ctx context.Context) (store.WebhookBacklog, error)
}

func newWebhookMetrics(reg prometheus.Registerer, src stateSource) webhookMetrics {
	w := webhookMetrics{
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inkwell_webhook_sends_total",
			Help: "Webhook sends by this process, by outcome: delivered (a 2xx, recorded), failed (tried again later), gave_up (the last send allowed failed).",
		}, []string{"outcome"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "inkwell_webhook_send_seconds",
			Help:    "Duration of webhook sends, by outcome.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 30},
		}, []string{"outcome"}),
	}
	reg.MustRegister(w.sends, w.seconds)
	if ws, ok := src.(webhookSource); ok {
		reg.MustRegister(&webhookCollector{src: ws,
			pending: prometheus.NewDesc("inkwell_webhook_deliveries_pending",
				"Webhook deliveries neither delivered nor given up nor parked, at scrape time (aggregate with max across processes).", nil, nil),
			oldest: prometheus.NewDesc("inkwell_webhook_oldest_pending_age_seconds",
				"Age of the oldest pending webhook delivery (0 when there is none).", nil, nil),
			parked: prometheus.NewDesc("inkwell_webhook_deliveries_parked",
				"Webhook deliveries waiting for their account to have a webhook URL again (removed after their job ended); not in inkwell_webhook_deliveries_pending.", nil, nil),
		})
	}
	return w
}

// WebhookSent counts one webhook send (webhook.Observer).
func (m *Metrics) WebhookSent(outcome string, seconds float64) {
	if m == nil {
		return
	}
	m.webhooks.sends.WithLabelValues(outcome).Inc()
	m.webhooks.seconds.WithLabelValues(outcome).Observe(seconds)
}

type webhookCollector struct {
	src                     webhookSource
	pending, oldest, parked *prometheus.Desc
}

func (c *webhookCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.oldest
	ch <- c.parked
}

func (c *webhookCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := c.src.WebhookBacklog(ctx)
	if err != nil {
		return // inkwell_overview_up says when the database cannot be read
	}
	var age float64
	if b.Oldest != nil {
		age = max(0, time.Since(*b.Oldest).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(b.Pending))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(b.Parked))
}
