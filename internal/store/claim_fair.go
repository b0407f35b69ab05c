package store

// Fair claims: lanes take queued jobs round robin across accounts, by a
// turn each job is given as it enters the queue (turnFor) and a clock only
// claims move (advanceClock). How and why: docs/scaling.md, "How the turns
// are given".

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
