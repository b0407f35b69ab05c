package crashpoint

// The named crash points of docs/design.md §6. Each comment says what the
// database holds at the instant the process dies there.
const (
	// AcceptBeforeCommit: the accept transaction (possibly a group of
	// requests) has inserted its job rows but not committed; after the
	// crash none of them exist and no client got an answer.
	AcceptBeforeCommit = "accept.before-commit"
	// AcceptAfterCommit: the job rows are durable and queued, but no client
	// got its answer yet; a re-send with the same key gets 200 and the job.
	// A live lane (it polls) may already have claimed it, or even finished
	// it, before the kill: the crash then leaves it running (an orphan for
	// recovery) or done.
	AcceptAfterCommit = "accept.after-commit"
	// ClaimAfterCommit: the job is running with a running attempt, and the
	// provider has not been called.
	ClaimAfterCommit = "claim.after-commit"
	// ProviderAfterCall: the provider answered and billed under the job's
	// key; the database still says running and holds no result or charge.
	ProviderAfterCall = "provider.after-call"
	// CompleteBeforeCommit: result, charge and the done statuses are written
	// inside the open transaction but not committed; after the crash the
	// database is as at ProviderAfterCall.
	CompleteBeforeCommit = "complete.before-commit"
	// CompleteAfterCommit: the job is done with one result and one charge;
	// only the in-memory bookkeeping after the commit is lost.
	CompleteAfterCommit = "complete.after-commit"
	// RecoverBeforeCommit: startup recovery has written its recovery_runs
	// row and closed the orphans inside its transaction but not committed;
	// after the crash everything is as before recovery began.
	RecoverBeforeCommit = "recover.before-commit"
	// RetryAfterCommit: a failed job was moved back to queued and committed;
	// its attempts are untouched. As at AcceptAfterCommit, a polling lane
	// may have claimed (or finished) it before the kill.
	RetryAfterCommit = "retry.after-commit"
	// CancelAfterCommit: a cancel committed: the job is failed, class
	// cancelled, and so is its attempt if it was running; the client got no
	// answer, and a lane may still be in the cancelled attempt's provider
	// call (its completion will be fenced out).
	CancelAfterCommit = "cancel.after-commit"
	// WebhookAfterSend: the receiver answered a webhook delivery with a
	// 2xx, and the commit that marks it delivered has not run; after the
	// crash the delivery is still pending and is sent again (at least once:
	// the same webhook-id, so the receiver dedupes).
	WebhookAfterSend = "webhook.after-send"
)

// Names lists every known crash point, in the order of a job's life.
var Names = []string{
	AcceptBeforeCommit, AcceptAfterCommit, ClaimAfterCommit, ProviderAfterCall,
	CompleteBeforeCommit, CompleteAfterCommit, RecoverBeforeCommit, RetryAfterCommit,
	CancelAfterCommit, WebhookAfterSend,
}
