package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// olderSQLite builds, at path, an Inkwell SQLite database as an older
// Inkwell left it: migrations 0001..upTo of this tree applied and
// recorded, in rollback-journal mode, with one failed and one queued job.
func olderSQLite(t *testing.T, path string, upTo int) {
	t.Helper()
	if upTo == 18 {
		// The newest schema but for 0019 (job_attempts.held_back): what
		// the release before this one left.
		st := storetest.MustOpen(t, path, store.Options{})
		st.Close()
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(DELETE)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	files, _ := filepath.Glob(filepath.Join("..", "..", "internal", "store", "migrations", "sqlite", "00*.sql"))
	if len(files) < upTo && upTo != 18 {
		t.Fatalf("migrations: %v", files)
	}
	if upTo == 18 {
		// Back to 18: without 0023 and 0022 (the files' lifetime columns), 0021 (the trigger and its
		// column), the views as 0006 and 0014 made them (0020's read held_back), then
		// without 0019's column.
		qs := []string{`DROP INDEX files_created`, `DROP INDEX files_expiring`, `ALTER TABLE files DROP COLUMN expires_at`, `ALTER TABLE files DROP COLUMN deleted_by`, `ALTER TABLE files DROP COLUMN deleted_at`,
			`DROP TRIGGER batches_reopened`, `ALTER TABLE batches DROP COLUMN reopened`, `DROP VIEW job_overview`, `DROP VIEW job_board`, `DROP VIEW failed_job_action`,
			viewOf(t, "0006_views_by_class.sql", "CREATE VIEW failed_job_action AS", "WHERE j.status = 'failed';"),
			viewOf(t, "0014_views_in_claim_order.sql", "CREATE VIEW job_board AS", "b.claim_turn, b.id;"),
			viewOf(t, "0014_views_in_claim_order.sql", "CREATE VIEW job_overview AS", "ORDER BY c.ord;"),
			`ALTER TABLE job_attempts DROP COLUMN held_back`, `DELETE FROM schema_migrations WHERE version >= 19`}
		for _, q := range qs {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		files = nil
	}
	for i, f := range files[:min(upTo, len(files))] {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(string(body)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if i == 0 {
			if _, err := db.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Exec(fmt.Sprintf(`INSERT INTO schema_migrations VALUES (%d, 'v%d', '2026-01-01T00:00:00.000000Z')`, i+1, i+1)); err != nil {
			t.Fatal(err)
		}
	}
	const at = `'2026-11-30T00:00:00.000000Z'`
	if _, err := db.Exec(`INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, error, lane, created_at, started_at, finished_at)
		VALUES (1, 'k1', 'h', '{"prompt":"p"}', 'failed', 'provider: provider call: timeout: x', 'local', ` + at + `, ` + at + `, ` + at + `),
		       (2, 'k2', 'h', '{"prompt":"p"}', 'queued', NULL, NULL, ` + at + `, NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO job_attempts (job_id, attempt_number, status, error, lane, started_at, finished_at)
		VALUES (1, 1, 'failed', 'provider: provider call: timeout: x', 'local', ` + at + `, ` + at + `)`); err != nil {
		t.Fatal(err)
	}
}

// viewOf is the statement of a SQLite migration file from start to end.
func viewOf(t *testing.T, file, start, end string) string {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "..", "internal", "store", "migrations", "sqlite", file))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(body), start)
	j := strings.Index(string(body)[max(i, 0):], end)
	if i < 0 || j < 0 {
		t.Fatalf("%s: no %q … %q", file, start, end)
	}
	return string(body)[i : i+j+len(end)]
}

// TestCLI_ReadCommandsOnAnOlderSchemaChangeNothing: `inkwell status`
// (and show, audit) on a database an older Inkwell left (schema 4: the
// views exist, the columns of later migrations do not; and schema 18, the
// release before 0019) must change nothing (the file's bytes, its journal
// mode, no file beside it) and either show the overview or refuse with a
// clear word: the schema is older than this inkwell's, run 'inkwell
// migrate'. Never a raw SQL error.
func TestCLI_ReadCommandsOnAnOlderSchemaChangeNothing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v    int
		args []string
	}{{4, []string{"status"}}, {4, []string{"status", "--json"}}, {4, []string{"show", "1"}}, {4, []string{"audit"}},
		{18, []string{"status"}}, {18, []string{"show", "1"}}, {18, []string{"audit"}}} {
		args := c.args
		t.Run(fmt.Sprintf("v%d_%s", c.v, strings.Join(args, "_")), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db := filepath.Join(dir, "old.db")
			olderSQLite(t, db, c.v)
			before := fileBytes(t, db)
			st, _ := os.Stat(db)
			names := dirNames(t, dir)
			code, stdout, stderr := runCLI(t, append(args, "--db", db)...)
			t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			if after := fileBytes(t, db); !bytes.Equal(before, after) {
				t.Errorf("inkwell %v changed a database it only reads (%d bytes -> %d)", args, len(before), len(after))
			}
			if st2, _ := os.Stat(db); !st2.ModTime().Equal(st.ModTime()) {
				t.Errorf("inkwell %v changed the file's mtime", args)
			}
			if got := dirNames(t, dir); strings.Join(got, ",") != strings.Join(names, ",") {
				t.Errorf("inkwell %v left files beside the database: %v (were %v)", args, got, names)
			}
			if code != 0 && !strings.Contains(stderr, "migrate") {
				t.Errorf("inkwell %v on a schema-%d database: exit %d, stderr %q; want the overview, or a refusal saying the schema is older and to run 'inkwell migrate'",
					args, c.v, code, stderr)
			}
		})
	}
}

// TestCLI_ReadCommandsWriteNothing: status (text and JSON), show and
// audit on a current database, with no server running, leave the file
// byte for byte, its mtime, and the directory as they were ("It reads the
// database directly and changes nothing", docs/operations.md).
func TestCLI_ReadCommandsWriteNothing(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"status"}, {"status", "--json", "--jobs", "-1"}, {"show", "1"}, {"audit", "--limit", "0"}} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db := filepath.Join(dir, "inkwell.db")
			olderSQLite(t, db, 18)                                              // the schema but 0019, with a failed and a queued job...
			if code, _, stderr := runCLI(t, "migrate", "--db", db); code != 0 { // ...migrated to the newest
				t.Fatalf("migrate: exit %d: %s", code, stderr)
			}
			before := fileBytes(t, db)
			st, _ := os.Stat(db)
			names := dirNames(t, dir)
			code, stdout, stderr := runCLI(t, append(args, "--db", db)...)
			if code != 0 {
				t.Fatalf("inkwell %v: exit %d, stdout %q stderr %q", args, code, stdout, stderr)
			}
			if after := fileBytes(t, db); !bytes.Equal(before, after) {
				t.Errorf("inkwell %v changed the database (%d bytes -> %d)", args, len(before), len(after))
			}
			if st2, _ := os.Stat(db); !st2.ModTime().Equal(st.ModTime()) {
				t.Errorf("inkwell %v changed the file's mtime", args)
			}
			if got := dirNames(t, dir); strings.Join(got, ",") != strings.Join(names, ",") {
				t.Errorf("inkwell %v left files beside the database: %v (were %v)", args, got, names)
			}
		})
	}
}
