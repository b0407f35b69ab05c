package main

import (
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestCLI_MigrateKilledMidAdoptionThenMigrates: `inkwell migrate` of a
// large legacy single-table SQLite file is killed with SIGKILL at several
// instants. After each kill the file is either the legacy file as it was
// (the adoption's one transaction never committed) or fully migrated; the
// next `inkwell migrate` then adopts it whole: every row, its status, and
// the newest schema. It guards the one-transaction migration.
func TestCLI_MigrateKilledMidAdoptionThenMigrates(t *testing.T) {
	t.Parallel()
	const rows = 150000
	path := filepath.Join(t.TempDir(), "legacy.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	statuses := []string{"queued", "running", "failed", "done"}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`CREATE TABLE jobs (id INTEGER PRIMARY KEY, prompt TEXT NOT NULL, status TEXT NOT NULL, error TEXT, created_at TEXT, started_at TEXT, finished_at TEXT)`); err != nil {
		t.Fatal(err)
	}
	st, _ := tx.Prepare(`INSERT INTO jobs (id, prompt, status, error, created_at, started_at, finished_at) VALUES (?, ?, ?, ?, '2024-03-01 10:00:00', '2024-03-01 10:01:00', ?)`)
	for i := 1; i <= rows; i++ {
		s := statuses[i%4]
		var fin, e any
		if s == "failed" || s == "done" {
			fin = "2024-03-01 10:02:00"
		}
		if s == "failed" {
			e = "provider exploded"
		}
		if _, err := st.Exec(i, fmt.Sprintf("prompt %d %s", i, strings.Repeat("x", 100)), s, e, fin); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.Close()

	state := func() string {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var mig, prompt, n int
		db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&mig)
		db.QueryRow(`SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name = 'prompt'`).Scan(&prompt)
		if err := db.QueryRow(`SELECT COUNT(*) FROM jobs`).Scan(&n); err != nil {
			return "unreadable: " + err.Error()
		}
		switch {
		case mig == 0 && prompt == 1 && n == rows:
			return "legacy"
		case mig == 1 && prompt == 0 && n == rows:
			return "migrated"
		}
		return fmt.Sprintf("half: schema_migrations %d, prompt column %d, %d rows", mig, prompt, n)
	}

	killed := 0
	for _, delay := range []time.Duration{30 * time.Millisecond, 120 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond, 1200 * time.Millisecond} {
		if state() == "migrated" {
			break
		}
		cmd := exec.Command(inkwellBin, "migrate", "--db", path)
		cmd.Env = childEnv()
		cmd.SysProcAttr = ChildProcAttr()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		if cmd.Process.Signal(syscall.SIGKILL) == nil {
			killed++
		}
		cmd.Wait()
		if s := state(); s != "legacy" && s != "migrated" {
			t.Fatalf("after SIGKILL at %v of migrate: the file is %s; want the legacy file as it was, or fully migrated", delay, s)
		} else {
			t.Logf("SIGKILL at %v: %s", delay, s)
		}
	}
	if killed == 0 {
		t.Logf("no migrate was killed mid-way")
	}
	code, stdout, stderr := runCLI(t, "migrate", "--db", path)
	if code != 0 {
		t.Fatalf("migrate after the kills: exit %d\n%s%s", code, stdout, stderr)
	}
	if s := state(); s != "migrated" {
		t.Fatalf("after migrate: %s", s)
	}
	s := storetest.MustOpen(t, path, store.Options{NoMigrate: true})
	for _, st := range statuses {
		var n int
		if err := s.DB().QueryRow(`SELECT COUNT(*) FROM jobs WHERE status = ? AND idempotency_key LIKE 'legacy-%'`, st).Scan(&n); err != nil || n != rows/4 {
			t.Errorf("%s legacy jobs after migrate: %d (%v), want %d", st, n, err, rows/4)
		}
	}
	var kept int
	s.DB().QueryRow(`SELECT COALESCE(SUM(n), 0) FROM job_counts WHERE kind = 'queued'`).Scan(&kept)
	if kept != rows/4 {
		t.Errorf("job_counts queued = %d, want %d", kept, rows/4)
	}
}
