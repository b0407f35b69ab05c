package main

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestPrune_VacuumOnPostgresRefusedBeforePruning: `--vacuum` is refused on
// PostgreSQL (docs/retention.md: "It is refused on PostgreSQL"), and bad
// input writes nothing. `inkwell prune --older-than 0s --vacuum --db
// postgres://…` is such input: the command as given cannot be done. Right
// behaviour: refuse before pruning anything (the dialect is known as soon
// as the store is open, before PruneOlderThan runs), exit non-zero, the
// job's prompt and text untouched.
//
// prune used to run first and only then did vacuumFile refuse, so every
// finished job had lost its prompt and text behind an exit 1. runPrune
// now refuses --vacuum on PostgreSQL (exit 2) before pruning.
func TestPrune_VacuumOnPostgresRefusedBeforePruning(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	id := finishedJob(t, dsn, "k1")
	code, stdout, stderr := runCLI(t, "prune", "--older-than", "0s", "--vacuum", "--db", dsn)
	st := storetest.MustOpen(t, dsn, store.Options{NoMigrate: true})
	d := show(t, st, id)
	if code == 0 {
		t.Errorf("prune --vacuum on PostgreSQL: exit 0; want a refusal\n%s%s", stdout, stderr)
	}
	if d.Job.PrunedAt != nil || !strings.Contains(string(d.Job.Payload), "prompt") || d.Result.Text == "" {
		t.Errorf("prune --older-than 0s --vacuum on PostgreSQL exited %d (%q) but pruned job %d first: payload %s, text %q, pruned_at %v; "+
			"want the refusal before anything is written", code, strings.TrimSpace(stderr), id, d.Job.Payload, d.Result.Text, d.Job.PrunedAt)
	}
}

// TestPrune_DryRunWritesNothingOnEitherDialect: --dry-run counts and
// writes nothing, on PostgreSQL too (the store test covers SQLite rows;
// this goes through the CLI on both).
func TestPrune_DryRunWritesNothingOnEitherDialect(t *testing.T) {
	t.Parallel()
	for name, dsn := range map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return filepath.Join(t.TempDir(), "inkwell.db") },
		"postgres": func(t *testing.T) string { return storetest.PostgresDSN(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := dsn(t)
			id := finishedJob(t, db, "k1")
			st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
			before := show(t, st, id)
			code, stdout, stderr := runCLI(t, "prune", "--older-than", "0s", "--dry-run", "--db", db)
			if code != 0 || !strings.Contains(stdout, "dry run: 1 job finished") {
				t.Errorf("dry run: exit %d\n%s%s", code, stdout, stderr)
			}
			after := show(t, st, id)
			if after.Job.PrunedAt != nil || string(after.Job.Payload) != string(before.Job.Payload) || after.Result.Text != before.Result.Text {
				t.Errorf("dry run changed job %d: %+v", id, after)
			}
			var audits int
			if err := st.DB().QueryRow(`SELECT COUNT(*) FROM audit_log`).Scan(&audits); err != nil || audits != 0 {
				t.Errorf("dry run wrote %d audit rows (%v)", audits, err)
			}
		})
	}
}

// TestPrune_LegacyFileLeftAsItWas: `inkwell prune` (and its dry run)
// pointed at a legacy single-table SQLite file, which holds no Inkwell
// schema yet, says so (exit 1) and leaves the file byte for byte as it
// was (docs/operations.md: only an open that may migrate changes a file).
func TestPrune_LegacyFileLeftAsItWas(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "legacy.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE jobs (id INTEGER PRIMARY KEY, prompt TEXT NOT NULL, status TEXT NOT NULL, error TEXT, created_at TEXT, started_at TEXT, finished_at TEXT);
		INSERT INTO jobs VALUES (1, 'p', 'done', NULL, '2024-01-01 00:00:00', '2024-01-01 00:00:00', '2024-01-01 00:00:01')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, _ := os.ReadFile(path)
	for _, args := range [][]string{{"--older-than", "0s", "--dry-run"}, {"--older-than", "0s"}, {"--vacuum"}} {
		code, stdout, stderr := runCLI(t, append([]string{"prune", "--db", path}, args...)...)
		if code != 1 || !strings.Contains(stderr, "no Inkwell schema") {
			t.Errorf("prune %v of a legacy file: exit %d\n%s%s", args, code, stdout, stderr)
		}
		after, _ := os.ReadFile(path)
		if !bytes.Equal(before, after) {
			t.Errorf("prune %v changed the legacy file", args)
		}
		entries, _ := os.ReadDir(filepath.Dir(path))
		if len(entries) != 1 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("prune %v left files beside the legacy database: %v", args, names)
		}
	}
}
