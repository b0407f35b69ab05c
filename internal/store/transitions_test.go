package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Every test here runs through storetest, so each transition is checked on
// SQLite now and on PostgreSQL as soon as that backend exists. Raw SQL is
// written with $N placeholders and goes through rebind.

func TestStore_Accept(t *testing.T) {
	t.Parallel()
	t.Run("New", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			ctx := t.Context()
			p := acceptParams("key-new", "a haiku about ink")
			job, created, err := s.Accept(ctx, p)
			if err != nil {
				t.Fatalf("Accept: %v", err)
			}
			if !created {
				t.Errorf("created = false, want true for a new key")
			}
			if job.ID < 1 || job.Status != inkwell.StatusQueued || job.IdempotencyKey != p.IdempotencyKey || job.RequestHash != p.RequestHash {
				t.Errorf("job = %+v, want a queued job with key %q and hash %q", job, p.IdempotencyKey, p.RequestHash)
			}
			if job.CreatedAt.IsZero() || job.StartedAt != nil || job.FinishedAt != nil || job.Error != "" || job.Lane != "" {
				t.Errorf("job = %+v, want created_at set and no start, finish, error or lane", job)
			}
			var got, want any
			_ = json.Unmarshal(job.Payload, &got)
			_ = json.Unmarshal(p.Payload, &want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("payload mismatch (-want +got):\n%s", diff)
			}
			stored, err := s.Job(ctx, job.ID)
			if err != nil {
				t.Fatalf("Job(%d): %v", job.ID, err)
			}
			if diff := cmp.Diff(job, stored); diff != "" {
				t.Errorf("Accept's job differs from the stored row (-accept +stored):\n%s", diff)
			}
			if n := countRows(t, s, "job_attempts"); n != 0 {
				t.Errorf("job_attempts rows = %d, want 0: accept opens no attempt", n)
			}
		})
	})
	t.Run("ResendSameBodyIsSameJob", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			ctx := t.Context()
			p := acceptParams("key-resend", "same body")
			first, _, err := s.Accept(ctx, p)
			if err != nil {
				t.Fatalf("first Accept: %v", err)
			}
			before := dumpAll(t, s)
			again, created, err := s.Accept(ctx, p)
			if err != nil {
				t.Fatalf("second Accept: %v", err)
			}
			if created {
				t.Errorf("created = true on a re-send, want false")
			}
			if diff := cmp.Diff(first, again); diff != "" {
				t.Errorf("re-send returned another job (-first +again):\n%s", diff)
			}
			assertSameDump(t, before, dumpAll(t, s))
		})
	})
	t.Run("ResendOfClaimedJobReturnsItAsItIs", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			ctx := t.Context()
			p := acceptParams("key-claimed", "body")
			first := mustAccept(t, s, p)
			c := mustClaim(t, s, "local")
			again, created, err := s.Accept(ctx, p)
			if err != nil {
				t.Fatalf("re-send Accept: %v", err)
			}
			if created || again.ID != first.ID || again.Status != inkwell.StatusRunning {
				t.Errorf("re-send = (%+v, created %v), want job %d running, created false", again, created, c.Job.ID)
			}
		})
	})
	t.Run("SameKeyOtherBodyIsRefused", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			ctx := t.Context()
			first := mustAccept(t, s, acceptParams("key-reused", "first body"))
			before := dumpAll(t, s)
			_, created, err := s.Accept(ctx, acceptParams("key-reused", "another body"))
			if got := inkwell.ErrorCode(err); got != inkwell.EKEYREUSED {
				t.Fatalf("Accept with another body: code %q (err %v), want %q", got, err, inkwell.EKEYREUSED)
			}
			if created {
				t.Errorf("created = true on a refusal")
			}
			if !strings.Contains(err.Error(), fmt.Sprint(first.ID)) {
				t.Errorf("error %q does not name the existing job %d", err, first.ID)
			}
			assertSameDump(t, before, dumpAll(t, s))
		})
	})
	t.Run("ConcurrentSameKeyMakesOneJob", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			const n = 50
			p := acceptParams("key-concurrent", "fifty at once")
			var wg sync.WaitGroup
			ids := make([]int64, n)
			created := make([]bool, n)
			errs := make([]error, n)
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					job, c, err := s.Accept(t.Context(), p)
					ids[i], created[i], errs[i] = job.ID, c, err
				})
			}
			close(start)
			wg.Wait()
			nCreated := 0
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("Accept %d: %v", i, errs[i])
				}
				if ids[i] != ids[0] {
					t.Errorf("Accept %d returned job %d, Accept 0 returned %d", i, ids[i], ids[0])
				}
				if created[i] {
					nCreated++
				}
			}
			if nCreated != 1 {
				t.Errorf("created = true %d times, want exactly 1", nCreated)
			}
			if got := countRows(t, s, "jobs"); got != 1 {
				t.Errorf("jobs rows = %d, want 1", got)
			}
		})
	})
	t.Run("ConcurrentMixedKeysEachGetOneJob", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			// Many keys, each sent three times, some with a conflicting
			// body, all at once: batches mix new rows, re-sends and refusals.
			const keys, copies = 20, 3
			var wg sync.WaitGroup
			var mu sync.Mutex
			jobOf := map[string]int64{}
			refused := 0
			for k := range keys {
				for c := range copies {
					wg.Go(func() {
						key := fmt.Sprintf("mixed-%d", k)
						prompt := "body"
						if k%5 == 0 && c == 2 {
							prompt = "other body"
						}
						job, _, err := s.Accept(t.Context(), acceptParams(key, prompt))
						mu.Lock()
						defer mu.Unlock()
						switch {
						case inkwell.ErrorCode(err) == inkwell.EKEYREUSED:
							refused++
						case err != nil:
							t.Errorf("Accept %s: %v", key, err)
						case jobOf[key] != 0 && jobOf[key] != job.ID:
							t.Errorf("key %s answered with jobs %d and %d", key, jobOf[key], job.ID)
						default:
							jobOf[key] = job.ID
						}
					})
				}
			}
			wg.Wait()
			if got := countRows(t, s, "jobs"); got != keys {
				t.Errorf("jobs rows = %d, want %d (one per key)", got, keys)
			}
			// The conflicting copy is refused unless it happened to arrive
			// first, in which case the two others are refused.
			if refused < keys/5 {
				t.Errorf("refusals = %d, want at least %d", refused, keys/5)
			}
		})
	})
}

func TestStore_Claim(t *testing.T) {
	t.Parallel()
	t.Run("EmptyQueueIsNil", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			mustLockLane(t, s, "local")
			c, err := claimAs(t, s, "local")
			if err != nil || c != nil {
				t.Fatalf("Claim on an empty queue = (%+v, %v), want (nil, nil)", c, err)
			}
		})
	})
	t.Run("OldestFirst", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			var want []int64
			for i := range 3 {
				want = append(want, mustAccept(t, s, acceptParams(fmt.Sprintf("k%d", i), "p")).ID)
			}
			var got []int64
			for range want {
				got = append(got, mustClaim(t, s, "local").Job.ID)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("claim order (-want +got):\n%s", diff)
			}
			mustLockLane(t, s, "local")
			if c, err := claimAs(t, s, "local"); c != nil || err != nil {
				t.Errorf("fourth Claim = (%+v, %v), want (nil, nil)", c, err)
			}
		})
	})
	t.Run("WritesJobAndAttempt", func(t *testing.T) {
		t.Parallel()
		storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
			clock := newClock()
			s := storetest.MustOpen(t, b.DSN, store.Options{NowFunc: clock.Now})
			job := mustAccept(t, s, acceptParams("k", "p"))
			clock.Advance(time.Minute)
			c := mustClaim(t, s, "lane-a")
			now := clock.Now()
			if c.Job.ID != job.ID || c.Job.Status != inkwell.StatusRunning || c.Job.Lane != "lane-a" || !timeIs(c.Job.StartedAt, now) {
				t.Errorf("claimed job = %+v, want job %d running on lane-a started %v", c.Job, job.ID, now)
			}
			want := inkwell.Attempt{ID: c.Attempt.ID, JobID: job.ID, AttemptNumber: 1, Status: inkwell.StatusRunning, Lane: "lane-a", StartedAt: &now}
			if diff := cmp.Diff(want, c.Attempt); diff != "" {
				t.Errorf("claimed attempt (-want +got):\n%s", diff)
			}
			d := mustShow(t, s, job.ID)
			if diff := cmp.Diff(c.Job, d.Job); diff != "" {
				t.Errorf("stored job differs from Claim's (-claim +stored):\n%s", diff)
			}
			if diff := cmp.Diff([]inkwell.Attempt{want}, d.Attempts); diff != "" {
				t.Errorf("stored attempts (-want +got):\n%s", diff)
			}
		})
	})
	t.Run("AttemptNumbersGrow", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			job := mustAccept(t, s, acceptParams("k", "p"))
			for n := 1; n <= 3; n++ {
				c := mustClaim(t, s, "local")
				if c.Job.ID != job.ID || c.Attempt.AttemptNumber != n {
					t.Fatalf("claim %d: job %d attempt %d, want job %d attempt %d", n, c.Job.ID, c.Attempt.AttemptNumber, job.ID, n)
				}
				mustFail(t, s, c, "boom")
				mustRetry(t, s, job.ID)
			}
			if got := len(mustShow(t, s, job.ID).Attempts); got != 3 {
				t.Errorf("attempts = %d, want 3", got)
			}
		})
	})
	t.Run("ConcurrentClaimsTakeEachJobOnce", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			const jobs = 20
			for i := range jobs {
				mustAccept(t, s, acceptParams(fmt.Sprintf("k%d", i), "p"))
			}
			var mu sync.Mutex
			seen := map[int64]int{}
			for w := range 4 {
				mustLockLane(t, s, fmt.Sprintf("lane-%d", w))
			}
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					for {
						c, err := claimAs(t, s, fmt.Sprintf("lane-%d", w))
						if err != nil {
							t.Errorf("Claim: %v", err)
							return
						}
						if c == nil {
							return
						}
						mu.Lock()
						seen[c.Job.ID]++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if len(seen) != jobs {
				t.Errorf("claimed %d distinct jobs, want %d", len(seen), jobs)
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("job %d claimed %d times", id, n)
				}
			}
			if got := count(t, s, `SELECT COUNT(*) FROM job_attempts WHERE status = 'running'`); got != jobs {
				t.Errorf("running attempts = %d, want %d", got, jobs)
			}
		})
	})
}

func TestStore_CompleteIfRunning(t *testing.T) {
	t.Parallel()
	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
			clock := newClock()
			s := storetest.MustOpen(t, b.DSN, store.Options{NowFunc: clock.Now})
			mustAccept(t, s, acceptParams("k", "p"))
			c := mustClaim(t, s, "local")
			clock.Advance(3 * time.Second)
			p := completeParams(c)
			if err := s.CompleteIfRunning(t.Context(), p); err != nil {
				t.Fatalf("CompleteIfRunning: %v", err)
			}
			now := clock.Now()
			d := mustShow(t, s, c.Job.ID)
			if d.Job.Status != inkwell.StatusDone || d.Job.Error != "" || !timeIs(d.Job.FinishedAt, now) {
				t.Errorf("job = %+v, want done, no error, finished %v", d.Job, now)
			}
			if len(d.Attempts) != 1 || d.Attempts[0].Status != inkwell.StatusDone || !timeIs(d.Attempts[0].FinishedAt, now) {
				t.Errorf("attempts = %+v, want one done attempt finished %v", d.Attempts, now)
			}
			wantResult := &inkwell.Result{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Text: p.Text, CreatedAt: now}
			if diff := cmp.Diff(wantResult, d.Result); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			wantCharge := &inkwell.Charge{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Account: p.Account, AmountMicros: p.AmountMicros, ProviderRequestID: p.ProviderRequestID, CreatedAt: now}
			if diff := cmp.Diff(wantCharge, d.Charge); diff != "" {
				t.Errorf("charge (-want +got):\n%s", diff)
			}
		})
	})
	t.Run("StaleAttemptIsConflict", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			ctx := t.Context()
			job := mustAccept(t, s, acceptParams("k", "p"))
			first := mustClaim(t, s, "local")
			mustFail(t, s, first, "provider timed out")
			mustRetry(t, s, job.ID)
			second := mustClaim(t, s, "local")
			before := dumpAll(t, s)
			err := s.CompleteIfRunning(ctx, completeParams(first))
			if got := inkwell.ErrorCode(err); got != inkwell.ECONFLICT {
				t.Fatalf("late completion of attempt 1: code %q (err %v), want %q", got, err, inkwell.ECONFLICT)
			}
			assertSameDump(t, before, dumpAll(t, s))
			d := mustShow(t, s, job.ID)
			if d.Result != nil || d.Charge != nil {
				t.Errorf("result %+v, charge %+v after a refused completion, want none", d.Result, d.Charge)
			}
			if d.Job.Status != inkwell.StatusRunning || d.Attempts[0].Status != inkwell.StatusFailed || d.Attempts[1].Status != inkwell.StatusRunning {
				t.Errorf("statuses job %s, attempts %s/%s; want running, failed/running", d.Job.Status, d.Attempts[0].Status, d.Attempts[1].Status)
			}
			// The running attempt still completes.
			if err := s.CompleteIfRunning(ctx, completeParams(second)); err != nil {
				t.Fatalf("completion of attempt 2: %v", err)
			}
		})
	})
	t.Run("AfterRecoveryIsConflict", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			mustAccept(t, s, acceptParams("k", "p"))
			c := mustClaim(t, s, "local")
			lock := mustLockLane(t, s, "local")
			if _, err := s.Recover(t.Context(), lock, false); err != nil {
				t.Fatalf("Recover: %v", err)
			}
			before := dumpAll(t, s)
			err := s.CompleteIfRunning(t.Context(), completeParams(c))
			if got := inkwell.ErrorCode(err); got != inkwell.ECONFLICT {
				t.Fatalf("completion after recovery: code %q (err %v), want %q", got, err, inkwell.ECONFLICT)
			}
			if errors.Is(err, store.ErrAlreadyDone) {
				t.Errorf("a fenced-out completion reads as already done: %v", err)
			}
			assertSameDump(t, before, dumpAll(t, s))
		})
	})
	t.Run("TwiceIsConflict", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			mustAccept(t, s, acceptParams("k", "p"))
			c := mustClaim(t, s, "local")
			if err := s.CompleteIfRunning(t.Context(), completeParams(c)); err != nil {
				t.Fatalf("first completion: %v", err)
			}
			before := dumpAll(t, s)
			err := s.CompleteIfRunning(t.Context(), completeParams(c))
			if got := inkwell.ErrorCode(err); got != inkwell.ECONFLICT {
				t.Fatalf("second completion: code %q (err %v), want %q", got, err, inkwell.ECONFLICT)
			}
			// The same attempt, already done: the answer says so itself.
			if !errors.Is(err, store.ErrAlreadyDone) {
				t.Errorf("second completion of the same attempt: %v, want store.ErrAlreadyDone", err)
			}
			assertSameDump(t, before, dumpAll(t, s))
		})
	})
	t.Run("AttemptOfAnotherJobIsConflict", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			mustAccept(t, s, acceptParams("k1", "p"))
			mustAccept(t, s, acceptParams("k2", "p"))
			a := mustClaim(t, s, "local")
			b := mustClaim(t, s, "local")
			before := dumpAll(t, s)
			p := completeParams(a)
			p.JobID = b.Job.ID
			err := s.CompleteIfRunning(t.Context(), p)
			if got := inkwell.ErrorCode(err); got != inkwell.ECONFLICT {
				t.Fatalf("completion of job %d with job %d's attempt: code %q (err %v), want %q", b.Job.ID, a.Job.ID, got, err, inkwell.ECONFLICT)
			}
			assertSameDump(t, before, dumpAll(t, s))
		})
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			err := s.CompleteIfRunning(t.Context(), store.CompleteParams{JobID: 99, AttemptID: 99, Text: "x", Account: "a", ProviderRequestID: "r"})
			if got := inkwell.ErrorCode(err); got != inkwell.ECONFLICT {
				t.Fatalf("completion of no job: code %q (err %v), want %q", got, err, inkwell.ECONFLICT)
			}
			if n := countRows(t, s, "results") + countRows(t, s, "charges"); n != 0 {
				t.Errorf("results+charges = %d, want 0", n)
			}
		})
	})
}

func TestStore_FailIfRunning(t *testing.T) {
	t.Parallel()
	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
			clock := newClock()
			s := storetest.MustOpen(t, b.DSN, store.Options{NowFunc: clock.Now})
			mustAccept(t, s, acceptParams("k", "p"))
			c := mustClaim(t, s, "local")
			clock.Advance(time.Second)
			if err := s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "provider: 500", Class: inkwell.ClassProviderError}); err != nil {
				t.Fatalf("FailIfRunning: %v", err)
			}
			now := clock.Now()
			d := mustShow(t, s, c.Job.ID)
			if d.Job.Status != inkwell.StatusFailed || d.Job.Error != "provider: 500" || !timeIs(d.Job.FinishedAt, now) {
				t.Errorf("job = %+v, want failed with the error, finished %v", d.Job, now)
			}
			a := d.Attempts[0]
			if len(d.Attempts) != 1 || a.Status != inkwell.StatusFailed || a.Error != "provider: 500" || !timeIs(a.FinishedAt, now) || a.RecoveryRunID != nil {
				t.Errorf("attempts = %+v, want one failed attempt with the error, finished %v", d.Attempts, now)
			}
			if d.Result != nil || d.Charge != nil {
				t.Errorf("a failed job has result %+v, charge %+v", d.Result, d.Charge)
			}
		})
	})
	t.Run("EmptyErrorStillSaysSomething", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			mustAccept(t, s, acceptParams("k", "p"))
			c := mustClaim(t, s, "local")
			mustFail(t, s, c, "")
			d := mustShow(t, s, c.Job.ID)
			if d.Job.Error == "" || d.Attempts[0].Error == "" {
				t.Errorf("job error %q, attempt error %q; a failed row must carry an error", d.Job.Error, d.Attempts[0].Error)
			}
		})
	})
	t.Run("StaleAttemptIsConflict", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			job := mustAccept(t, s, acceptParams("k", "p"))
			first := mustClaim(t, s, "local")
			mustFail(t, s, first, "one")
			mustRetry(t, s, job.ID)
			mustClaim(t, s, "local")
			before := dumpAll(t, s)
			err := s.FailIfRunning(t.Context(), store.FailParams{JobID: job.ID, AttemptID: first.Attempt.ID, Error: "late", Class: inkwell.ClassProviderError})
			if got := inkwell.ErrorCode(err); got != inkwell.ECONFLICT {
				t.Fatalf("late failure of attempt 1: code %q (err %v), want %q", got, err, inkwell.ECONFLICT)
			}
			assertSameDump(t, before, dumpAll(t, s))
		})
	})
	t.Run("DoneJobIsConflict", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			mustAccept(t, s, acceptParams("k", "p"))
			c := mustClaim(t, s, "local")
			if err := s.CompleteIfRunning(t.Context(), completeParams(c)); err != nil {
				t.Fatal(err)
			}
			before := dumpAll(t, s)
			err := s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "late", Class: inkwell.ClassProviderError})
			if got := inkwell.ErrorCode(err); got != inkwell.ECONFLICT {
				t.Fatalf("failure of a done job: code %q (err %v), want %q", got, err, inkwell.ECONFLICT)
			}
			assertSameDump(t, before, dumpAll(t, s))
		})
	})
}

func TestStore_RetryIfFailed(t *testing.T) {
	t.Parallel()
	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			job := mustAccept(t, s, acceptParams("k", "p"))
			c := mustClaim(t, s, "local")
			mustFail(t, s, c, "boom")
			attempts := mustShow(t, s, job.ID).Attempts
			got, err := s.RetryIfFailed(t.Context(), job.ID, store.ActorCLI)
			if err != nil {
				t.Fatalf("RetryIfFailed: %v", err)
			}
			if got.ID != job.ID || got.Status != inkwell.StatusQueued || got.Error != "" || got.FinishedAt != nil {
				t.Errorf("retried job = %+v, want queued with no error or finish", got)
			}
			d := mustShow(t, s, job.ID)
			if diff := cmp.Diff(got, d.Job); diff != "" {
				t.Errorf("returned job differs from stored (-returned +stored):\n%s", diff)
			}
			if diff := cmp.Diff(attempts, d.Attempts); diff != "" {
				t.Errorf("retry touched the attempts (-before +after):\n%s", diff)
			}
			next := mustClaim(t, s, "local")
			if next.Job.ID != job.ID || next.Attempt.AttemptNumber != 2 {
				t.Errorf("claim after retry: job %d attempt %d, want job %d attempt 2", next.Job.ID, next.Attempt.AttemptNumber, job.ID)
			}
		})
	})
	t.Run("NotFailedIsConflict", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			done := mustAccept(t, s, acceptParams("done", "p"))
			running := mustAccept(t, s, acceptParams("running", "p"))
			queued := mustAccept(t, s, acceptParams("queued", "p"))
			if err := s.CompleteIfRunning(t.Context(), completeParams(mustClaim(t, s, "local"))); err != nil {
				t.Fatalf("complete job %d: %v", done.ID, err)
			}
			if c := mustClaim(t, s, "local"); c.Job.ID != running.ID {
				t.Fatalf("claimed job %d, want %d", c.Job.ID, running.ID)
			}
			before := dumpAll(t, s)
			for _, id := range []int64{queued.ID, running.ID, done.ID} {
				_, err := s.RetryIfFailed(t.Context(), id, store.ActorCLI)
				if got := inkwell.ErrorCode(err); got != inkwell.ECONFLICT {
					st := mustShow(t, s, id).Job.Status
					t.Errorf("retry of a %s job: code %q (err %v), want %q", st, got, err, inkwell.ECONFLICT)
				}
			}
			assertSameDump(t, before, dumpAll(t, s))
		})
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			_, err := s.RetryIfFailed(t.Context(), 12345, store.ActorCLI)
			if got := inkwell.ErrorCode(err); got != inkwell.ENOTFOUND {
				t.Fatalf("retry of no job: code %q (err %v), want %q", got, err, inkwell.ENOTFOUND)
			}
		})
	})
}

func TestStore_AttemptHistoryIsAppendOnly(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		job := mustAccept(t, s, acceptParams("k", "p"))
		c := mustClaim(t, s, "local")
		mustFail(t, s, c, "boom")
		mustRetry(t, s, job.ID)
		running := mustClaim(t, s, "local")
		before := dumpAll(t, s)
		refused := []struct {
			name  string
			query string
			args  []any
		}{
			{"UpdateFinishedError", `UPDATE job_attempts SET error = 'rewritten' WHERE id = $1`, []any{c.Attempt.ID}},
			{"UpdateFinishedStatus", `UPDATE job_attempts SET status = 'running' WHERE id = $1`, []any{c.Attempt.ID}},
			{"RenumberRunning", `UPDATE job_attempts SET attempt_number = 7 WHERE id = $1`, []any{running.Attempt.ID}},
			{"MoveRunningToAnotherJob", `UPDATE job_attempts SET job_id = $1 WHERE id = $2`, []any{job.ID + 1, running.Attempt.ID}},
			{"DeleteFinished", `DELETE FROM job_attempts WHERE id = $1`, []any{c.Attempt.ID}},
			{"DeleteRunning", `DELETE FROM job_attempts WHERE id = $1`, []any{running.Attempt.ID}},
			{"ReuseNumber", `INSERT INTO job_attempts (job_id, attempt_number, status, lane) VALUES ($1, 1, 'failed', 'x')`, []any{job.ID}},
			{"SecondRunning", `INSERT INTO job_attempts (job_id, attempt_number, status, lane) VALUES ($1, 3, 'running', 'x')`, []any{job.ID}},
		}
		for _, tc := range refused {
			if _, err := s.DB().ExecContext(t.Context(), rebind(s, tc.query), tc.args...); err == nil {
				t.Errorf("%s: %s succeeded, want the schema to refuse it", tc.name, tc.query)
			}
		}
		assertSameDump(t, before, dumpAll(t, s))
	})
}

// --- helpers shared by the store tests ---

func acceptParams(key, prompt string) store.AcceptParams {
	payload, _ := json.Marshal(inkwell.Request{Prompt: prompt, Account: inkwell.DefaultAccount, MaxWords: inkwell.DefaultMaxWords})
	return store.AcceptParams{IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload}
}

func completeParams(c *store.Claimed) store.CompleteParams {
	return store.CompleteParams{
		JobID: c.Job.ID, AttemptID: c.Attempt.ID,
		Text: fmt.Sprintf("text of job %d", c.Job.ID), Account: "acct-1",
		AmountMicros: 1234, ProviderRequestID: fmt.Sprintf("req-%d-%d", c.Job.ID, c.Attempt.ID),
	}
}

func mustAccept(t *testing.T, s *store.Store, p store.AcceptParams) inkwell.Job {
	t.Helper()
	job, _, err := s.Accept(t.Context(), p)
	if err != nil {
		t.Fatalf("Accept %s: %v", p.IdempotencyKey, err)
	}
	return job
}

// mustClaim claims the oldest queued job for lane. Under the lane's lock
// when this test holds it (mustLockLane); otherwise as a lane that then
// goes away: it takes the lock for the claim and lets go after, leaving the
// attempt running as a dead lane leaves it.
func mustClaim(t *testing.T, s *store.Store, lane string) *store.Claimed {
	t.Helper()
	c, err := claimAs(t, s, lane)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if c == nil {
		t.Fatalf("claim: nothing queued, want a job")
	}
	return c
}

// claimAs claims at most one job for lane (nil when nothing is queued),
// under the lock this test holds for lane, or under one taken for the
// claim alone.
func claimAs(t *testing.T, s *store.Store, lane string) (*store.Claimed, error) {
	t.Helper()
	l, held := heldLocks.Load(heldKey{s, lane})
	if !held {
		fresh, err := s.LockLane(t.Context(), lane)
		if err != nil {
			t.Fatalf("LockLane %s for a claim: %v", lane, err)
		}
		defer fresh.Release()
		l = fresh
	}
	return claimUnder(t, s, l.(*store.LaneLock))
}

// heldLocks are the lane locks the running tests hold (mustLockLane), by
// store and lane, so that mustClaim claims under them.
var heldLocks sync.Map

type heldKey struct {
	s    *store.Store
	lane string
}

func mustFail(t *testing.T, s *store.Store, c *store.Claimed, msg string) {
	t.Helper()
	if err := s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: msg, Class: inkwell.ClassProviderError}); err != nil {
		t.Fatalf("FailIfRunning job %d: %v", c.Job.ID, err)
	}
}

func mustRetry(t *testing.T, s *store.Store, id int64) {
	t.Helper()
	if _, err := s.RetryIfFailed(t.Context(), id, store.ActorCLI); err != nil {
		t.Fatalf("RetryIfFailed %d: %v", id, err)
	}
}

func mustShow(t *testing.T, s *store.Store, id int64) inkwell.JobDetail {
	t.Helper()
	d, err := s.Show(t.Context(), id)
	if err != nil {
		t.Fatalf("Show %d: %v", id, err)
	}
	return d
}

func mustLockLane(t *testing.T, s *store.Store, lane string) *store.LaneLock {
	t.Helper()
	l, err := s.LockLane(t.Context(), lane)
	if err != nil {
		t.Fatalf("LockLane %s: %v", lane, err)
	}
	heldLocks.Store(heldKey{s, lane}, l)
	t.Cleanup(func() {
		heldLocks.Delete(heldKey{s, lane})
		l.Release()
	})
	return l
}

// rebind turns $N placeholders into the store's dialect, as the store does.
func rebind(s *store.Store, q string) string {
	if s.Dialect() == "sqlite" {
		return strings.ReplaceAll(q, "$", "?")
	}
	return q
}

// tsArg is a time as the store's dialect stores it.
func tsArg(s *store.Store, t time.Time) any {
	if s.Dialect() == "sqlite" {
		return t.UTC().Format(store.TimeLayout)
	}
	return t.UTC()
}

func mustExec(t *testing.T, s *store.Store, q string, args ...any) {
	t.Helper()
	if _, err := s.DB().ExecContext(context.Background(), rebind(s, q), args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func count(t *testing.T, s *store.Store, q string, args ...any) int {
	t.Helper()
	var n int
	if err := s.DB().QueryRowContext(context.Background(), rebind(s, q), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func countRows(t *testing.T, s *store.Store, table string) int {
	t.Helper()
	return count(t, s, `SELECT COUNT(*) FROM `+table)
}

// dumpTables are the tables whose every row a test compares.
var dumpTables = []string{"jobs", "job_attempts", "results", "charges", "lanes", "recovery_runs", "audit_log"}

// dump is every row of each table, every column as text (NULL as "<nil>").
type dump map[string][][]string

func dumpAll(t *testing.T, s *store.Store) dump {
	t.Helper()
	return dumpOf(t, s.DB(), dumpTables...)
}

func dumpOf(t *testing.T, db *sql.DB, tables ...string) dump {
	t.Helper()
	d := dump{}
	for _, table := range tables {
		rows, err := db.QueryContext(context.Background(), `SELECT * FROM `+table+` ORDER BY 1`)
		if err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		d[table] = [][]string{}
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("dump %s: %v", table, err)
			}
			// Each cell names its column, and a NULL one is left out: a
			// value that changes, appears or goes shows, and a column a
			// later migration adds (NULL in old rows) does not.
			row := make([]string, 0, len(cols))
			for i, v := range vals {
				if v.Valid {
					row = append(row, cols[i]+"="+v.String)
				}
			}
			d[table] = append(d[table], row)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		rows.Close()
	}
	return d
}

func assertSameDump(t *testing.T, before, after dump) {
	t.Helper()
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("database changed (-before +after):\n%s", diff)
	}
}

// clock is an injected NowFunc that moves only when told; its times have
// microsecond precision, as both dialects store them.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock {
	return &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func timeIs(got *time.Time, want time.Time) bool {
	return got != nil && got.Equal(want)
}
