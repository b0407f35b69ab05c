package worker

import (
	"context"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// A claim on PostgreSQL is one statement that commits on its own. When
// the connection breaks after the commit and before its answer reaches the
// lane (a reset, a proxy that dropped it), the claim returns an error and
// its attempts stay running on this lane with no slot running them; so
// does the job an outcome claimed in a commit that landed before its
// answer was lost (the outcome's retry finds its job done and claims
// nothing). Nothing else would ever end them while the lane runs: rescue
// leaves a lane whose lock is held alone, and recovery runs at the next
// start. A stranded attempt is found on evidence: it runs on this lane,
// whose lock this process holds (so no other process claimed it), it is
// older than any claim still on its way back, and this lane does not run
// it (its registry of calls, cancel.go, holds every attempt from the
// moment its job starts to run until its outcome is recorded). Its call
// was never made, so it fails as not_sent and its job is queued again at
// once: nothing was sent, nothing can be billed twice.

// strandedAge is how old a running attempt of this lane must be before it
// may be stranded: a claim's statement is bounded by Config.DBTimeout, a
// claim made with an outcome is stamped when its group begins and the
// group is bounded by store.OutcomeCommitTimeout, and a job claimed
// reaches its slot's registry a moment after its answer.
func (l *Lane) strandedAge() time.Duration {
	return max(l.cfg.DBTimeout, store.OutcomeCommitTimeout) + 5*time.Second
}

// closeStranded puts back the jobs of this lane's stranded attempts.
// Called from the heartbeat, after a beat that proved the lock held.
func (l *Lane) closeStranded(ctx context.Context) {
	refs, err := l.store.RunningAttemptsOf(ctx, l.cfg.Name, l.strandedAge())
	if err != nil || len(refs) == 0 {
		return // a read that failed is tried at the next beat
	}
	running := map[int64]bool{}
	for _, id := range l.calls.ids() {
		running[id] = true
	}
	for _, a := range refs {
		if running[a.ID] || ctx.Err() != nil {
			continue
		}
		now := l.store.Now()
		// Held back, as the limiter's give-back is: the lane's own doing,
		// nothing sent, so automatic retry does not count it.
		_, err := l.store.FailAndClaim(ctx, store.FailParams{JobID: a.JobID, AttemptID: a.ID, Class: inkwell.ClassNotSent, RetryAt: &now, HeldBack: true,
			Error: "not sent: this lane's claim of the job committed, but its answer never reached the lane (the database connection broke on the way back), so no call was made; queued again"}, nil)
		log := l.log.With("job_id", a.JobID, "attempt_id", a.ID)
		if err != nil {
			log.WarnContext(ctx, "a stranded attempt (claimed, its claim's answer lost) could not be put back; trying at the next heartbeat", "err", err)
			continue
		}
		log.WarnContext(ctx, "job put back: its claim committed but the answer was lost on the way back, so this lane never ran it; the provider was not called")
		l.requeued(a.JobID)
		l.Wake()
	}
}
