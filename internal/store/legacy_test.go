package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// The old Inkwell's only table, exactly as the seed gives it.
const legacySchema = `CREATE TABLE jobs (id INTEGER PRIMARY KEY, prompt TEXT NOT NULL, status TEXT NOT NULL, error TEXT, created_at TEXT, started_at TEXT, finished_at TEXT)`

// legacyRow is one row of the old table; times are its 'YYYY-MM-DD HH:MM:SS' text or nil.
type legacyRow struct {
	id                            int64
	prompt, status                string
	err, created, started, finish any
}

var legacyRows = []legacyRow{
	{1, "a haiku about ink", "queued", nil, "2024-03-01 10:00:00", nil, nil},
	{2, "a sonnet, \"quoted\"\nwith a newline and ünïcödé", "running", nil, "2024-03-01 10:01:00", "2024-03-01 10:02:03", nil},
	{3, "a limerick", "failed", "provider exploded", "2024-03-01 10:03:00", "2024-03-01 10:04:00", "2024-03-01 10:05:00"},
	{4, "an ode", "done", nil, "2024-03-01 10:06:00", "2024-03-01 10:07:00", "2024-03-01 10:08:09"},
	{7, "a second running one, after a gap in ids", "running", nil, nil, "2024-03-02 23:59:59", nil},
	{9, "queued without a creation time", "queued", nil, nil, nil, nil},
}

// mustBuildLegacy writes a database of the old single-table Inkwell with
// the sqlite driver directly, as the old program would have.
func mustBuildLegacy(t *testing.T, rows []legacyRow) string {
	t.Helper()
	path := storetest.SQLitePath(t)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(legacySchema); err != nil {
		t.Fatalf("create legacy table: %v", err)
	}
	for _, r := range rows {
		if _, err := db.Exec(`INSERT INTO jobs (id, prompt, status, error, created_at, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			r.id, r.prompt, r.status, r.err, r.created, r.started, r.finish); err != nil {
			t.Fatalf("insert legacy row %d: %v", r.id, err)
		}
	}
	return path
}

func legacyTime(t *testing.T, v any) *time.Time {
	t.Helper()
	if v == nil {
		return nil
	}
	tm, err := time.Parse("2006-01-02 15:04:05", v.(string))
	if err != nil {
		t.Fatal(err)
	}
	return &tm
}

func TestStore_AdoptLegacy(t *testing.T) {
	t.Parallel()
	path := mustBuildLegacy(t, legacyRows)
	s := mustOpenRaw(t, path)

	// Every row is kept as it was.
	if got := countRows(t, s, "jobs"); got != len(legacyRows) {
		t.Errorf("jobs rows = %d, want %d", got, len(legacyRows))
	}
	for _, r := range legacyRows {
		j, err := s.Job(t.Context(), r.id)
		if err != nil {
			t.Errorf("legacy job %d: %v", r.id, err)
			continue
		}
		want := inkwell.Job{
			ID: r.id, IdempotencyKey: fmt.Sprintf("legacy-%d", r.id), RequestHash: store.LegacyRequestHash, Account: inkwell.DefaultAccount,
			Payload: j.Payload, Status: r.status, StartedAt: legacyTime(t, r.started), FinishedAt: legacyTime(t, r.finish),
		}
		if r.err != nil {
			want.Error = r.err.(string)
		}
		if c := legacyTime(t, r.created); c != nil {
			want.CreatedAt = *c
		}
		if diff := cmp.Diff(want, j); diff != "" {
			t.Errorf("legacy job %d (-want +got):\n%s", r.id, diff)
		}
		var req inkwell.Request
		if err := json.Unmarshal(j.Payload, &req); err != nil || req.Prompt != r.prompt {
			t.Errorf("legacy job %d payload %s = prompt %q (err %v), want prompt %q", r.id, j.Payload, req.Prompt, err, r.prompt)
		}
	}
	if got := countRows(t, s, "job_attempts"); got != 0 {
		t.Errorf("adoption made %d attempt rows, want 0 (recovery back-fills)", got)
	}
	if got := count(t, s, `SELECT COUNT(*) FROM sqlite_master WHERE name = 'legacy_jobs'`); got != 0 {
		t.Errorf("the renamed legacy table is still there")
	}

	// A second open migrates nothing and changes nothing.
	before := dumpOf(t, s.DB(), append(dumpTables, "schema_migrations")...)
	s.Close()
	s = storetest.MustOpen(t, path, store.Options{})
	assertSameDump(t, before, dumpOf(t, s.DB(), append(dumpTables, "schema_migrations")...))

	// Recovery closes each running legacy job with exactly one back-filled
	// attempt, and gives no other legacy job an attempt.
	rep, err := s.Recover(t.Context(), mustLockLane(t, s, "local"), false)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if rep.AttemptsBackfilled != 2 || rep.AttemptsClosed != 0 || rep.JobsFailed != 2 || len(rep.Anomalies) != 0 {
		t.Errorf("report = %+v, want 2 back-filled, 0 closed, 2 failed, no anomalies", rep)
	}
	for _, r := range legacyRows {
		d := mustShow(t, s, r.id)
		if r.status != inkwell.StatusRunning {
			if len(d.Attempts) != 0 || d.Job.Status != r.status {
				t.Errorf("legacy %s job %d: status %s, %d attempts; want untouched with none", r.status, r.id, d.Job.Status, len(d.Attempts))
			}
			continue
		}
		if d.Job.Status != inkwell.StatusFailed || d.Job.Error != inkwell.ErrWorkerRestarted || d.Job.FinishedAt == nil {
			t.Errorf("legacy running job %d = %+v, want failed %q with finished_at", r.id, d.Job, inkwell.ErrWorkerRestarted)
		}
		if len(d.Attempts) != 1 {
			t.Fatalf("legacy running job %d has %d attempts, want 1", r.id, len(d.Attempts))
		}
		a := d.Attempts[0]
		if a.AttemptNumber != 1 || a.Status != inkwell.StatusFailed || a.Error != inkwell.ErrWorkerRestarted ||
			!cmp.Equal(a.StartedAt, legacyTime(t, r.started)) || a.FinishedAt == nil || a.RecoveryRunID == nil || *a.RecoveryRunID != rep.RunID {
			t.Errorf("legacy job %d back-filled attempt = %+v, want number 1, failed %q, started %v, finished, run %d",
				r.id, a, inkwell.ErrWorkerRestarted, r.started, rep.RunID)
		}
	}

	// The queued legacy jobs are the default account's turns 0 and 1.
	for id, want := range map[int64]int64{1: 0, 9: 1} {
		var turn int64
		if err := s.DB().QueryRowContext(t.Context(), `SELECT claim_turn FROM jobs WHERE id = $1`, id).Scan(&turn); err != nil || turn != want {
			t.Errorf("queued legacy job %d has turn %d (%v), want %d", id, turn, err, want)
		}
	}

	// A legacy job retried runs as attempt 2, after the queued legacy
	// jobs (1, then 9: their turns in id order), as any retried job
	// enters the queue behind its account's; new jobs get fresh ids.
	mustRetry(t, s, 2)
	for _, want := range []int64{1, 9} {
		if c := mustClaim(t, s, "local"); c.Job.ID != want {
			t.Errorf("claim took job %d, want the queued legacy job %d", c.Job.ID, want)
		}
	}
	if c := mustClaim(t, s, "local"); c.Job.ID != 2 || c.Attempt.AttemptNumber != 2 {
		t.Errorf("claim after retry: job %d attempt %d, want job 2 attempt 2", c.Job.ID, c.Attempt.AttemptNumber)
	}
	fresh := mustAccept(t, s, acceptParams("new-key", "new prompt"))
	if fresh.ID <= 9 {
		t.Errorf("new job id %d reuses a legacy id (max 9)", fresh.ID)
	}
	// A re-send under a legacy key cannot be matched to a body: refused.
	if _, _, err := s.Accept(t.Context(), acceptParams("legacy-1", "a haiku about ink")); inkwell.ErrorCode(err) != inkwell.EKEYREUSED {
		t.Errorf("Accept with key legacy-1: %v, want %s", err, inkwell.EKEYREUSED)
	}
}

func TestStore_AdoptLegacyRefusesUnknownStatus(t *testing.T) {
	t.Parallel()
	rows := append([]legacyRow{}, legacyRows[:2]...)
	rows = append(rows, legacyRow{5, "odd", "cancelled", nil, "2024-03-01 10:00:00", nil, nil})
	path := mustBuildLegacy(t, rows)
	before := legacyDump(t, path)
	s, err := store.Open(context.Background(), path, store.Options{Logger: storetest.TestLogger(t)})
	if err == nil {
		s.Close()
		t.Fatalf("Open adopted a legacy row with status 'cancelled'; want a refusal")
	}
	// The refusal rolled everything back: the old table is as it was.
	if diff := cmp.Diff(before, legacyDump(t, path)); diff != "" {
		t.Errorf("the refused adoption changed the file (-before +after):\n%s", diff)
	}
}

// legacyDump reads the old database with the driver alone, read-only.
func legacyDump(t *testing.T, path string) dump {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d := dumpOf(t, db, "jobs")
	var tables []string
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	d["<tables>"] = [][]string{tables}
	return d
}
