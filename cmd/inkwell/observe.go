package main

import (
	"context"
	"log/slog"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// newRegistry is serve's one Prometheus registry (never the global one):
// Inkwell's metrics are added by metrics.New, the Go runtime's and the
// process's here.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// logRecovered logs each job that startup recovery moved running -> failed,
// once, with the attempt, the lane and the run whose evidence allowed it:
// the lane's own log line counts them, this one names them.
func logRecovered(ctx context.Context, st *store.Store, rep store.RecoveryReport, log *slog.Logger) {
	if rep.RunID == 0 || rep.AttemptsClosed+rep.AttemptsBackfilled == 0 {
		return
	}
	closed, err := st.RecoveredAttempts(ctx, rep.RunID)
	if err != nil {
		log.WarnContext(ctx, "list jobs closed by recovery", "recovery_run_id", rep.RunID, "err", err)
		return
	}
	for _, a := range closed {
		log.WarnContext(ctx, "job failed by startup recovery", "component", "recovery", "job_id", a.JobID,
			"attempt_id", a.AttemptID, "attempt_number", a.AttemptNumber, "lane", rep.Lane,
			"error", inkwell.ErrWorkerRestarted, "recovery_run_id", rep.RunID, "evidence", rep.Evidence.LockMethod)
	}
}
