package drill

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// The kept counts. Store migration 0004 keeps, in job_counts, how many jobs
// are in each kind (a status, with failed split by its error and done by
// whether it was adopted from a legacy database) and how many results and
// charges there are, written by triggers in the transaction of each write.
// job_overview, inkwell status, the dashboard and /metrics read them instead
// of counting. A crash must lose a count with its write or neither: at
// every snapshot, the kept counts equal a full count of the rows.

// KeptCountsInvariant names the check in the problems Inspect reports with
// the database's own integrity checks (InvIntegrity).
const KeptCountsInvariant = "the kept counts (job_counts) equal a full count of the rows"

// fullCountsQuery counts every row the way the triggers classify it (the
// migration's job_count_kind). No parameters: one text serves both dialects.
const fullCountsQuery = `SELECT CASE status
        WHEN 'failed' THEN CASE WHEN error LIKE 'provider: provider call: client error:%' THEN 'failed_refused'
                                WHEN error = 'worker restarted' THEN 'failed_restarted'
                                WHEN error LIKE 'provider:%' OR error LIKE 'shutdown:%' THEN 'failed_after_call'
                                ELSE 'failed_other' END
        WHEN 'done' THEN CASE WHEN request_hash = 'legacy' AND lane IS NULL THEN 'done_adopted' ELSE 'done' END
        ELSE status END AS kind, COUNT(*) FROM jobs GROUP BY 1
    UNION ALL SELECT 'results', COUNT(*) FROM results
    UNION ALL SELECT 'charges', COUNT(*) FROM charges`

// fullCountsByClassQuery counts the rows the way migration 0006 (operator
// views by failure class) classifies them: a failed job by its error_class,
// with given-up, pruned and cancelled-while-running apart, and a pruned
// done job apart. Its kinds replace 0004's from that migration on.
const fullCountsByClassQuery = `SELECT CASE status
        WHEN 'failed' THEN CASE WHEN pruned_at IS NOT NULL THEN 'failed_pruned'
                                WHEN gave_up_after IS NOT NULL THEN 'failed_gave_up'
                                WHEN error_class = 'cancelled' AND started_at IS NOT NULL THEN 'failed_cancelled_running'
                                WHEN error_class IN ('not_sent', 'rate_limited', 'provider_error', 'rejected', 'malformed', 'unstorable',
                                                     'timeout', 'worker_restarted', 'shutdown', 'cancelled') THEN 'failed_' || error_class
                                ELSE 'failed_legacy' END
        WHEN 'done' THEN CASE WHEN request_hash = 'legacy' AND lane IS NULL THEN 'done_adopted'
                              WHEN pruned_at IS NOT NULL THEN 'done_pruned'
                              ELSE 'done' END
        ELSE status END AS kind, COUNT(*) FROM jobs GROUP BY 1
    UNION ALL SELECT 'results', COUNT(*) FROM results
    UNION ALL SELECT 'charges', COUNT(*) FROM charges`

// byClassFrom is the schema version from which job_counts keeps its kinds
// by failure class.
const byClassFrom = 6

// keptCountProblems compares, in tx (the snapshot's own transaction, so both
// sides see one state), job_counts summed over its slots with a full count,
// and returns one line per kind that differs, or the reason it could not.
func keptCountProblems(ctx context.Context, tx *sql.Tx) []string {
	kept, err := countsBy(ctx, tx, `SELECT kind, CAST(SUM(n) AS BIGINT) FROM job_counts GROUP BY kind`)
	if err != nil {
		return []string{fmt.Sprintf("%s: not checked: read job_counts: %v", KeptCountsInvariant, err)}
	}
	var version int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		return []string{fmt.Sprintf("%s: not checked: read the schema version: %v", KeptCountsInvariant, err)}
	}
	q := fullCountsQuery
	if version >= byClassFrom {
		q = fullCountsByClassQuery
	}
	full, err := countsBy(ctx, tx, q)
	if err != nil {
		return []string{fmt.Sprintf("%s: not checked: count the rows: %v", KeptCountsInvariant, err)}
	}
	var kinds []string
	for k := range kept {
		kinds = append(kinds, k)
	}
	for k := range full {
		if _, ok := kept[k]; !ok {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	var diffs []string
	for _, k := range kinds {
		if kept[k] != full[k] {
			diffs = append(diffs, fmt.Sprintf("%s %d kept, %d counted", k, kept[k], full[k]))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s: %s", KeptCountsInvariant, strings.Join(diffs, "; "))}
}

func countsBy(ctx context.Context, tx *sql.Tx, q string) (map[string]int64, error) {
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var kind string
		var n int64
		if err := rows.Scan(&kind, &n); err != nil {
			return nil, err
		}
		out[kind] += n
	}
	return out, rows.Err()
}
