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

// keptCountProblems compares, in tx (the snapshot's own transaction, so both
// sides see one state), job_counts summed over its slots with a full count,
// and returns one line per kind that differs, or the reason it could not.
func keptCountProblems(ctx context.Context, tx *sql.Tx) []string {
	kept, err := countsBy(ctx, tx, `SELECT kind, CAST(SUM(n) AS BIGINT) FROM job_counts GROUP BY kind`)
	if err != nil {
		return []string{fmt.Sprintf("%s: not checked: read job_counts: %v", KeptCountsInvariant, err)}
	}
	full, err := countsBy(ctx, tx, fullCountsQuery)
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
