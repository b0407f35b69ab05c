package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Tests of retention's prune (docs/design.md §9, the prune row of §2), on both
// dialects: what it removes and what it keeps, dry runs, batches,
// idempotence, re-sends and retries of a pruned job, and on SQLite the
// file's size.

// pruneFixture is a store on an injected clock with a lane to claim on.
type pruneFixture struct {
	t     *testing.T
	s     *store.Store
	clock *clock
	lane  *store.LaneLock
}

func runPrune(t *testing.T, fn func(f *pruneFixture)) {
	t.Helper()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		c := newClock()
		s := storetest.MustOpen(t, b.DSN, store.Options{NowFunc: c.Now})
		fn(&pruneFixture{t: t, s: s, clock: c, lane: mustLockLane(t, s, "local")})
	})
}

// finished accepts a job and runs it to done (or failed) at the clock's time.
func (f *pruneFixture) finished(key string, done bool) inkwell.Job {
	f.t.Helper()
	mustAccept(f.t, f.s, acceptParams(key, "the prompt of "+key))
	c := claimOne(f.t, f.s, f.lane)
	if done {
		if err := f.s.CompleteIfRunning(f.t.Context(), completeParams(c)); err != nil {
			f.t.Fatalf("complete %s: %v", key, err)
		}
	} else {
		mustFailClass(f.t, f.s, c, "provider: provider call: client error: 400 no", inkwell.ClassRejected)
	}
	return mustShow(f.t, f.s, c.Job.ID).Job
}

// masked is dumpAll without the columns prune writes.
// masked leaves out audit_log, which a prune adds to (one row per job:
// TestStore_AuditLog).
func masked(d dump) dump {
	out := dump{}
	for table, rows := range d {
		if table == "audit_log" {
			continue
		}
		out[table] = [][]string{}
		for _, row := range rows {
			var keep []string
			for _, v := range row {
				if table == "jobs" && (strings.HasPrefix(v, "payload=") || strings.HasPrefix(v, "pruned_at=") || v == "<nil>") ||
					table == "results" && strings.HasPrefix(v, "text=") {
					continue
				}
				keep = append(keep, v)
			}
			out[table] = append(out[table], keep)
		}
	}
	return out
}

func mustPrune(t *testing.T, s *store.Store, before time.Time, opts store.PruneOptions) store.PruneReport {
	t.Helper()
	rep, err := s.Prune(t.Context(), before, opts)
	if err != nil {
		t.Fatalf("Prune(%s): %v", before, err)
	}
	return rep
}

func assertIntact(t *testing.T, s *store.Store) {
	t.Helper()
	tx, err := s.BeginSnapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	problems, err := s.Integrity(t.Context(), tx)
	if err != nil || len(problems) > 0 {
		t.Errorf("integrity: %v %v", problems, err)
	}
	if s.Dialect() == "sqlite" {
		if n := count(t, s, `SELECT COUNT(*) FROM pragma_foreign_key_check`); n != 0 {
			t.Errorf("foreign_key_check: %d rows point nowhere", n)
		}
	}
}

// TestStore_Prune: old done and failed jobs lose their prompt and text and
// get pruned_at; nothing else changes, in any table, and the kept counts
// (job_counts, which count pruned jobs apart) stay right. Newer and unfinished jobs are untouched. A second run finds
// nothing; a re-send of a pruned key is answered with the pruned job and
// queues nothing; a retry of a pruned failed job is refused and says why.
func TestStore_Prune(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		oldDone := f.finished("old-done", true)
		oldFailed := f.finished("old-failed", false)
		f.clock.Advance(48 * time.Hour)
		newDone := f.finished("new-done", true)
		queued := mustAccept(t, s, acceptParams("queued", "still waiting"))
		cutoff := f.clock.Now().Add(-24 * time.Hour)

		before := dumpAll(t, s)
		details := map[int64]inkwell.JobDetail{}
		for _, id := range []int64{oldDone.ID, oldFailed.ID, newDone.ID, queued.ID} {
			details[id] = mustShow(t, s, id)
		}
		f.clock.Advance(time.Minute)
		rep := mustPrune(t, s, cutoff, store.PruneOptions{})
		if rep.Matched != 2 || rep.Pruned != 2 || rep.PrunedDone != 1 || rep.PrunedFailed != 1 || rep.Batches != 1 {
			t.Errorf("report %+v, want 2 matched and pruned (1 done, 1 failed) in 1 batch", rep)
		}
		assertSameDump(t, masked(before), masked(dumpAll(t, s)))
		wantCountsKept(t, s, "after prune")
		assertIntact(t, s)

		prunedAt := f.clock.Now()
		for _, id := range []int64{oldDone.ID, oldFailed.ID} {
			want := details[id]
			want.Job.Payload = []byte(`{"account":"default","max_words":50}`)
			want.Job.PrunedAt = &prunedAt
			if want.Result != nil {
				want.Result.Text = ""
			}
			if diff := cmp.Diff(want, mustShow(t, s, id)); diff != "" {
				t.Errorf("pruned job %d (-want +got):\n%s", id, diff)
			}
		}
		for _, id := range []int64{newDone.ID, queued.ID} {
			if diff := cmp.Diff(details[id], mustShow(t, s, id)); diff != "" {
				t.Errorf("job %d, not to be pruned, changed (-before +after):\n%s", id, diff)
			}
		}

		// Idempotent: nothing left to take.
		mid := dumpAll(t, s)
		if rep := mustPrune(t, s, f.clock.Now().Add(-24*time.Hour), store.PruneOptions{}); rep.Matched != 0 || rep.Pruned != 0 {
			t.Errorf("second prune: %+v, want nothing", rep)
		}
		assertSameDump(t, mid, dumpAll(t, s))

		// A re-send of a pruned key: the same job, pruned, nothing queued.
		for _, j := range []inkwell.Job{oldDone, oldFailed} {
			got, created, err := s.Accept(t.Context(), acceptParams(j.IdempotencyKey, "the prompt of "+j.IdempotencyKey))
			if err != nil || created || got.ID != j.ID || got.PrunedAt == nil || got.Status != j.Status {
				t.Errorf("re-send of pruned %s: job %+v created %t err %v; want the pruned job, not created", j.IdempotencyKey, got, created, err)
			}
		}
		assertSameDump(t, mid, dumpAll(t, s))

		// Retry of a pruned failed job: refused, nothing written.
		_, err := s.RetryIfFailed(t.Context(), oldFailed.ID, store.ActorCLI)
		if inkwell.ErrorCode(err) != inkwell.ECONFLICT || !strings.Contains(err.Error(), "pruned") {
			t.Errorf("retry of a pruned failed job: %v, want ECONFLICT saying it was pruned", err)
		}
		assertSameDump(t, mid, dumpAll(t, s))
	})
}

// TestStore_PruneDryRun counts by status and writes nothing.
func TestStore_PruneDryRun(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		f.finished("d1", true)
		f.finished("d2", true)
		f.finished("f1", false)
		f.clock.Advance(time.Hour)
		before := dumpAll(t, s)
		rep := mustPrune(t, s, f.clock.Now(), store.PruneOptions{DryRun: true})
		if !rep.DryRun || rep.Matched != 3 || rep.MatchedDone != 2 || rep.MatchedFailed != 1 || rep.Pruned != 0 || rep.Batches != 0 {
			t.Errorf("dry run report %+v, want 3 matched (2 done, 1 failed), none pruned", rep)
		}
		assertSameDump(t, before, dumpAll(t, s))
	})
}

// TestStore_PruneBatches: many jobs go in many small transactions, with
// progress along the way, and every one ends pruned.
func TestStore_PruneBatches(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		const jobs = 45
		for i := range jobs {
			f.finished(fmt.Sprintf("job-%d", i), i%5 != 0)
		}
		f.clock.Advance(time.Hour)
		var calls []store.PruneProgress
		rep := mustPrune(t, s, f.clock.Now(), store.PruneOptions{MaxBatch: 10, Pause: -1, ProgressEvery: time.Nanosecond,
			Progress: func(p store.PruneProgress) { calls = append(calls, p) }})
		if rep.Pruned != jobs || rep.PrunedFailed != 9 || rep.Batches < 5 {
			t.Errorf("report %+v, want %d pruned (9 failed) in at least 5 batches of at most 10", rep, jobs)
		}
		if len(calls) < 5 || calls[len(calls)-1].Pruned != jobs || calls[len(calls)-1].Matched != jobs {
			t.Errorf("progress %+v, want one call per batch and a last one at %d of %d", calls, jobs, jobs)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM jobs WHERE pruned_at IS NULL`); n != 0 {
			t.Errorf("%d jobs left unpruned", n)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM results WHERE text <> ''`); n != 0 {
			t.Errorf("%d results kept their text", n)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM jobs WHERE payload LIKE '%prompt%'`); n != 0 {
			t.Errorf("%d payloads kept their prompt", n)
		}
		wantCountsKept(t, s, "after batches")
		assertIntact(t, s)
	})
}

// TestStore_PruneCancelled: a prune whose context ends stops between
// batches; what it pruned is whole, and a later run finishes the rest.
// TestStore_PruneGivesWay: on SQLite a batch that finds another writer of
// the process waiting at the gate commits the chunk it has done and gives
// way, so that writer waits for a chunk, not the batch; the next batch
// takes the rest, and nothing is pruned twice or lost. PostgreSQL has no
// gate: its batch takes all it selected.
func TestStore_PruneGivesWay(t *testing.T) {
	runPrune(t, func(f *pruneFixture) {
		for i := range 50 {
			f.finished(fmt.Sprintf("gives-way-%02d", i), i%5 != 0)
		}
		f.clock.Advance(time.Hour)
		before := f.clock.Now()
		stop := store.PretendWriterWaits(f.s)
		got, yielded, err := store.PruneBatch(t.Context(), f.s, before, 50)
		stop()
		if err != nil {
			t.Fatal(err)
		}
		if f.s.Dialect() == "sqlite" {
			if !yielded || got <= 0 || got >= 50 {
				t.Fatalf("with a writer waiting the batch pruned %d of 50 (yielded %v); want one chunk, then give way", got, yielded)
			}
		} else if yielded || got != 50 {
			t.Fatalf("PostgreSQL batch pruned %d of 50 (yielded %v); want all 50", got, yielded)
		}
		rest, yielded, err := store.PruneBatch(t.Context(), f.s, before, 50)
		if err != nil || yielded || got+rest != 50 {
			t.Fatalf("second batch: %d (yielded %v, %v); want the other %d", rest, yielded, err, 50-got)
		}
		var unpruned int
		if err := f.s.DB().QueryRow(`SELECT COUNT(*) FROM jobs WHERE pruned_at IS NULL`).Scan(&unpruned); err != nil || unpruned != 0 {
			t.Fatalf("%d jobs left unpruned (%v)", unpruned, err)
		}
		assertIntact(t, f.s)
	})
}

func TestStore_PruneCancelled(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		for i := range 30 {
			f.finished(fmt.Sprintf("job-%d", i), true)
		}
		f.clock.Advance(time.Hour)
		ctx, cancel := context.WithCancel(t.Context())
		rep, err := s.Prune(ctx, f.clock.Now(), store.PruneOptions{MaxBatch: 10, Pause: time.Hour, ProgressEvery: time.Nanosecond,
			Progress: func(store.PruneProgress) { cancel() }})
		if err == nil || rep.Pruned != 10 {
			t.Errorf("cancelled prune: %+v, %v; want 10 pruned and ctx's error", rep, err)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM jobs WHERE pruned_at IS NOT NULL`); n != 10 {
			t.Errorf("%d jobs pruned, want the first batch's 10", n)
		}
		if rep := mustPrune(t, s, f.clock.Now(), store.PruneOptions{Pause: -1}); rep.Pruned != 20 {
			t.Errorf("second run pruned %d, want the other 20", rep.Pruned)
		}
		assertIntact(t, s)
	})
}

// fillFinished writes n done jobs finished at ts straight into a SQLite
// file, each with a prompt and a text of textBytes bytes (tests and
// benchmarks that need many jobs fast).
func fillFinished(t testing.TB, db *sql.DB, from, n, textBytes int, ts string) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	text := strings.Repeat("word ", textBytes/5)
	payload := fmt.Sprintf(`{"prompt":%q,"account":"default","max_words":50}`, strings.Repeat("p", textBytes/2))
	for i := from; i < from+n; i++ {
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, lane, created_at, started_at, finished_at) VALUES (?, ?, ?, ?, 'done', 'local', ?, ?, ?)`,
				[]any{i, fmt.Sprintf("key-%08d", i), fmt.Sprintf("%064x", i), payload, ts, ts, ts}},
			{`INSERT INTO job_attempts (id, job_id, attempt_number, status, lane, started_at, finished_at) VALUES (?, ?, 1, 'done', 'local', ?, ?)`, []any{i, i, ts, ts}},
			{`INSERT INTO results (id, job_id, attempt_id, text, created_at) VALUES (?, ?, ?, ?, ?)`, []any{i, i, i, text, ts}},
			{`INSERT INTO charges (id, job_id, attempt_id, account, amount_micros, provider_request_id, created_at) VALUES (?, ?, ?, 'default', 100, ?, ?)`, []any{i, i, i, fmt.Sprintf("req-%d", i), ts}},
		} {
			if _, err := tx.Exec(q.sql, q.args...); err != nil {
				t.Fatalf("%s: %v", q.sql, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestStore_PruneShrinksSQLiteFile: a new file has incremental
// auto-vacuum, and prune gives the pages it frees back: the file shrinks.
// A payload that is not a JSON object becomes {}.
func TestStore_PruneShrinksSQLiteFile(t *testing.T) {
	t.Parallel()
	path := storetest.SQLitePath(t)
	s := storetest.MustOpen(t, path, store.Options{Synchronous: "NORMAL"})
	if n := count(t, s, `PRAGMA auto_vacuum`); n != 2 {
		t.Fatalf("a new file's auto_vacuum = %d, want 2 (incremental)", n)
	}
	old := time.Now().Add(-48 * time.Hour).UTC().Format(store.TimeLayout)
	fillFinished(t, s.WriteDB(), 1, 2000, 600, old)
	mustExec(t, s, `UPDATE jobs SET payload = 'not json' WHERE id = 7`)
	mustExec(t, s, `PRAGMA wal_checkpoint(TRUNCATE)`)
	size := fileSize(t, path)

	rep := mustPrune(t, s, time.Now().Add(-24*time.Hour), store.PruneOptions{Pause: -1})
	t.Logf("2,000 jobs: %+v", rep)
	if rep.Pruned != 2000 || rep.AutoVacuum != "incremental" || rep.PagesVacuumed == 0 || rep.FreePages != 0 {
		t.Errorf("report %+v, want 2000 pruned and the free pages vacuumed", rep)
	}
	mustExec(t, s, `PRAGMA wal_checkpoint(TRUNCATE)`)
	if after := fileSize(t, path); after > size/2 {
		t.Errorf("file %d bytes before, %d after pruning: want it at least halved", size, after)
	}
	if got := mustShow(t, s, 7).Job.Payload; string(got) != "{}" {
		t.Errorf("pruned unreadable payload = %s, want {}", got)
	}
	assertIntact(t, s)
}

// TestStore_PruneOldFileThenVacuum: a file created without auto-vacuum
// keeps the pages prune frees (new rows reuse them) and says so; Vacuum
// shrinks it and turns incremental auto-vacuum on.
func TestStore_PruneOldFileThenVacuum(t *testing.T) {
	t.Parallel()
	path := storetest.SQLitePath(t)
	s := storetest.MustOpen(t, path, store.Options{Synchronous: "NORMAL"})
	for _, q := range []string{`PRAGMA auto_vacuum = NONE`, `VACUUM`} {
		mustExec(t, s, q)
	}
	if n := count(t, s, `PRAGMA auto_vacuum`); n != 0 {
		t.Fatalf("auto_vacuum = %d after setting none", n)
	}
	fillFinished(t, s.WriteDB(), 1, 2000, 600, time.Now().Add(-48*time.Hour).UTC().Format(store.TimeLayout))
	mustExec(t, s, `PRAGMA wal_checkpoint(TRUNCATE)`)
	size := fileSize(t, path)
	rep := mustPrune(t, s, time.Now().Add(-24*time.Hour), store.PruneOptions{Pause: -1})
	if rep.AutoVacuum != "none" || rep.PagesVacuumed != 0 || rep.FreePages == 0 {
		t.Errorf("report %+v, want auto_vacuum none, free pages kept", rep)
	}
	mustExec(t, s, `PRAGMA wal_checkpoint(TRUNCATE)`)
	if after := fileSize(t, path); after < size {
		t.Errorf("file shrank from %d to %d without auto-vacuum", size, after)
	}
	// New jobs reuse the free pages: the file does not grow.
	free := rep.FreePages
	fillFinished(t, s.WriteDB(), 3001, 200, 600, time.Now().UTC().Format(store.TimeLayout))
	mustExec(t, s, `PRAGMA wal_checkpoint(TRUNCATE)`)
	if after, left := fileSize(t, path), int64(count(t, s, `PRAGMA freelist_count`)); after > size || left >= free {
		t.Errorf("after 200 new jobs: file %d (was %d), free pages %d (were %d); want the free pages reused", after, size, left, free)
	}
	vr, err := s.Vacuum(t.Context())
	if err != nil {
		t.Fatalf("Vacuum: %v", err)
	}
	t.Logf("vacuum: %+v", vr)
	// Halved, but for audit_log's row per pruned job (about 100 bytes
	// each with its index: 2000 rows, some 6% of the file before).
	if vr.AutoVacuumBefore != "none" || vr.AutoVacuum != "incremental" || vr.FileAfter >= vr.FileBefore*56/100 {
		t.Errorf("vacuum %+v, want the file at least about halved (56%%, audit_log's rows kept) and incremental auto-vacuum on", vr)
	}
	assertIntact(t, s)
}

// TestStore_VacuumPostgresRefused: Vacuum is for SQLite files.
func TestStore_VacuumPostgresRefused(t *testing.T) {
	t.Parallel()
	s := storetest.MustOpen(t, storetest.PostgresDSN(t), store.Options{})
	if _, err := s.Vacuum(t.Context()); inkwell.ErrorCode(err) != inkwell.EINVALID {
		t.Errorf("Vacuum on PostgreSQL: %v, want EINVALID", err)
	}
}
