package store

import "sync"

// Fair claims (docs/design.md §10, docs/scaling.md#fair-claims-across-accounts):
// a lane takes queued jobs round robin across the accounts that have ready
// queued work, oldest first within each account, so that one account's
// flood does not starve another's single job.
//
// The turn is a cursor per lane: the account the lane served last. A claim
// of n takes accounts in name order after the cursor, wrapping round to the
// first after the last, and takes one job from each in turn (a round), then
// a second from each, and so on, until it has n: the first n of the order
// (round, account's place after the cursor). The next claim starts after
// the account its last job came from. An account that arrives with one job
// is claimed within one turn: at most as many claims as there are accounts
// with ready queued work.
//
// Both steps are probes of one index, jobs_queued_account (migration 0012:
// queued jobs by account, then id), never a scan of the queue:
//
//   - accounts: "the next account after x with a ready job" is one probe
//     (ORDER BY account LIMIT 1), repeated at most n times after the cursor
//     and, when those are fewer than n, at most n times from the first
//     account up to the cursor (a loose index scan, as PostgreSQL 15 has no
//     skip scan);
//   - jobs: "the next ready job of account a after id i" is one probe,
//     repeated round by round; the walk stops once it has n jobs, so a
//     claim reads about n + k index entries for k ≤ n accounts.
//
// Both are recursive CTEs in one statement. PostgreSQL evaluates a
// recursive CTE only as far as its reader fetches, and locks each job as
// the walk takes it (FOR UPDATE SKIP LOCKED in the probe), so it locks
// only the jobs it claims and skips those another lane is claiming. SQLite
// computes a recursive CTE to its end before its reader sees a row, so its
// walk carries a LIMIT: n jobs and at most one end-of-account row per
// account (k ≤ n); and when the turn found n accounts their first jobs
// are the claim, so the walk takes no second round (which it would
// otherwise probe in full, n probes, before the LIMIT stopped it).
//
// A job waiting out a back-off (not_before) is passed over, in both steps:
// an account whose every queued job waits is not given a turn.

// claimCursor is a lane's place in the round robin: the account it served
// last. It is kept in memory, on the lane's lock: a restarted lane starts
// again from the first account, which costs at most one turn's fairness.
type claimCursor struct {
	mu      sync.Mutex
	account string
}

func (c *claimCursor) get() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.account
}

// advance moves the cursor past a claim that took jobs from these accounts
// (one entry per job), starting after from: to the account of the claim's
// last job in round robin order. That is, of the accounts that gave the
// most jobs (they had a job in the last round), the one furthest after
// from. Account order is byte order, as the index's (SQLite's BINARY
// collation; COLLATE "C" on PostgreSQL).
func (c *claimCursor) advance(from string, accounts []string) {
	if len(accounts) == 0 {
		return
	}
	count := make(map[string]int, len(accounts))
	most := 0
	for _, a := range accounts {
		count[a]++
		most = max(most, count[a])
	}
	last := ""
	first := true
	for a, k := range count {
		if k == most && (first || turnAfter(from, a, last)) {
			last, first = a, false
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.account == from { // a concurrent claim of the same lane moved it already: keep that
		c.account = last
	}
}

// turnAfter reports whether account a comes after b in the turn that
// starts after from: accounts after from first, then those up to it.
func turnAfter(from, a, b string) bool {
	aWrapped, bWrapped := a <= from, b <= from
	if aWrapped != bWrapped {
		return aWrapped
	}
	return a > b
}

// fairPick is the WITH RECURSIVE list that picks a claim's jobs: after and
// before find up to n accounts in turn, each with its oldest ready job;
// walk takes their jobs round by round. Parameters: $3 is n, $4 the lane's
// cursor. now is the statement's time (the back-off guard). The reader
// takes "SELECT id, acct FROM walk WHERE id IS NOT NULL LIMIT $3".
//
// The account probe returns the job, not the account: "the oldest ready
// job of the first account greater than x" (ORDER BY account, id), whose
// row, read by its primary key, names the account (on PostgreSQL the
// probe is a LATERAL row that carries the account from the index, and
// locks the job as it takes it). That job is the account's first of the
// walk; the walk's later rounds probe for the next job after the last.
// before stops once it has the n - k accounts that after (k) left, so a
// claim locks only jobs it claims. On PostgreSQL a claimed job
// leaves a dead entry in the index until VACUUM, and a probe from the
// start of an account steps over all of them: one such probe per account
// per claim, as the oldest-first claim made one for the whole queue.
func (s *Store) fairPick(now string) string {
	acct, ready := s.dialect.claimAccount, readyAt(now)
	// next is the probe "the oldest ready job of the first account with
	// one that is greater than x" (or "not less than x": op). Always a
	// bound, so that the probe is a search of the index on both dialects.
	next := func(op, x string) string {
		return `(SELECT id FROM jobs WHERE status = 'queued' AND ` + acct + ` ` + op + ` ` + x + ` AND ` + readyFilter(now) +
			` ORDER BY ` + acct + `, id LIMIT 1)`
	}
	// job is the probe "the oldest ready job of account a from id i on"
	// (or "after id i": op), locked as it is taken on PostgreSQL.
	job := func(a, op, i string) string {
		return `(SELECT id FROM jobs WHERE status = 'queued' AND ` + acct + ` = ` + a + ` AND id ` + op + ` ` + i + ` AND ` + ready +
			` ORDER BY id LIMIT 1` + s.dialect.claimLock + `)`
	}
	turn := `after (acct, first, pos) AS (
		SELECT ` + acct + `, id, 0 FROM jobs WHERE id = ` + next(">", "$4") + `
		UNION ALL
		SELECT ` + acct + `, jobs.id, after.pos + 1 FROM after JOIN jobs ON jobs.id = ` + next(">", "after.acct") + `
		WHERE after.pos + 1 < $3
	),
	before (acct, first, pos) AS (
		SELECT ` + acct + `, id, CAST($3 AS INTEGER) FROM jobs WHERE id = ` + next(">=", "''") + ` AND (SELECT COUNT(*) FROM after) < $3
		UNION ALL
		SELECT ` + acct + `, jobs.id, before.pos + 1 FROM before JOIN jobs ON jobs.id = ` + next(">", "before.acct") + `
		WHERE before.acct < $4 AND before.pos + 1 < 2 * $3 - (SELECT COUNT(*) FROM after)
	),`
	if s.dialect.claimLateral {
		// The same probes as LATERAL rows (account, id) read from the
		// index alone: no second look-up of the job by its primary key
		// for its account, one per account served.
		probe := func(op, x string) string {
			return `(SELECT ` + acct + ` AS acct, id FROM jobs WHERE status = 'queued' AND ` + acct + ` ` + op + ` ` + x + ` AND ` + readyFilter(now) +
				` ORDER BY ` + acct + `, id LIMIT 1` + s.dialect.claimLock + `) n`
		}
		turn = `after (acct, first, pos) AS (
		SELECT n.acct, n.id, 0 FROM ` + probe(">", "$4") + `
		UNION ALL
		SELECT n.acct, n.id, after.pos + 1 FROM after CROSS JOIN LATERAL ` + probe(">", "after.acct") + `
		WHERE after.pos + 1 < $3
	),
	before (acct, first, pos) AS (
		SELECT n.acct, n.id, CAST($3 AS INTEGER) FROM ` + probe(">=", "''") + ` WHERE (SELECT COUNT(*) FROM after) < $3
		UNION ALL
		SELECT n.acct, n.id, before.pos + 1 FROM before CROSS JOIN LATERAL ` + probe(">", "before.acct") + `
		WHERE before.acct < $4 AND before.pos + 1 < 2 * $3 - (SELECT COUNT(*) FROM after)
	),`
	}
	return turn + `
	accts AS (
		SELECT acct, first, pos FROM (SELECT acct, first, pos FROM after UNION ALL SELECT acct, first, pos FROM before WHERE acct <= $4) turn
		ORDER BY pos LIMIT $3
	),
	walk (acct, pos, r, id) AS (
		SELECT acct, pos, 0, first FROM accts
		UNION ALL
		SELECT acct, pos, r + 1, ` + job("walk.acct", ">", "walk.id") + ` FROM walk WHERE id IS NOT NULL` + s.dialect.claimWalkBound + `
	)`
}

// readyFilter is readyAt in a form that is no index condition: the
// account probe must be an ordered scan of jobs_queued_account that stops
// at its first row. Given readyAt's OR, PostgreSQL's planner (its row
// estimate for the queue often stale) chose a bitmap OR of two index
// scans that read every queued job after the cursor, then sorted them: a
// claim read the queue once per account it served.
func readyFilter(now string) string { return `(not_before > ` + now + `) IS NOT TRUE` }
