package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/stdlib"
)

// GroupStatements names the statements the group pool runs
// (openGroupPool), with arguments of one member each, for their plans.
var GroupStatements = map[string]struct {
	SQL  string
	Args string
}{
	"completion": {completeAloneSQL, `NULL, '{1}', '{1}', '{t}', '{a}', '{0}', '{r}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}'`},
	"accept":     {acceptSetSQL, `NULL, '{a}', '{k}', '{h}', '{"{}"}', 0, 1`},
}

// GroupPlan is the plan a connection of the group pool keeps for the
// statement named: prepared there, under the pool's own settings, and
// explained (not run). With plan_cache_mode = force_generic_plan it is
// the plan every later run reuses, made on the tables as they are now.
func GroupPlan(ctx context.Context, s *Store, name string) (string, error) {
	st, ok := GroupStatements[name]
	if !ok {
		return "", fmt.Errorf("no group statement %q", name)
	}
	return groupExplain(ctx, s, st.SQL, "EXPLAIN EXECUTE inkwell_group_plan("+st.Args+")")
}

// AcceptGroupRun is what the accept group's statement did for n new jobs
// of one account: run under EXPLAIN ANALYZE in a transaction rolled back,
// so that nothing stays.
func AcceptGroupRun(ctx context.Context, s *Store, account string, n int) (string, error) {
	list := func(f func(i int) string) string {
		v := make([]string, n)
		for i := range v {
			v[i] = f(i)
		}
		return "'{" + strings.Join(v, ",") + "}'"
	}
	args := strings.Join([]string{"NULL",
		list(func(int) string { return account }),
		list(func(i int) string { return fmt.Sprintf("explain-%d", i) }),
		list(func(int) string { return "h" }),
		list(func(int) string { return `"{}"` }),
		"0", fmt.Sprint(n)}, ", ")
	return groupExplain(ctx, s, acceptSetSQL, "BEGIN; EXPLAIN (ANALYZE, COSTS OFF) EXECUTE inkwell_group_plan("+args+"); ROLLBACK")
}

// groupExplain prepares query on a connection of the group pool, runs
// explain (statements that EXECUTE inkwell_group_plan), and returns the
// lines they answered.
func groupExplain(ctx context.Context, s *Store, query, explain string) (string, error) {
	return simpleScript(ctx, s.gdb, "PREPARE inkwell_group_plan AS "+query+"; "+explain+"; DEALLOCATE inkwell_group_plan")
}

// GroupSetting is a setting's value on a connection of the group pool.
func GroupSetting(ctx context.Context, s *Store, name string) (string, error) {
	return simpleScript(ctx, s.gdb, "SHOW "+name)
}

// simpleScript runs script on one connection of db over the simple
// protocol (the $n in it belong to the statements it prepares) and
// returns the first column of every row it answered, one per line. A
// connection whose script failed is discarded, not pooled again: it may
// still hold the script's prepared statement or transaction.
func simpleScript(ctx context.Context, db *sql.DB, script string) (string, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	var lines []string
	err = conn.Raw(func(dc any) error {
		results, err := dc.(*stdlib.Conn).Conn().PgConn().Exec(ctx, script).ReadAll()
		for _, r := range results {
			err = errors.Join(err, r.Err)
			for _, row := range r.Rows {
				lines = append(lines, string(row[0]))
			}
		}
		if err != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		return nil
	})
	return strings.Join(lines, "\n"), err
}

// KeptStatements names statements that run on the shared pool or in
// outcome groups with a row named by id, with arguments, for the plan
// PostgreSQL keeps for them (KeptPlan).
func KeptStatements(s *Store) map[string]struct{ SQL, Args string } {
	return map[string]struct{ SQL, Args string }{
		"doneJob":          {doneJob, `now(), 1`},
		"failJob":          {failJob, `'e', 'timeout', now(), NULL, 1`},
		"rescheduleJob":    {rescheduleJob, `'e', 'timeout', now(), 1`},
		"closeReservation": {closeReservation, `1, 'settled'`},
		"lockBudgets":      {lockBudgetsSQL("$1", "$2"), `'{a}', '{1,2}'`},
		"endedAmong":       {endedAmong, `'{1,2}'`},
		"claimWebhooks":    {s.claimWebhooksSQL(), `now(), 8, now()`},
		"webhookFailed":    {webhookFailed, `1, 1, 500, 'e', now(), NULL`},
		"prunedUpdate":     {prunedUpdate, `1, '{}', now()`},
	}
}

// KeptPlan is the generic plan of the statement named, as a connection of
// the shared pool keeps it once it has run a statement a few times
// (plan_cache_mode auto), made on the tables as they are now: prepared
// and explained (not run) with plan_cache_mode = force_generic_plan set
// for one transaction, rolled back.
func KeptPlan(ctx context.Context, s *Store, name string) (string, error) {
	st, ok := KeptStatements(s)[name]
	if !ok {
		return "", fmt.Errorf("no kept statement %q", name)
	}
	return simpleScript(ctx, s.db, "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; PREPARE inkwell_kept_plan AS "+st.SQL+
		"; EXPLAIN EXECUTE inkwell_kept_plan("+st.Args+"); DEALLOCATE inkwell_kept_plan; ROLLBACK")
}
