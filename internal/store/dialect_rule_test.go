package store_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDialect_DecidedOnce: the dialect is decided once, at Open, and the
// rest of the code asks the dialect value's fields (what it can do), never
// its name, nor a stand-in that only means "SQLite" (a file path set, a
// write gate made). A comparison of the name outside dialect.go fails
// here, in any Go file of the module that is not a test.
func TestDialect_DecidedOnce(t *testing.T) {
	rules := []struct {
		re   *regexp.Regexp
		what string
	}{
		{regexp.MustCompile(`dialect\.name\s*[!=]=|[!=]=\s*\S*dialect\.name`), "compares the dialect's name"},
		{regexp.MustCompile(`Dialect\(\)\s*[!=]=|[!=]=\s*\S*\.Dialect\(\)`), "compares the dialect's name (Store.Dialect is for display)"},
		{regexp.MustCompile(`\bs\.path\s*[!=]=\s*""`), `takes "has a file path" for SQLite: ask a dialect field`},
		{regexp.MustCompile(`\bs\.gate\s*[!=]=\s*nil`), `takes "has a write gate" for SQLite: ask dialect.oneWriter`},
	}
	// A string compared with either name is the dialect's name by
	// another road.
	storeRule := regexp.MustCompile(`"(sqlite|postgres)"\s*[!=]=|[!=]=\s*"(sqlite|postgres)"`)
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Base(path) == "dialect.go" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			for _, r := range rules {
				if r.re.MatchString(line) {
					t.Errorf("%s:%d %s: %s", path, i+1, r.what, strings.TrimSpace(line))
				}
			}
			if storeRule.MatchString(line) {
				t.Errorf("%s:%d compares a name with the dialect's: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
