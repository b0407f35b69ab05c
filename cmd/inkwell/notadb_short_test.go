package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A short file of junk (fewer bytes than SQLite's 100-byte header, a
// truncated copy, a stray text file) given as --db: it is not a SQLite
// database either, and must be named so and left as it was, by status and
// by serve alike.
func TestCLI_ShortJunkFileIsNotADatabase(t *testing.T) {
	t.Parallel()
	for _, junk := range [][]byte{[]byte("hello\n"), bytes.Repeat([]byte("x"), 99), bytes.Repeat([]byte("y"), 300)} {
		dir := t.TempDir()
		db := filepath.Join(dir, "junk.db")
		if err := os.WriteFile(db, junk, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"status"}, {"serve", "--addr", "127.0.0.1:0"}} {
			code, _, stderr := runCLI(t, append(args, "--db", db)...)
			if code != 1 || !strings.Contains(stderr, "is not a SQLite database") {
				t.Errorf("inkwell %s on %d bytes of junk: exit %d, stderr %q; want 1, named not a SQLite database", args[0], len(junk), code, lastLines(stderr))
			}
		}
		if got, _ := os.ReadFile(db); !bytes.Equal(got, junk) {
			t.Errorf("%d bytes of junk changed to %d bytes", len(junk), len(got))
		}
	}
}

func lastLines(s string) string {
	if len(s) > 600 {
		return s[len(s)-600:]
	}
	return s
}
