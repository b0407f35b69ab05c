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

// fileBytes reads a file whole (nil when it is absent).
func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return b
}

// dirNames lists a directory's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// foreignSQLite makes a SQLite database that is not Inkwell's, in the
// default rollback-journal mode, as another program (or the old Inkwell)
// would leave it.
// (The "sqlite" driver is registered by internal/store's import.)
func foreignSQLite(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(DELETE)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('x')`); err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "delete" {
		t.Fatalf("journal_mode %q, %v; want delete", mode, err)
	}
}

// TestCLI_RefusedOnAForeignFileLeavesItAsItWas: the read-only commands
// (status, show) and the refused ones (retry, cancel, recover) on a file
// that holds no Inkwell schema must exit 1 "holds no Inkwell schema" and
// leave the file exactly as it was. They used to open it with
// journal_mode(WAL) in the connection string, which SQLite makes
// persistent in the file header before openExisting looks at the schema:
// a foreign database was switched from rollback journal to WAL, and an
// empty file given a 4096-byte header, by a command that changes nothing.
func TestCLI_RefusedOnAForeignFileLeavesItAsItWas(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"status"}, {"show", "1"}, {"retry", "1"}, {"cancel", "1"}, {"recover"}} {
		t.Run(args[0]+"/foreign", func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db := filepath.Join(dir, "other.db")
			foreignSQLite(t, db)
			before := fileBytes(t, db)
			names := dirNames(t, dir)
			code, _, stderr := runCLI(t, append(args, "--db", db)...)
			if code != 1 || !strings.Contains(stderr, "holds no Inkwell schema") {
				t.Errorf("inkwell %s on a foreign SQLite file: exit %d, stderr %q; want 1 and 'holds no Inkwell schema'", args[0], code, stderr)
			}
			after := fileBytes(t, db)
			if !bytes.Equal(before, after) {
				t.Errorf("inkwell %s on a foreign SQLite file changed it (%d bytes -> %d; header bytes 18-19 were %v, are %v: 1,1 is rollback journal, 2,2 is WAL): a refused command must write nothing",
					args[0], len(before), len(after), before[18:20], after[18:20])
			}
			if got := dirNames(t, dir); strings.Join(got, ",") != strings.Join(names, ",") && !(args[0] == "recover" && len(got) == len(names)+1) {
				t.Errorf("inkwell %s left new files beside the database: %v (were %v)", args[0], got, names)
			}
		})
		t.Run(args[0]+"/empty", func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db := filepath.Join(dir, "empty.db")
			if err := os.WriteFile(db, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := runCLI(t, append(args, "--db", db)...)
			if code != 1 || !strings.Contains(stderr, "holds no Inkwell schema") {
				t.Errorf("inkwell %s on an empty file: exit %d, stderr %q; want 1 and 'holds no Inkwell schema'", args[0], code, stderr)
			}
			if after := fileBytes(t, db); len(after) != 0 {
				t.Errorf("inkwell %s on an empty file wrote %d bytes into it (a SQLite header in WAL mode): a refused command must write nothing", args[0], len(after))
			}
		})
	}
}

// TestCLI_RecoverRefusesAStrayArgument: 'inkwell recover web2'
// (the lane named without --lane) must be refused as bad input (exit 2,
// nothing written), as serve, prune and show refuse a stray word. It used
// to run a real recovery of lane "local" instead, and write a
// recovery_runs row.
func TestCLI_RecoverRefusesAStrayArgument(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	if code, _, stderr := runCLI(t, "migrate", "--db", db); code != 0 {
		t.Fatalf("migrate: exit %d, %s", code, stderr)
	}
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	runs := func() int { return countWhere(t, st, `SELECT COUNT(*) FROM recovery_runs`) }
	before := runs()
	code, stdout, stderr := runCLI(t, "recover", "web2", "--db", db)
	if code != 2 {
		t.Errorf("inkwell recover web2 (a stray word, the lane meant as --lane web2): exit %d, stdout %q, stderr %q; want 2 and the stray argument named", code, stdout, stderr)
	}
	if n := runs() - before; n != 0 {
		var lane string
		_ = st.DB().QueryRow(`SELECT lane FROM recovery_runs ORDER BY id DESC LIMIT 1`).Scan(&lane)
		t.Errorf("inkwell recover web2 wrote %d recovery run(s), on lane %q: bad input must write nothing", n, lane)
	}
}

// TestCLI_MigrateRefusesAStrayArgument: 'inkwell migrate
// real.db' (the path given without --db) must be refused (exit 2), as serve
// refuses it "before anything is created: a stray word is a mistake, not a
// database name" (serve.go). migrate used to ignore the word, create a
// new, empty ./inkwell.db and exit 0.
func TestCLI_MigrateRefusesAStrayArgument(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, stdout, stderr := runCLIIn(t, dir, "migrate", "real.db")
	if code != 2 {
		t.Errorf("inkwell migrate real.db: exit %d, stdout %q, stderr %q; want 2 and the stray argument named", code, stdout, stderr)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("inkwell migrate real.db created %v in its working directory: bad input must create nothing", names)
	}
}

// TestCLI_StatusRefusesAStrayArgument: 'inkwell status other.db' is exit
// 2, as 'accounts list extra' and 'tokens list extra' are; it used to show
// the default ./inkwell.db's figures as if they were other.db's.
func TestCLI_StatusRefusesAStrayArgument(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "real.db")
	if code, _, stderr := runCLI(t, "migrate", "--db", db); code != 0 {
		t.Fatalf("migrate: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCLIIn(t, dir, "migrate"); code != 0 { // ./inkwell.db: another database
		t.Fatalf("migrate: exit %d, %s", code, stderr)
	}
	code, stdout, stderr := runCLIIn(t, dir, "status", "real.db")
	if code != 2 {
		t.Errorf("inkwell status real.db: exit %d (stdout %d bytes, stderr %q); want 2 and the stray argument named, not the status of ./inkwell.db", code, len(stdout), stderr)
	}
}

// TestCLI_RecoverRefusesABadLaneName: 'inkwell recover --lane ""' (or a
// name no lane may have) is bad input, exit 2 like any other, before the
// database is opened: no file is created.
func TestCLI_RecoverRefusesABadLaneName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, lane := range []string{"", "../../x"} {
		code, _, stderr := runCLI(t, "recover", "--lane", lane, "--db", filepath.Join(dir, "inkwell.db"))
		if code != 2 || !strings.Contains(stderr, "--lane") {
			t.Errorf("inkwell recover --lane %q: exit %d, stderr %q; want 2 naming --lane", lane, code, stderr)
		}
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("inkwell recover with a bad lane created %v", names)
	}
}
