package store

// Fair claims (docs/design.md §10, docs/scaling.md#fair-claims-across-accounts):
// lanes take queued jobs round robin across the accounts that have queued
// work, so that one account's flood does not starve another's single job.
//
// The round robin is written into the queue, not walked at claim time.
// Every job has a turn (jobs.claim_turn, migration 0013), given as it
// enters the queue (accept, batch, retry, reschedule: turnFor):
//
//	turn = max(served, the last turn its account was given + 1)
//
// where served is the turn the claims have reached (claim_clock.served,
// migration 0015: the highest turn claimed so far, 0 before any claim),
// and an account's last turn is the highest turn of any of its jobs,
// queued or not. A claim takes the lowest turns, the oldest id first
// within a turn (claimPick): one ordered read of the jobs_queued_turn
// index, as the oldest-first claim read its queued index, where a walk
// across accounts cost one index probe per account served.
//
// So an account's jobs take one turn each, in the order they entered the
// queue, and every account with work has one job in each turn from where
// the claims are: an account that arrives with one job is served in the
// current turn, within one turn of claims (at most as many claims as there
// are accounts with queued work), however long another account's queue;
// an account that sends its next job as soon as its last one is claimed
// gets the turn after it, never the same one again, so it cannot keep
// another account's next turn from coming. A rescheduled or retried job
// enters again behind its account's last turn, as a new one would. This
// is start-time fair queueing with equal weights, served its virtual
// clock: it never goes back, so an account idle for a while, or a queue
// that empties, does not hand a newcomer the turns already served.
//
// The clock is written by the claim, in the claim's own transaction
// (advanceClock, claimClockCTE), and by nothing else. It used to be read
// as the highest turn of any job not queued, from an index that every
// claimed job added an entry to, and that counted a job cancelled while
// queued as served: cancelling a flood put every newcomer behind the
// whole of it. A job cancelled while queued now gives its turn back
// (claim_turn 0, in the cancel's UPDATE): it was never served, so it
// neither moves the clock nor counts as its account's last turn.
//
// A job waiting out a back-off keeps its turn; the claims pass it over
// until its wait ends, and then, its turn behind the others', it is
// claimed first. An account whose several jobs end their back-off at once
// is served that many times in a row: they are the turns it had while it
// waited.
//
// Turns are computed by the writer that enqueues, from committed rows.
// On PostgreSQL two transactions enqueueing for one account at the same
// moment may read the same last turn and share it: that account gets two
// jobs in one turn, once per such collision. And two lanes claiming at the
// same moment do not wait for each other to move the clock: the one that
// finds it locked leaves it (claimClockCTE), so the clock may stay up to
// that claim's turns behind until the next claim, and a job entering
// meanwhile may get a turn that early. Fairness decides when a job runs,
// never whether.

// turnFor is the turn (SQL) a job of account acct enters the queue with;
// acct is an SQL expression of the statement it is part of. One row of
// claim_clock, and one probe of jobs_account_turn for the account's last
// turn, one step from its end: neither reads past anything, however many
// jobs are queued or waiting. The larger of the two is taken with the
// aggregate MAX, which both dialects read alike (SQLite's scalar MAX is
// PostgreSQL's GREATEST).
func turnFor(acct string) string {
	return `(SELECT MAX(t) FROM (
		SELECT served AS t FROM claim_clock
		UNION ALL
		SELECT COALESCE((SELECT q.claim_turn FROM jobs q WHERE q.account = ` + acct + ` ORDER BY q.claim_turn DESC LIMIT 1) + 1, 0)) turns)`
}

// advanceClock moves the clock to turn $1, the highest turn a claim took,
// in the claim's transaction (SQLite's claim: claimTx); it never moves it
// back.
const advanceClock = `UPDATE claim_clock SET served = $1 WHERE id = 1 AND served < $1`

// claimClockCTE is advanceClock inside PostgreSQL's claim statement
// (claimStatementSQL), reading the claimed turns from its CTE job. A lane
// that finds the clock locked by another lane's claim, not yet committed,
// leaves it (SKIP LOCKED) rather than wait: lanes never queue up behind
// one row, and the next claim moves the clock on. The row is locked only
// when the claim moves it: a row lock is a WAL record of its own, and
// with many accounts most claims stay within the turn already reached.
const claimClockCTE = `clock AS (
		UPDATE claim_clock SET served = c.t
		FROM (SELECT MAX(claimed_turn) AS t FROM job) c
		WHERE claim_clock.id = (SELECT id FROM claim_clock WHERE id = 1 AND served < c.t FOR UPDATE SKIP LOCKED)
	)`

// claimPick is the claim's choice (SQL): the ids of up to $3 ready queued
// jobs, lowest turn first, then oldest id; now is the statement's time.
// It reads jobs_queued_turn only, and on PostgreSQL locks each job as it
// takes it, skipping those another lane is claiming.
func (s *Store) claimPick(now string) string {
	return `SELECT id FROM jobs WHERE status = 'queued' AND ` + readyFilter(now) +
		` ORDER BY claim_turn, id LIMIT $3` + s.dialect.claimLock
}

// readyFilter is the claim's guard on a queued job's back-off (never
// before its not_before; now is the statement's time) in a form that is
// no index condition, so that the claim's read of jobs_queued_turn is an
// ordered scan that stops at its n-th ready row. Written as
// "not_before IS NULL OR not_before <= now", PostgreSQL's planner (its
// row estimate for the queue often stale) chose a bitmap OR of two index
// scans that read every queued job, then sorted them.
func readyFilter(now string) string { return `(not_before > ` + now + `) IS NOT TRUE` }
