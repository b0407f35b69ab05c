package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Tests of a job's life without a human (docs/design.md §9): failure classes,
// reschedule, not_before, cancel, admission and the installation id, on
// both dialects.

// TestStore_FailClassTimesPolicy runs every class × honours-keys pair
// through FailIfRunning with a reschedule asked for: the store puts the job
// back to queued only for a class that is RetrySafe under that setting, and
// for any other refuses with EINVALID and writes nothing.
func TestStore_FailClassTimesPolicy(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		l := mustLockLane(t, s, "local")
		for _, honours := range []bool{false, true} {
			for _, class := range inkwell.ErrorClasses {
				key := fmt.Sprintf("%s-%t", class, honours)
				mustAccept(t, s, acceptParams(key, "p"))
				c := claimOne(t, s, l)
				retryAt := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
				err := s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID,
					Error: "boom " + key, Class: class, RetryAt: &retryAt, ProviderHonoursKeys: honours})
				d := mustShow(t, s, c.Job.ID)
				a := d.Attempts[len(d.Attempts)-1]
				if !class.RetrySafe(honours) {
					if inkwell.ErrorCode(err) != inkwell.EINVALID {
						t.Errorf("%s: reschedule of a %s failure: err %v, want EINVALID", key, class, err)
					}
					if d.Job.Status != inkwell.StatusRunning || a.Status != inkwell.StatusRunning || a.ErrorClass != "" {
						t.Errorf("%s: refused reschedule wrote: job %s, attempt %s class %q", key, d.Job.Status, a.Status, a.ErrorClass)
					}
					mustFailClass(t, s, c, "boom "+key, class) // the plain failure is allowed for every class
					d = mustShow(t, s, c.Job.ID)
					if d.Job.Status != inkwell.StatusFailed || d.Job.ErrorClass != class || d.Attempts[0].ErrorClass != class || d.Job.FinishedAt == nil {
						t.Errorf("%s: failed job %+v attempt %+v; want both failed with class %s", key, d.Job, d.Attempts[0], class)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: reschedule: %v", key, err)
				}
				switch {
				case d.Job.Status != inkwell.StatusQueued:
					t.Errorf("%s: job %s, want queued", key, d.Job.Status)
				case d.Job.NotBefore == nil || !d.Job.NotBefore.Equal(retryAt):
					t.Errorf("%s: not_before %v, want %v", key, d.Job.NotBefore, retryAt)
				case d.Job.ErrorClass != class || d.Job.Error != "boom "+key:
					t.Errorf("%s: queued job keeps %q/%q, want the failure it waits out", key, d.Job.ErrorClass, d.Job.Error)
				case d.Job.FinishedAt != nil || d.Job.StartedAt != nil:
					t.Errorf("%s: queued job has started_at %v finished_at %v, want neither", key, d.Job.StartedAt, d.Job.FinishedAt)
				case a.Status != inkwell.StatusFailed || a.ErrorClass != class || a.FinishedAt == nil:
					t.Errorf("%s: attempt %+v, want failed with class %s", key, a, class)
				}
			}
		}
		wantCountsKept(t, s, "after every class and policy")
	})
}

// TestStore_FailRefusesAMissingClass: every failing transition carries a
// class; one without is refused and writes nothing.
func TestStore_FailRefusesAMissingClass(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		mustAccept(t, s, acceptParams("k", "p"))
		c := claimOne(t, s, mustLockLane(t, s, "local"))
		for _, class := range []inkwell.ErrorClass{"", "boom", "Timeout"} {
			err := s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "x", Class: class})
			if inkwell.ErrorCode(err) != inkwell.EINVALID {
				t.Errorf("class %q: err %v, want EINVALID", class, err)
			}
		}
		if d := mustShow(t, s, c.Job.ID); d.Job.Status != inkwell.StatusRunning || d.Attempts[0].Status != inkwell.StatusRunning {
			t.Errorf("refused failures wrote: job %s attempt %s", d.Job.Status, d.Attempts[0].Status)
		}
	})
}

// TestStore_GaveUp: the last attempt's failure says automatic retry gave up.
func TestStore_GaveUp(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		mustAccept(t, s, acceptParams("k", "p"))
		c := claimOne(t, s, mustLockLane(t, s, "local"))
		err := s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID,
			Error: "provider: 502", Class: inkwell.ClassProviderError, GaveUpAfter: 5})
		if err != nil {
			t.Fatal(err)
		}
		d := mustShow(t, s, c.Job.ID)
		if d.Job.Status != inkwell.StatusFailed || d.Job.GaveUpAfter != 5 || d.Job.Error != "gave up after 5 attempts: provider: 502" {
			t.Errorf("job %+v; want failed, gave_up_after 5, error saying so", d.Job)
		}
		if d.Attempts[0].Error != "provider: 502" {
			t.Errorf("attempt error %q, want the failure's own words", d.Attempts[0].Error)
		}
		// A manual retry clears the verdict; the next claim opens attempt 2.
		job := mustRetryJob(t, s, c.Job.ID)
		if job.GaveUpAfter != 0 || job.ErrorClass != "" || job.Error != "" {
			t.Errorf("retried job %+v; want gave_up_after, class and error cleared", job)
		}
	})
}

// TestStore_ClaimWaitsForNotBefore: a rescheduled job is not claimed
// before its not_before, newer jobs go first meanwhile, and once it is due
// it is claimed (oldest first) with its waiting failure cleared.
func TestStore_ClaimWaitsForNotBefore(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		var clock storetest.WallClock
		clock.At(0)
		s := storetest.MustOpen(t, b.DSN, store.Options{NowFunc: clock.Now})
		l := mustLockLane(t, s, "local")
		first := mustAccept(t, s, acceptParams("first", "p"))
		c := claimOne(t, s, l)
		retryAt := clock.Now().Add(time.Minute)
		if err := s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID,
			Error: "provider: 503", Class: inkwell.ClassProviderError, RetryAt: &retryAt}); err != nil {
			t.Fatal(err)
		}
		if got := claimAll(t, s, l); len(got) != 0 {
			t.Fatalf("claimed %v during the back-off, want nothing", got)
		}
		second := mustAccept(t, s, acceptParams("second", "p"))
		if got := claimAll(t, s, l); len(got) != 1 || got[0].Job.ID != second.ID {
			t.Fatalf("claimed %v during the back-off, want only job %d", got, second.ID)
		}
		clock.At(2 * time.Minute)
		got := claimAll(t, s, l)
		if len(got) != 1 || got[0].Job.ID != first.ID || got[0].Attempt.AttemptNumber != 2 {
			t.Fatalf("claimed %v after the back-off, want job %d attempt 2", got, first.ID)
		}
		j := got[0].Job
		if j.NotBefore != nil || j.ErrorClass != "" || j.Error != "" {
			t.Errorf("claimed job keeps not_before %v class %q error %q, want all cleared", j.NotBefore, j.ErrorClass, j.Error)
		}
	})
}

// TestStore_RecoveryNeverRequeues: recovery closes with worker_restarted
// and fails the job; it never puts it back, whatever its class history.
func TestStore_RecoveryNeverRequeues(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		job := mustAccept(t, s, acceptParams("k", "p"))
		for n := 1; n <= 2; n++ {
			l := mustLockLaneNoCleanup(t, s, "local")
			if _, err := s.Recover(t.Context(), l, false); err != nil {
				t.Fatal(err)
			}
			claimOne(t, s, l)
			l.Release() // the lane dies with its attempt running
			l = mustLockLaneNoCleanup(t, s, "local")
			if _, err := s.Recover(t.Context(), l, false); err != nil {
				t.Fatal(err)
			}
			l.Release()
			d := mustShow(t, s, job.ID)
			if d.Job.Status != inkwell.StatusFailed || d.Job.ErrorClass != inkwell.ClassWorkerRestarted || d.Job.NotBefore != nil {
				t.Fatalf("after recovery %d: job %+v; want failed, worker_restarted, no not_before", n, d.Job)
			}
			for _, a := range d.Attempts {
				if a.ErrorClass != inkwell.ClassWorkerRestarted {
					t.Errorf("attempt %d class %q, want worker_restarted", a.AttemptNumber, a.ErrorClass)
				}
			}
			if n == 1 {
				mustRetry(t, s, job.ID)
			}
		}
	})
}

// TestStore_Cancel covers each starting state.
func TestStore_Cancel(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		l := mustLockLane(t, s, "local")
		running := mustAccept(t, s, acceptParams("running", "p"))
		c := claimOne(t, s, l)
		queued := mustAccept(t, s, acceptParams("queued", "p"))

		got, err := s.Cancel(t.Context(), queued.ID, "cli")
		if err != nil || got.Attempt != 0 || got.Job.Status != inkwell.StatusFailed || got.Job.ErrorClass != inkwell.ClassCancelled ||
			got.Job.Error != "cancelled by cli" || got.Job.FinishedAt == nil {
			t.Errorf("cancel queued: %+v, %v; want failed, cancelled, no attempt", got, err)
		}
		if d := mustShow(t, s, queued.ID); len(d.Attempts) != 0 {
			t.Errorf("cancel of a queued job opened attempts: %+v", d.Attempts)
		}

		got, err = s.Cancel(t.Context(), running.ID, "api")
		if err != nil || got.Attempt != c.Attempt.ID || got.Job.ErrorClass != inkwell.ClassCancelled {
			t.Fatalf("cancel running: %+v, %v; want attempt %d closed", got, err, c.Attempt.ID)
		}
		d := mustShow(t, s, running.ID)
		if a := d.Attempts[0]; a.Status != inkwell.StatusFailed || a.ErrorClass != inkwell.ClassCancelled || !strings.Contains(a.Error, "may have billed") {
			t.Errorf("cancelled attempt %+v; want failed, cancelled, saying the provider may have billed", a)
		}
		// The call's completion comes late: fenced out, nothing written.
		if err := s.CompleteIfRunning(t.Context(), completeParams(c)); inkwell.ErrorCode(err) != inkwell.ECONFLICT {
			t.Errorf("completion after cancel: %v, want ECONFLICT", err)
		}
		if d := mustShow(t, s, running.ID); d.Result != nil || d.Charge != nil || d.Job.Status != inkwell.StatusFailed {
			t.Errorf("completion after cancel wrote: %+v", d)
		}

		// A re-sent cancel answers the job as it is.
		again, err := s.Cancel(t.Context(), running.ID, "api")
		if err != nil || again.Attempt != 0 || again.Job.Status != inkwell.StatusFailed {
			t.Errorf("cancel twice: %+v, %v; want the cancelled job, no error", again, err)
		}

		// A done job: the completion won, and the answer says so.
		done := mustAccept(t, s, acceptParams("done", "p"))
		dc := claimOne(t, s, l)
		if err := s.CompleteIfRunning(t.Context(), completeParams(dc)); err != nil {
			t.Fatal(err)
		}
		got, err = s.Cancel(t.Context(), done.ID, "api")
		if inkwell.ErrorCode(err) != inkwell.ECONFLICT || got.Job.Status != inkwell.StatusDone {
			t.Errorf("cancel done: %+v, %v; want ECONFLICT with the done job", got, err)
		}
		if _, err := s.Cancel(t.Context(), 999, "api"); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("cancel unknown: %v, want ENOTFOUND", err)
		}
		// A cancelled job may be retried by an operator, like any failure.
		if j := mustRetryJob(t, s, queued.ID); j.Status != inkwell.StatusQueued || j.ErrorClass != "" {
			t.Errorf("retry of a cancelled job: %+v", j)
		}
		wantCountsKept(t, s, "after cancels")
	})
}

// TestStore_Admission: past MaxQueued a new key is refused and nothing is
// written; a re-send of a stored key is still answered, and a reused key
// with another body is still EKEYREUSED.
func TestStore_Admission(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		limited := func(key, prompt string) store.AcceptParams {
			p := acceptParams(key, prompt)
			p.MaxQueued = 2
			return p
		}
		for _, k := range []string{"a", "b"} {
			if _, created, err := s.Accept(t.Context(), limited(k, "p")); err != nil || !created {
				t.Fatalf("accept %s under the limit: created %t, %v", k, created, err)
			}
		}
		_, _, err := s.Accept(t.Context(), limited("c", "p"))
		if inkwell.ErrorCode(err) != inkwell.ETOOMANY {
			t.Fatalf("accept past the limit: %v, want ETOOMANY", err)
		}
		if n := countRows(t, s, "jobs"); n != 2 {
			t.Errorf("jobs = %d after a refusal, want 2", n)
		}
		job, created, err := s.Accept(t.Context(), limited("a", "p"))
		if err != nil || created || job.IdempotencyKey != "a" {
			t.Errorf("re-send past the limit: %+v created %t %v; want the stored job", job, created, err)
		}
		if _, _, err := s.Accept(t.Context(), limited("a", "other")); inkwell.ErrorCode(err) != inkwell.EKEYREUSED {
			t.Errorf("reused key past the limit: %v, want EKEYREUSED", err)
		}
		// Group commit: of a batch arriving together, only those that fit.
		res := acceptBatch(t, s, limited("d", "p"), limited("e", "p"))
		for _, r := range res {
			if inkwell.ErrorCode(r.Err) != inkwell.ETOOMANY {
				t.Errorf("batched accept past the limit: %+v, want ETOOMANY", r)
			}
		}
		// Claiming one frees a place.
		claimOne(t, s, mustLockLane(t, s, "local"))
		if _, created, err := s.Accept(t.Context(), limited("c", "p")); err != nil || !created {
			t.Errorf("accept after a claim freed a place: created %t, %v", created, err)
		}
		wantCountsKept(t, s, "after admission")
	})
}

// TestStore_Installation: every database has one installation id, written
// once; two databases have different ones, so their provider keys differ.
func TestStore_Installation(t *testing.T) {
	t.Parallel()
	a := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	b := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	ia, err := a.Installation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ib, err := b.Installation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ia.ID) != 32 || ia.ID == ib.ID || ia.KeysFromJob != 1 {
		t.Errorf("installations %+v and %+v; want two different 32-hex ids, keys from job 1", ia, ib)
	}
	if ka, kb := ia.ProviderKey(1, "same"), ib.ProviderKey(1, "same"); ka == kb {
		t.Errorf("two databases send the same provider key %q for job 1 of the same key", ka)
	}
	for _, q := range []string{`UPDATE installation SET id = 'x'`, `DELETE FROM installation`} {
		if _, err := a.DB().ExecContext(context.Background(), q); err == nil {
			t.Errorf("%s succeeded; the installation row is written once", q)
		}
	}
	if again, _ := a.Installation(t.Context()); again != ia {
		t.Errorf("installation changed: %+v, was %+v", again, ia)
	}
}

func claimOne(t *testing.T, s *store.Store, l *store.LaneLock) *store.Claimed {
	t.Helper()
	cs, err := s.ClaimUpTo(t.Context(), l, 1)
	if err != nil || len(cs) != 1 {
		for _, c := range cs {
			t.Logf("claimed job %+v attempt %+v", c.Job, c.Attempt)
		}
		t.Fatalf("ClaimUpTo 1: %v, %v; want one claim", cs, err)
	}
	return cs[0]
}

// claimUnder claims at most one job under l (nil when nothing is queued).
func claimUnder(t *testing.T, s *store.Store, l *store.LaneLock) (*store.Claimed, error) {
	t.Helper()
	cs, err := s.ClaimUpTo(t.Context(), l, 1)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	return cs[0], nil
}

func claimAll(t *testing.T, s *store.Store, l *store.LaneLock) []*store.Claimed {
	t.Helper()
	cs, err := s.ClaimUpTo(t.Context(), l, 100)
	if err != nil {
		t.Fatalf("ClaimUpTo: %v", err)
	}
	return cs
}

func mustFailClass(t *testing.T, s *store.Store, c *store.Claimed, msg string, class inkwell.ErrorClass) {
	t.Helper()
	if err := s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: msg, Class: class}); err != nil {
		t.Fatalf("FailIfRunning job %d (%s): %v", c.Job.ID, class, err)
	}
}

func mustRetryJob(t *testing.T, s *store.Store, id int64) inkwell.Job {
	t.Helper()
	j, err := s.RetryIfFailed(t.Context(), id, store.ActorCLI)
	if err != nil {
		t.Fatalf("RetryIfFailed %d: %v", id, err)
	}
	return j
}

// TestStore_ClaimUpToNeverMoreThanN: a claim of n takes at most n jobs, in
// id order. On PostgreSQL a subquery "IN (SELECT … LIMIT n FOR UPDATE SKIP
// LOCKED)" rescanned by a nested loop took n+1 (found by
// TestStore_Admission); the claim now picks once, in a materialized CTE.
func TestStore_ClaimUpToNeverMoreThanN(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		l := mustLockLane(t, s, "local")
		for i := range 40 {
			mustAccept(t, s, acceptParams(fmt.Sprintf("k%02d", i), "p"))
		}
		next := int64(1)
		for _, n := range []int{1, 2, 1, 3, 5, 1, 8, 4, 16} {
			cs, err := s.ClaimUpTo(t.Context(), l, n)
			if err != nil {
				t.Fatal(err)
			}
			want := min(n, 40-int(next)+1)
			if len(cs) != want {
				t.Fatalf("ClaimUpTo %d took %d jobs, want %d", n, len(cs), want)
			}
			for _, c := range cs {
				if c.Job.ID != next {
					t.Fatalf("ClaimUpTo %d took job %d, want %d (oldest first)", n, c.Job.ID, next)
				}
				next++
			}
		}
	})
}

// TestStore_CancelledJobSaysWhetherACallMayHaveBilled: the board's words
// for a cancelled job rest on every attempt, not on whether it was running
// at the cancel: a job whose earlier attempt timed out (put back by
// automatic retry with honoured keys) and was then cancelled while it
// waited may have been billed, and the board says so; one whose attempts
// only ever billed nothing (a 5xx) says it could not have been.
func TestStore_CancelledJobSaysWhetherACallMayHaveBilled(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		l := mustLockLane(t, s, "local")
		action := func(id int64) string {
			rows, err := s.Board(t.Context(), 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if r.ID == id {
					return r.NextAction
				}
			}
			t.Fatalf("job %d not on the board", id)
			return ""
		}
		for _, tc := range []struct {
			class inkwell.ErrorClass
			want  string
		}{
			{inkwell.ClassTimeout, "nothing to do: cancelled after a call that may have billed it"},
			{inkwell.ClassProviderError, "nothing to do: cancelled before any call that could bill it"},
		} {
			job := mustAccept(t, s, acceptParams(string(tc.class), "p"))
			c := claimOne(t, s, l)
			retryAt := s.Now().Add(time.Hour)
			if err := s.FailIfRunning(t.Context(), store.FailParams{JobID: job.ID, AttemptID: c.Attempt.ID, Error: "x", Class: tc.class,
				RetryAt: &retryAt, ProviderHonoursKeys: true}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Cancel(t.Context(), job.ID, "cli"); err != nil {
				t.Fatal(err)
			}
			if got := action(job.ID); !strings.HasPrefix(got, tc.want) {
				t.Errorf("cancelled while waiting out a %s: %q, want %q…", tc.class, got, tc.want)
			}
		}
	})
}

// TestStore_AdmissionCountsWithinAGroup: admission reads the queue's length
// once per accept group and counts the group's own inserts, so a group
// that arrives with one place left stores one job and refuses the rest.
func TestStore_AdmissionCountsWithinAGroup(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		limited := func(key string) store.AcceptParams {
			p := acceptParams(key, "p")
			p.MaxQueued = 3
			return p
		}
		acceptBatch(t, s, limited("a"), limited("b"))
		res := acceptBatch(t, s, limited("c"), limited("d"), limited("a"))
		if !res[0].Created || inkwell.ErrorCode(res[1].Err) != inkwell.ETOOMANY || res[2].Err != nil || res[2].Created {
			t.Errorf("group with one place left: %+v; want c stored, d refused, a answered as a re-send", res)
		}
		if n := countRows(t, s, "jobs"); n != 3 {
			t.Errorf("jobs = %d, want 3", n)
		}
	})
}
