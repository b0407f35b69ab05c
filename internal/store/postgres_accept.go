package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/jackc/pgx/v5/pgtype"
)

// acceptSetSQL stores the new jobs of an accept group in one statement
// (PostgreSQL): $1 the store's time (NULL: the database's clock), $2…$5
// the members' accounts, keys, hashes and payloads, in the group's order;
// $6 admission's limit (0: none) and $7 the members in the statement. It
// inserts only the members that reserve nothing (an account with a budget
// is left out) and only when all of them fit under the limit. A key
// already stored, or twice in the group, is left out by the unique index
// as the row is written (ON CONFLICT), never by a lookup first: the
// statement's plan is made once per connection (openGroupPool), often
// while jobs is nearly empty, and a lookup planned then stays a scan of the
// whole table as it grows (about half of a lone accept's time by 3,000
// jobs). An account's new jobs take its next turns in the group's order
// (turnFor, claim_fair.go); a re-send counted among them leaves its turn
// unused, one turn later for the account's next job. Each account's turn
// is read once (base), before any row is written: read per member, as the
// rows went in, the probe of jobs_account_turn stepped over the entries
// the statement had already written (not yet visible to it), a heap
// fetch each, so a group of n members of one account cost n²/2 of them
// (903 for 42). The caller answers
// every member left out in a transaction of its own (acceptSetTx).
var acceptSetSQL = `WITH i AS MATERIALIZED (
		SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS i(account, key, hash, payload, n)
	),
	base AS MATERIALIZED (
		SELECT d.account, ` + turnFor("d.account") + ` AS turn FROM (SELECT DISTINCT account FROM i) d
	)
	INSERT INTO jobs (account, idempotency_key, request_hash, payload, status, created_at,
		reservation_micros, reservation_account, reservation_state, claim_turn)
	SELECT i.account, i.key, i.hash, i.payload, 'queued', COALESCE($1::timestamptz, clock_timestamp()), 0, NULL, NULL,
		base.turn + ROW_NUMBER() OVER (PARTITION BY i.account ORDER BY i.n) - 1
	FROM i JOIN base ON base.account = i.account
	WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.name = i.account AND a.budget_micros IS NOT NULL)
	  AND ($6::bigint = 0 OR (SELECT COALESCE(SUM(n), 0) FROM job_counts WHERE kind = 'queued') + $7::bigint <= $6::bigint)
	ORDER BY i.n
	ON CONFLICT (account, idempotency_key) DO NOTHING
	RETURNING ` + insertedJobColumns

// lockAndCountSQL is an accept group's first statement (PostgreSQL): the
// row locks of lockBudgetsTx, and admission's count of queued jobs, in one
// round trip.
const lockAndCountSQL = `WITH locked AS (
		SELECT name FROM accounts WHERE name = ANY($1::text[]) AND budget_micros IS NOT NULL ORDER BY name FOR UPDATE
	)
	SELECT COALESCE((SELECT array_agg(name) FROM locked), '{}'), (SELECT COALESCE(SUM(n), 0) FROM job_counts WHERE kind = 'queued')`

// acceptSetTx is an accept group's transaction for the members
// acceptAlone left (a budget, a refusal, a queue near its limit, a
// re-send): the accounts locked and the queue counted in one statement,
// then each member by acceptOne, as on SQLite.
func (s *Store) acceptSetTx(ctx context.Context, tx *sql.Tx, live []*acceptReq, now any, results []acceptRes) error {
	var locked []string
	adm := admission{budgeted: map[string]bool{}, read: true}
	if err := tx.QueryRowContext(ctx, lockAndCountSQL, accountsOf(live)).Scan(pgtype.NewMap().SQLScanner(&locked), &adm.queued); err != nil {
		return fmt.Errorf("accept: lock accounts and count the queue: %w", err)
	}
	for _, name := range locked {
		adm.budgeted[name] = true
	}
	for i, r := range live {
		job, created, err := s.acceptOne(ctx, tx, r.p, now, &adm)
		if err := groupErrFor(r.p, err); err != nil {
			return err
		}
		results[i] = acceptRes{job: job, created: created, err: err}
	}
	return nil
}

// queueLimit is the strictest admission limit among the group's members
// (0: none).
func queueLimit(live []*acceptReq) int {
	limit := 0
	for _, r := range live {
		if r.p.MaxQueued > 0 && (limit == 0 || r.p.MaxQueued < limit) {
			limit = r.p.MaxQueued
		}
	}
	return limit
}

// acceptAlone stores, in one statement that is its own transaction, the
// members of an accept group that need no more (acceptSetSQL: no refusal,
// no budget, room in the queue, a new key), answers them, and returns the
// rest for a transaction (acceptSetTx). One round trip for a group of
// plain requests. A group hits each accept crash point once, as one
// transaction would: before its first write (here, when it tries one) and
// after its first commit that stored a job; hits says which it has hit.
func (s *Store) acceptAlone(ctx context.Context, live []*acceptReq, now any) (rest []*acceptReq, hits acceptHits, err error) {
	fast := make([]bool, len(live))
	n := 0
	for i, r := range live {
		if fast[i] = r.p.Refuse == nil; fast[i] {
			n++
		}
	}
	if n == 0 {
		return live, hits, nil
	}
	hits.before = true
	hit(crashpoint.AcceptBeforeCommit)
	inserted, err := s.insertSet(ctx, live, fast, now, queueLimit(live))
	err = s.classify(err)
	s.noteWrite(err)
	if err != nil {
		return nil, hits, err
	}
	for i, r := range live {
		if inserted[i].ID == 0 {
			rest = append(rest, r)
			continue
		}
		hits.after = true
		r.done <- acceptRes{job: inserted[i], created: true}
	}
	if hits.after {
		hit(crashpoint.AcceptAfterCommit)
	}
	return rest, hits, nil
}

// acceptHits is which accept crash points a group has hit.
type acceptHits struct{ before, after bool }

// points is the crash points the group's transaction still hits.
func (h acceptHits) points() (before, after string) {
	before, after = crashpoint.AcceptBeforeCommit, crashpoint.AcceptAfterCommit
	if h.before {
		before = ""
	}
	if h.after {
		after = ""
	}
	return before, after
}

// insertSet runs acceptSetSQL, a transaction of its own, for the members
// marked fast, under admission's limit (0: none), and returns, per member,
// the job it inserted (zero: none).
func (s *Store) insertSet(ctx context.Context, live []*acceptReq, fast []bool, now any, limit int) ([]inkwell.Job, error) {
	var accounts, keys, hashes, payloads []string
	for i, r := range live {
		if fast[i] {
			accounts, keys = append(accounts, r.p.account()), append(keys, r.p.IdempotencyKey)
			hashes, payloads = append(hashes, r.p.RequestHash), append(payloads, string(r.p.Payload))
		}
	}
	out := make([]inkwell.Job, len(live))
	byKey, err := s.queryInsertSet(ctx, now, accounts, keys, hashes, payloads, limit)
	if err != nil {
		return nil, fmt.Errorf("accept: insert: %w", err)
	}
	for i, r := range live {
		k := setKey{r.p.account(), r.p.IdempotencyKey}
		if job, ok := byKey[k]; ok && fast[i] && job.RequestHash == r.p.RequestHash {
			out[i] = job
			delete(byKey, k)             // the same key twice: the second is a re-send
			out[i].Payload = r.p.Payload // stored as it is (insertedJobColumns)
		}
	}
	return out, nil
}

type setKey struct{ account, key string }

// queryInsertSet runs acceptSetSQL and reads the jobs it stored by key.
func (s *Store) queryInsertSet(ctx context.Context, now any, accounts, keys, hashes, payloads []string, limit int) (map[setKey]inkwell.Job, error) {
	rows, err := s.gdb.QueryContext(ctx, acceptSetSQL, now, accounts, keys, hashes, payloads, limit, len(keys))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byKey := make(map[setKey]inkwell.Job, len(keys))
	for rows.Next() {
		job, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		byKey[setKey{job.Account, job.IdempotencyKey}] = job
	}
	return byKey, rows.Err()
}
