package store

// Fair claims (docs/design.md §10, docs/scaling.md#fair-claims-across-accounts):
// lanes take queued jobs round robin across the accounts that have queued
// work, so that one account's flood does not starve another's single job.
//
// The round robin is written into the queue, not walked at claim time.
// Every queued job has a turn (jobs.claim_turn, migration 0013), given as
// it enters the queue (accept, batch, retry, reschedule: turnFor):
//
//	turn = max(front, the turn of its account's last queued job + 1)
//
// where front is the turn of the first ready queued job in claim order
// (the queue's head; when every queued job waits out a back-off, the
// lowest turn queued; 0 when nothing is queued). A claim takes the lowest
// turns, the oldest id first within a turn (claimPick): one ordered read
// of the jobs_queued_turn index, as the oldest-first claim read
// jobs_queued, where a walk across accounts cost one index probe per
// account served.
//
// So an account's k-th queued job is served in the k-th turn from the
// front, beside every other account's k-th: an account that arrives with
// one job gets the front turn and is claimed within one turn, at most as
// many claims as there are accounts with queued work, however long
// another account's queue. Within an account, jobs go in the order they
// entered the queue; a rescheduled or retried job enters again after its
// account's queued jobs, as a new one would. This is start-time fair
// queueing with equal weights, its virtual clock the queue's front.
//
// The front counts ready jobs only: a job waiting out a back-off keeps
// the turn it was given, and when its wait ends it is the first of its
// turn again; it does not hold the front back for the accounts that
// arrive meanwhile.
//
// Turns are computed by the writer that enqueues, from the committed
// queue. On PostgreSQL two accepts of one account committing at the same
// moment may read the same last turn and share it: that account is served
// twice in that turn, once. Fairness is the order of claims; it never
// decides whether a job runs, only when.

// turnFor is the turn (SQL) a job of account acct enters the queue with,
// at time now; both are SQL expressions of the statement it is part of.
// Three probes of two indexes: jobs_queued_turn for the front (from its
// start, passing over jobs waiting out a back-off), and
// jobs_queued_account_turn for the account's last turn.
func (s *Store) turnFor(acct, now string) string {
	return s.dialect.greatest + `(
		COALESCE(
			(SELECT q.claim_turn FROM jobs q WHERE q.status = 'queued' AND ` + readyFilter(now) + ` ORDER BY q.claim_turn, q.id LIMIT 1),
			(SELECT q.claim_turn FROM jobs q WHERE q.status = 'queued' ORDER BY q.claim_turn, q.id LIMIT 1),
			0),
		COALESCE((SELECT q.claim_turn FROM jobs q WHERE q.status = 'queued' AND q.account = ` + acct + ` ORDER BY q.claim_turn DESC LIMIT 1) + 1, 0))`
}

// claimPick is the claim's choice (SQL): the ids of up to $3 ready queued
// jobs, lowest turn first, then oldest id; now is the statement's time.
// It reads jobs_queued_turn only, and on PostgreSQL locks each job as it
// takes it, skipping those another lane is claiming.
func (s *Store) claimPick(now string) string {
	return `SELECT id FROM jobs WHERE status = 'queued' AND ` + readyFilter(now) +
		` ORDER BY claim_turn, id LIMIT $3` + s.dialect.claimLock
}

// readyFilter is readyAt in a form that is no index condition, so that
// the claim's read of jobs_queued_turn is an ordered scan that stops at
// its n-th ready row. Given readyAt's OR, PostgreSQL's planner (its row
// estimate for the queue often stale) chose a bitmap OR of two index
// scans that read every queued job, then sorted them. The column is
// unqualified: inside turnFor's probes it is the probed row's.
func readyFilter(now string) string { return `(not_before > ` + now + `) IS NOT TRUE` }
