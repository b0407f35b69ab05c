package store

import (
	"context"
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
	conn, err := s.gdb.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	var plan []string
	err = conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn().PgConn()
		// The simple protocol: the $n belong to the prepared statement.
		results, err := pc.Exec(ctx, "PREPARE inkwell_group_plan AS "+st.SQL+"; EXPLAIN EXECUTE inkwell_group_plan("+st.Args+"); DEALLOCATE inkwell_group_plan").ReadAll()
		if err != nil {
			return err
		}
		for _, r := range results {
			for _, row := range r.Rows {
				plan = append(plan, string(row[0]))
			}
		}
		return nil
	})
	return strings.Join(plan, "\n"), err
}
