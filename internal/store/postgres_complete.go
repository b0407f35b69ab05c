package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/inkwell/inkwell"
)

// completeSetSQL is the completions of an outcome group as one statement
// (PostgreSQL): every member's writes of completeTx (attempt done, job
// done with its reservation settled, result, charge, the accounts' sums),
// set-based over arrays, so a group costs one round trip and one firing
// of each statement trigger, however many members it has. $1 is the
// store's time (NULL: the database's clock); $2… the members' columns.
// A job is done only where its attempt was: the job CTE joins att. The
// running guards are written "(…) IS TRUE", which implies no partial
// index's predicate, so that the attempts and jobs are found by primary
// key: with "status = 'running'" the generic plan read job_attempts_running_lane
// or jobs_running_since whole, for each group (groupSessionSettings).
var completeSetSQL = `WITH now AS MATERIALIZED (SELECT COALESCE($1::timestamptz, clock_timestamp()) AS t),
	input AS MATERIALIZED (
		SELECT * FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::bigint[], $7::text[],
		                     $8::text[], $9::text[], $10::text[], $11::bigint[], $12::bigint[])
		AS i(job_id, attempt_id, text, account, amount, request_id, response, model, finish, prompt_tokens, completion_tokens)
	),
	att AS (
		UPDATE job_attempts a SET status = 'done', finished_at = (SELECT t FROM now)
		FROM input i WHERE a.id = i.attempt_id AND a.job_id = i.job_id AND (a.status = 'running') IS TRUE
		RETURNING a.job_id
	),
	job AS (
		UPDATE jobs SET status = 'done', error = NULL, finished_at = (SELECT t FROM now), ` + settleOnDone + `
		FROM att WHERE jobs.id = att.job_id AND (jobs.status = 'running') IS TRUE
		RETURNING jobs.id, ` + qualified("jobs", reservationColumns) + `
	),
	res AS (
		INSERT INTO results (job_id, attempt_id, text, created_at, response, model, finish_reason, prompt_tokens, completion_tokens)
		SELECT i.job_id, i.attempt_id, i.text, (SELECT t FROM now), i.response, i.model, i.finish, i.prompt_tokens, i.completion_tokens
		FROM input i JOIN job ON job.id = i.job_id
		RETURNING job_id
	),
	chg AS (
		INSERT INTO charges (job_id, attempt_id, account, amount_micros, provider_request_id, created_at, model, prompt_tokens, completion_tokens)
		SELECT i.job_id, i.attempt_id, i.account, ` + chargedSQL + `, i.request_id, (SELECT t FROM now), i.model, i.prompt_tokens, i.completion_tokens
		FROM input i JOIN job ON job.id = i.job_id
		RETURNING job_id
	),
	sums AS (
		SELECT name, SUM(reserved) AS reserved, SUM(spent) AS spent FROM (
			SELECT job.reservation_account AS name, job.reservation_micros AS reserved, 0 AS spent
			FROM job WHERE job.reservation_state = 'settled'
			UNION ALL
			SELECT i.account, 0, ` + chargedSQL + ` FROM input i JOIN job ON job.id = i.job_id
		) d GROUP BY name
	),
	settle AS (
		UPDATE accounts SET reserved_micros = reserved_micros - sums.reserved, spent_micros = spent_micros + sums.spent
		FROM sums WHERE accounts.name = sums.name AND accounts.budget_micros IS NOT NULL
		RETURNING accounts.name
	)
	SELECT (SELECT COUNT(*) FROM job), (SELECT COUNT(*) FROM res), (SELECT COUNT(*) FROM chg)`

// completeAloneSQL is completeSetSQL as a transaction of its own, for a
// group of completions only: one round trip, no BEGIN or COMMIT. Its first
// CTE takes the row locks of the budgeted accounts the group touches, in
// name order, before any write (lockAccountsTx's rule, budgets.go): input,
// which every write reads first, waits for it. It writes all of the group
// or nothing: when a member was not running (fenced out, already done),
// its last expression fails the statement (a text that is no number),
// everything is rolled back, and the group runs again member by member
// (outcomes.go). The failing CAST reads the counts, so that it is never
// folded, and failed, while the statement is planned.
var completeAloneSQL = replaceOnce(replaceOnce(replaceOnce(completeSetSQL,
	`input AS MATERIALIZED (`, `locked AS MATERIALIZED (`+lockBudgetsSQL("$5", "$2")+`),
	input AS MATERIALIZED (`),
	`completion_tokens)
	),`, `completion_tokens)
		WHERE (SELECT COUNT(*) FROM locked) >= 0
	),`),
	`SELECT (SELECT COUNT(*) FROM job), (SELECT COUNT(*) FROM res), (SELECT COUNT(*) FROM chg)`,
	`SELECT CASE WHEN (SELECT COUNT(*) FROM job) = cardinality($2::bigint[]) AND (SELECT COUNT(*) FROM res) = cardinality($2::bigint[])
	                  AND (SELECT COUNT(*) FROM chg) = cardinality($2::bigint[]) THEN 0
	             ELSE CAST('only ' || (SELECT COUNT(*) FROM job) || ' of the group were running' AS int) END`)

// replaceOnce replaces old, which must appear exactly once in s: a
// statement built from another must not lose a part (the accounts' lock,
// unread, would simply not be taken) when that other one changes.
func replaceOnce(s, old, new string) string {
	if n := strings.Count(s, old); n != 1 {
		panic(fmt.Sprintf("store: %q appears %d times in the statement, want once", old, n))
	}
	return strings.Replace(s, old, new, 1)
}

// completeSetAlone writes the completions cs with completeAloneSQL, hitting
// the crash points before and after its commit, as writeTx does. An error
// wrote nothing.
func (s *Store) completeSetAlone(ctx context.Context, cs []*CompleteParams, before, after string) error {
	var zero int
	hit(before)
	if err := s.gdb.QueryRowContext(ctx, completeAloneSQL, s.completeArgs(cs)...).Scan(&zero); err != nil {
		return fmt.Errorf("complete %d jobs: %w", len(cs), err)
	}
	hit(after)
	return nil
}

// completeSetTx writes the completions cs in tx with completeSetSQL. It
// writes all of them or returns an error: a
// member fenced out, already done or refused fails the statement or its
// counts, and the caller runs the group again member by member
// (outcomes.go), where each gets its own answer.
func (s *Store) completeSetTx(ctx context.Context, tx *sql.Tx, cs []*CompleteParams) error {
	n := len(cs)
	var done, results, charges int64
	if err := tx.QueryRowContext(ctx, completeSetSQL, s.completeArgs(cs)...).Scan(&done, &results, &charges); err != nil {
		return fmt.Errorf("complete %d jobs: %w", n, err)
	}
	if done != int64(n) || results != int64(n) || charges != int64(n) {
		return inkwell.Errorf(inkwell.ECONFLICT, "complete %d jobs: %d were running, %d results and %d charges written", n, done, results, charges)
	}
	return nil
}

// completeArgs is the arguments of completeSetSQL for cs.
func (s *Store) completeArgs(cs []*CompleteParams) []any {
	n := len(cs)
	jobs, attempts, amounts := make([]int64, n), make([]int64, n), make([]int64, n)
	texts, accounts, requests := make([]string, n), make([]string, n), make([]string, n)
	responses, models, finishes := make([]*string, n), make([]*string, n), make([]*string, n)
	prompt, completion := make([]*int64, n), make([]*int64, n)
	for i, p := range cs {
		jobs[i], attempts[i], amounts[i] = p.JobID, p.AttemptID, p.AmountMicros
		texts[i], accounts[i], requests[i] = p.Text, p.Account, p.ProviderRequestID
		response, model, finish, in, out := answerColumns(*p)
		responses[i], models[i], finishes[i] = nullText(response), nullText(model), nullText(finish)
		prompt[i], completion[i] = nullInt(in), nullInt(out)
	}
	return []any{s.clockArg(), jobs, attempts, texts, accounts, amounts, requests,
		responses, models, finishes, prompt, completion}
}

func nullText(v sql.NullString) *string {
	if !v.Valid {
		return nil
	}
	return &v.String
}
