package inkwell

// Job and attempt statuses. The values are exactly the text stored in the
// status columns of jobs and job_attempts (docs/design.md §1).
const (
	StatusQueued  = "queued"
	StatusRunning = "running"
	StatusFailed  = "failed"
	StatusDone    = "done"
)

// JobStatuses lists every job status in lifecycle order.
var JobStatuses = []string{StatusQueued, StatusRunning, StatusFailed, StatusDone}

// Errors written on attempts and jobs by the transitions that close them.
const (
	// ErrWorkerRestarted is written by startup recovery on every orphan it closes.
	ErrWorkerRestarted = "worker restarted"
	// ErrShutdownGrace is written when a graceful shutdown cut a provider call short.
	ErrShutdownGrace = "shutdown: provider call cut short by the grace period"
)
