package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_ViewsLinearInFailedJobs: on PostgreSQL,
// job_overview and job_board (0020: an EXISTS over every attempt of a
// failed job, the poison check over non-held-back attempts) grow about
// linearly with the failed jobs: 8x the jobs costs well under 30x the
// time. The plans are logged.
func TestStore_ViewsLinearInFailedJobs(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	s := storetest.MustOpen(t, dsn, store.Options{})
	ctx := t.Context()
	db := s.DB()
	add := func(from, to int) {
		t.Helper()
		for _, q := range []string{
			fmt.Sprintf(`INSERT INTO jobs (account, idempotency_key, request_hash, payload, status, error, error_class, lane, created_at, started_at, finished_at, claim_turn)
				SELECT 'default', 'k' || g, 'h', '{"prompt":"p"}', 'failed', 'provider: provider call: server error: HTTP 500: x', 'provider_error', 'local', now(), now(), now(), g
				FROM generate_series(%d, %d) g`, from, to),
			fmt.Sprintf(`INSERT INTO job_attempts (job_id, attempt_number, status, error, error_class, lane, started_at, finished_at)
				SELECT j.id, n, 'failed', 'x', CASE n WHEN 1 THEN 'timeout' WHEN 2 THEN 'worker_restarted' ELSE 'provider_error' END, 'local', now(), now()
				FROM jobs j CROSS JOIN generate_series(1, 3) n WHERE j.claim_turn BETWEEN %d AND %d`, from, to),
			`ANALYZE`,
		} {
			if _, err := s.WriteDB().ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	timeIt := func(q string) time.Duration {
		best := time.Hour
		for range 3 {
			start := time.Now()
			rows, err := db.QueryContext(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
			}
			rows.Close()
			best = min(best, time.Since(start))
		}
		return best
	}
	const ov, bd = `SELECT * FROM job_overview`, `SELECT * FROM job_board`
	add(1, 1000)
	o1, b1 := timeIt(ov), timeIt(bd)
	add(1001, 8000)
	o8, b8 := timeIt(ov), timeIt(bd)
	t.Logf("job_overview %v -> %v, job_board %v -> %v (1,000 -> 8,000 failed jobs)", o1, o8, b1, b8)
	rows, err := db.QueryContext(ctx, `EXPLAIN ANALYZE `+ov)
	if err == nil {
		var plan []string
		for rows.Next() {
			var l string
			_ = rows.Scan(&l)
			plan = append(plan, l)
		}
		rows.Close()
		t.Logf("job_overview plan:\n%s", strings.Join(plan, "\n"))
	}
	if o8 > 30*o1+50*time.Millisecond {
		t.Errorf("job_overview: %v at 1,000 failed jobs, %v at 8,000: more than linear", o1, o8)
	}
	if b8 > 30*b1+50*time.Millisecond {
		t.Errorf("job_board: %v at 1,000 failed jobs, %v at 8,000: more than linear", b1, b8)
	}
}
