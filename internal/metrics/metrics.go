// Package metrics owns Inkwell's Prometheus metrics: what this process
// did (accepts, refusals, claims, outcomes, recoveries, webhook sends) and
// gauges read from the database's operator views at each scrape. The API,
// the worker (worker.Observer) and the webhook sender (webhook.Observer)
// report to it; none of them imports another.
package metrics

import (
	"context"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are Inkwell's Prometheus metrics. Counters and histograms count
// what this process did; the job and lane gauges are read from the
// database's operator views at scrape time, so every process reports the
// same truth about the shared database (aggregate them with max, not sum).
//
// *Metrics implements worker.Observer (Claimed, Finished) without either
// package importing the other. A nil *Metrics counts nothing.
type Metrics struct {
	accepted        prometheus.Counter
	answeredFromKey prometheus.Counter
	refused         *prometheus.CounterVec
	claimed         *prometheus.CounterVec
	attempts        *prometheus.CounterVec
	providerSeconds *prometheus.HistogramVec
	acceptToDone    prometheus.Histogram
	recoveryRuns    *prometheus.CounterVec
	recoveryRows    *prometheus.CounterVec
	chargesCapped   *prometheus.CounterVec
	microsUncharged *prometheus.CounterVec
	webhooks        webhookMetrics // metrics_webhooks.go
	now             func() time.Time
}

// stateSource is what the scrape-time collector reads.
type stateSource interface {
	Overview(ctx context.Context) ([]store.OverviewRow, error)
	LiveLanes(ctx context.Context) ([]store.LaneState, error)
}

// countSource is the cheaper read the store offers for the job gauges:
// job_overview's counts and oldest ages without its next actions (whose
// words need the lanes, the queue's head and the running jobs). A source
// without it is read through Overview.
type countSource interface {
	StatusCounts(ctx context.Context) ([]store.StatusCount, error)
}

// New creates the metrics and registers them, with a collector that
// reads src at each scrape, on reg. It panics if a name is already
// registered there: a programmer's mistake at construction time.
func New(reg prometheus.Registerer, src stateSource) *Metrics {
	m := &Metrics{
		accepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inkwell_requests_accepted_total",
			Help: "POST /v1/jobs requests that stored a new job (201).",
		}),
		answeredFromKey: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inkwell_requests_answered_from_key_total",
			Help: "POST /v1/jobs re-sends answered with the job already stored under their idempotency key (200).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inkwell_requests_refused_total",
			Help: "HTTP requests answered with an error, by route and error code (reason); a refusal writes nothing.",
		}, []string{"route", "reason"}),
		claimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inkwell_attempts_started_total",
			Help: "Attempts opened by a claim, by lane.",
		}, []string{"lane"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inkwell_attempts_total",
			Help: "Attempts finished by this process, by lane and outcome: done, failed, rescheduled (failed, job queued again by automatic retry), cancelled (the call aborted because its job was cancelled), fenced (a late outcome refused because recovery closed the attempt), aborted (the outcome could not be written).",
		}, []string{"lane", "outcome"}),
		providerSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "inkwell_provider_call_seconds",
			Help:    "Duration of provider calls, by the attempt's outcome.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120},
		}, []string{"outcome"}),
		acceptToDone: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "inkwell_job_accept_to_done_seconds",
			Help:    "Time from a job's acceptance to its completion, retries included.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
		}),
		recoveryRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inkwell_recovery_runs_total",
			Help: "Startup recovery runs by this process, by lane.",
		}, []string{"lane"}),
		recoveryRows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inkwell_recovery_rows_total",
			Help: "Rows changed or reported by startup recovery, by lane and kind: attempts_closed, attempts_backfilled, jobs_failed, anomalies (left unchanged).",
		}, []string{"lane", "kind"}),
		chargesCapped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inkwell_charges_capped_total",
			Help: "Answers that reported more usage (or a larger bill) than their request's worst case, charged that worst case instead, by lane and model: a provider's miscount to take up with it.",
		}, []string{"lane", "model"}),
		microsUncharged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inkwell_charges_capped_micros_total",
			Help: "Micros those answers reported past what they were charged, by lane and model.",
		}, []string{"lane", "model"}),
		now: time.Now,
	}
	reg.MustRegister(m.accepted, m.answeredFromKey, m.refused, m.claimed, m.attempts,
		m.providerSeconds, m.acceptToDone, m.recoveryRuns, m.recoveryRows, m.chargesCapped, m.microsUncharged, newStateCollector(src))
	m.webhooks = newWebhookMetrics(reg, src)
	return m
}

// Claimed counts an attempt opened on lane (worker.Observer).
func (m *Metrics) Claimed(lane string) {
	if m == nil {
		return
	}
	m.claimed.WithLabelValues(lane).Inc()
}

// Finished counts an attempt's outcome, its provider call's duration and,
// for a done job, the time since it was accepted (worker.Observer).
func (m *Metrics) Finished(lane, outcome string, providerSeconds float64, job inkwell.Job) {
	if m == nil {
		return
	}
	m.attempts.WithLabelValues(lane, outcome).Inc()
	if providerSeconds > 0 { // zero: no call was made (e.g. an unreadable payload)
		m.providerSeconds.WithLabelValues(outcome).Observe(providerSeconds)
	}
	if outcome == outcomeDone && !job.CreatedAt.IsZero() {
		m.acceptToDone.Observe(m.now().Sub(job.CreatedAt).Seconds())
	}
}

// ChargeCapped counts an answer charged its worst case instead of what it
// reported (worker.ChargeCapObserver).
func (m *Metrics) ChargeCapped(lane, model string, reportedMicros, chargedMicros int64) {
	if m == nil {
		return
	}
	m.chargesCapped.WithLabelValues(lane, model).Inc()
	m.microsUncharged.WithLabelValues(lane, model).Add(float64(reportedMicros - chargedMicros))
}

// outcomeDone is worker.OutcomeDone, which metrics does not import.
const outcomeDone = "done"

// Recovered counts one startup recovery run and the rows it changed.
func (m *Metrics) Recovered(rep store.RecoveryReport) {
	if m == nil || rep.DryRun {
		return
	}
	m.recoveryRuns.WithLabelValues(rep.Lane).Inc()
	m.recoveryRows.WithLabelValues(rep.Lane, "attempts_closed").Add(float64(rep.AttemptsClosed))
	m.recoveryRows.WithLabelValues(rep.Lane, "attempts_backfilled").Add(float64(rep.AttemptsBackfilled))
	m.recoveryRows.WithLabelValues(rep.Lane, "jobs_failed").Add(float64(rep.JobsFailed))
	m.recoveryRows.WithLabelValues(rep.Lane, "anomalies").Add(float64(len(rep.Anomalies)))
}

// AcceptedJob counts an accept: a new job, or a re-send answered with
// the job its key made.
func (m *Metrics) AcceptedJob(created bool) {
	switch {
	case m == nil:
	case created:
		m.accepted.Inc()
	default:
		m.answeredFromKey.Inc()
	}
}

// Refusal counts an answer that refused a request, by route and code.
func (m *Metrics) Refusal(route, code string) {
	if m == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	m.refused.WithLabelValues(route, code).Inc()
}

// stateCollector reads the operator views at each scrape, so the gauges
// are the database's truth at that moment, never a cached count. The
// counts themselves are kept by the database, in the transaction of each
// write (job_counts, migration 0004), so a scrape costs the same at any
// size: four counts, four index probes and the lanes.
type stateCollector struct {
	src     stateSource
	timeout time.Duration

	up, jobs, oldest, liveLanes, laneAlive, laneAge, laneRunning *prometheus.Desc
}

func newStateCollector(src stateSource) *stateCollector {
	return &stateCollector{
		src:     src,
		timeout: 5 * time.Second,
		up: prometheus.NewDesc("inkwell_overview_up",
			"1 when the last scrape could read the job_overview and lane_liveness views, else 0.", nil, nil),
		jobs: prometheus.NewDesc("inkwell_jobs",
			"Jobs by status, from job_overview at scrape time.", []string{"status"}, nil),
		oldest: prometheus.NewDesc("inkwell_oldest_job_age_seconds",
			"Age of the job longest in each status (0 when there is none), from job_overview.", []string{"status"}, nil),
		liveLanes: prometheus.NewDesc("inkwell_live_lanes",
			"Lanes whose heartbeat is fresh (lane_liveness.alive).", nil, nil),
		laneAlive: prometheus.NewDesc("inkwell_lane_alive",
			"1 when the lane is alive, 0 when it is silent or stopped.", []string{"lane", "state"}, nil),
		laneAge: prometheus.NewDesc("inkwell_lane_heartbeat_age_seconds",
			"Seconds since the lane's last heartbeat.", []string{"lane"}, nil),
		laneRunning: prometheus.NewDesc("inkwell_lane_running_jobs",
			"Jobs running on the lane; on a lane that is not alive they wait for its restart (or, on PostgreSQL, a rescue).", []string{"lane"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.jobs, c.oldest, c.liveLanes, c.laneAlive, c.laneAge, c.laneRunning} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	rows, err := c.counts(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	lanes, err := c.src.LiveLanes(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, r := range rows {
		ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(r.Jobs), r.Status)
		var age float64
		if r.OldestAgeSeconds != nil {
			age = float64(*r.OldestAgeSeconds)
		}
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age, r.Status)
	}
	live := 0
	for _, l := range lanes {
		alive := 0.0
		if l.Alive {
			alive = 1
			live++
		}
		ch <- prometheus.MustNewConstMetric(c.laneAlive, prometheus.GaugeValue, alive, l.Lane, l.State)
		ch <- prometheus.MustNewConstMetric(c.laneAge, prometheus.GaugeValue, float64(l.HeartbeatAgeSeconds), l.Lane)
		ch <- prometheus.MustNewConstMetric(c.laneRunning, prometheus.GaugeValue, float64(l.RunningJobs), l.Lane)
	}
	ch <- prometheus.MustNewConstMetric(c.liveLanes, prometheus.GaugeValue, float64(live))
}

// counts reads job_overview's counts and oldest ages: through StatusCounts
// when the source has it, else from the whole overview.
func (c *stateCollector) counts(ctx context.Context) ([]store.StatusCount, error) {
	if cs, ok := c.src.(countSource); ok {
		return cs.StatusCounts(ctx)
	}
	rows, err := c.src.Overview(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]store.StatusCount, len(rows))
	for i, r := range rows {
		out[i] = store.StatusCount{Status: r.Status, Jobs: r.Jobs, OldestAgeSeconds: r.OldestAgeSeconds}
	}
	return out, nil
}
