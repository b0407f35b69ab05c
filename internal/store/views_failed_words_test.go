package store_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// failJobThroughClasses accepts a job under key and runs one attempt per
// class, each failed, the job retried between them (held marks an attempt
// given back unsent, held_back). It returns the job's id.
func failJobThroughClasses(t *testing.T, s *store.Store, l *store.LaneLock, key string, classes []inkwell.ErrorClass, held map[int]bool) int64 {
	t.Helper()
	ctx := t.Context()
	j := mustAccept(t, s, acceptParams(key, "poem "+key))
	for i, c := range classes {
		if i > 0 {
			if _, err := s.RetryIfFailed(ctx, j.ID, store.ActorCLI); err != nil {
				t.Fatal(err)
			}
		}
		cs, err := s.ClaimUpTo(ctx, l, 1)
		if err != nil || len(cs) != 1 || cs[0].Job.ID != j.ID {
			t.Fatalf("claim %s: %v %v", key, cs, err)
		}
		msg := map[inkwell.ErrorClass]string{
			inkwell.ClassTimeout:         "provider: provider call: timeout: context deadline exceeded",
			inkwell.ClassProviderError:   "provider: provider call: server error: HTTP 500: oops",
			inkwell.ClassRateLimited:     "provider: provider call: rate limited: HTTP 429: slow",
			inkwell.ClassWorkerRestarted: "worker restarted",
			inkwell.ClassRejected:        "provider: provider call: client error: HTTP 400: bad",
			inkwell.ClassNotSent:         "provider: provider call: connection refused: x",
		}[c]
		if err := s.FailIfRunning(ctx, store.FailParams{JobID: j.ID, AttemptID: cs[0].Attempt.ID, Class: c, Error: msg, HeldBack: held[i]}); err != nil {
			t.Fatal(err)
		}
	}
	return j.ID
}

// TestStore_ViewsFailedWordsAgreeAcrossDialects: for the same rows, the
// words of failed_job_action (migration 0020) on SQLite and PostgreSQL
// match, and job_overview's failed row does not contradict them: a job
// whose attempt 1 timed out and whose attempt 2 met a 5xx is told "check
// the provider's usage first" by failed_job_action (and job_board), but
// job_overview's failed row (inkwell status) once went on to say "1
// provider_error: safe to retry, the provider answered with a server
// error (5xx)" of that same job: the per-class count line counted it by
// its last class alone, which is what 0020 set out to stop. Right
// behaviour: the count line does not call "safe to retry" a job an
// earlier attempt of which may have billed (count those apart, or say
// "check usage" for them).
func TestStore_ViewsFailedWordsAgreeAcrossDialects(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	words := map[string]map[string]string{}
	t.Cleanup(func() {
		sq, pg := words["sqlite"], words["postgres"]
		if sq == nil || pg == nil {
			return
		}
		for k, w := range sq {
			if pg[k] != w {
				t.Errorf("%s: failed_job_action differs:\n sqlite:   %s\n postgres: %s", k, w, pg[k])
			}
		}
	})
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		s := storetest.MustOpen(t, b.DSN, store.Options{})
		ctx := t.Context()
		l, err := s.LockLane(ctx, "local")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		W, P, T, R, H, J := inkwell.ClassWorkerRestarted, inkwell.ClassProviderError, inkwell.ClassTimeout, inkwell.ClassRateLimited, inkwell.ClassRejected, inkwell.ClassNotSent
		cases := map[string]struct {
			classes []inkwell.ErrorClass
			held    map[int]bool
		}{
			"timeout-then-5xx":      {[]inkwell.ErrorClass{T, P}, nil},
			"rejected-then-5xx":     {[]inkwell.ErrorClass{H, P}, nil},
			"timeout-then-notsent":  {[]inkwell.ErrorClass{T, J}, nil},
			"restart-held-restart":  {[]inkwell.ErrorClass{W, R, W}, map[int]bool{1: true}},
			"restart-429-restart":   {[]inkwell.ErrorClass{W, R, W}, nil},
			"5xx-only":              {[]inkwell.ErrorClass{P}, nil},
			"timeout-then-429-held": {[]inkwell.ErrorClass{T, R}, map[int]bool{1: true}},
		}
		ids := map[string]int64{}
		got := map[string]string{}
		for _, k := range []string{"timeout-then-5xx", "rejected-then-5xx", "timeout-then-notsent", "restart-held-restart", "restart-429-restart", "5xx-only", "timeout-then-429-held"} {
			ids[k] = failJobThroughClasses(t, s, l, "failed-"+k, cases[k].classes, cases[k].held)
		}
		for k, id := range ids {
			var w, bw string
			if err := s.DB().QueryRowContext(ctx, `SELECT next_action FROM failed_job_action WHERE id = $1`, id).Scan(&w); err != nil {
				t.Fatal(err)
			}
			if err := s.DB().QueryRowContext(ctx, `SELECT next_action FROM job_board WHERE id = $1`, id).Scan(&bw); err != nil {
				t.Fatal(err)
			}
			if w != bw {
				t.Errorf("%s: job_board %q, failed_job_action %q", k, bw, w)
			}
			got[k] = w // ids are the same on both dialects: the jobs are made in one order
			t.Logf("%s: %s", k, w)
		}
		mu.Lock()
		words[b.Name] = got
		mu.Unlock()
		for _, k := range []string{"timeout-then-5xx", "timeout-then-notsent", "timeout-then-429-held"} {
			if !strings.HasPrefix(got[k], "check the provider's usage first: an earlier attempt (attempt 1, timeout)") {
				t.Errorf("%s: %q; want the earlier timeout told", k, got[k])
			}
		}
		for _, k := range []string{"rejected-then-5xx", "5xx-only"} {
			if !strings.HasPrefix(got[k], "safe to retry") {
				t.Errorf("%s: %q; want safe to retry (no attempt may have billed)", k, got[k])
			}
		}
		if !strings.HasPrefix(got["restart-held-restart"], "possible poison job") {
			t.Errorf("restart-held-restart: %q; want possible poison job", got["restart-held-restart"])
		}
		if strings.HasPrefix(got["restart-429-restart"], "possible poison job") {
			t.Errorf("restart-429-restart (a real 429 between): %q; want not poison", got["restart-429-restart"])
		}
		// job_board lists every failed job once; job_overview's count is COUNT(*).
		var board, all, over int
		if err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM job_board WHERE status = 'failed'`).Scan(&board); err != nil {
			t.Fatal(err)
		}
		if err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM jobs WHERE status = 'failed'`).Scan(&all); err != nil {
			t.Fatal(err)
		}
		var over64 int64
		var action string
		if err := s.DB().QueryRowContext(ctx, `SELECT jobs, next_action FROM job_overview WHERE status = 'failed'`).Scan(&over64, &action); err != nil {
			t.Fatal(err)
		}
		over = int(over64)
		if board != all || over != all {
			t.Errorf("failed: job_board %d, job_overview %d, COUNT(*) %d", board, over, all)
		}
		t.Logf("job_overview failed: %s", action)
		if !strings.Contains(action, "1 possible poison job") {
			t.Errorf("job_overview failed row: %q; want '1 possible poison job' (restart-held-restart)", action)
		}
		// 3 jobs failed provider_error last, and the first of them
		// (timeout-then-5xx) may have been billed by its attempt 1.
		if strings.Contains(action, "provider_error: safe to retry") {
			t.Errorf("job_overview's failed row calls every provider_error job safe to retry (%q), though failed_job_action of job %d says %q; so do not_sent and rate_limited of the jobs timeout-then-notsent and timeout-then-429-held", action, ids["timeout-then-5xx"], got["timeout-then-5xx"])
		}
	})
}
