package catalog_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inkwell/inkwell/internal/catalog"
)

// TestConfig_DocsExampleIsAccepted: every TOML example of docs/ is a file
// serve accepts without a warning (a reader copies it first). One was refused for a round:
// latency set on an openai provider.
func TestConfig_DocsExampleIsAccepted(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, page := range pages {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rest := string(src)
		for {
			_, after, ok := strings.Cut(rest, "```toml\n")
			if !ok {
				break
			}
			block, tail, ok := strings.Cut(after, "```")
			if !ok {
				t.Fatalf("%s: a ```toml block is never closed", page)
			}
			rest = tail
			found++
			c, err := catalog.Parse(filepath.Base(page), []byte(block))
			if err != nil {
				t.Errorf("%s: its example config is refused: %v\n%s", page, err, block)
				continue
			}
			if len(c.Models) == 0 || len(c.Providers) == 0 {
				t.Errorf("%s: its example config defines %d providers and %d models", page, len(c.Providers), len(c.Models))
			}
			// A reader's first run of the example should not warn about it.
			if w := c.TimeoutWarnings(); len(w) != 0 {
				t.Errorf("%s: its example config warns: %q\n%s", page, w, block)
			}
		}
	}
	if found == 0 {
		t.Fatal("no ```toml example in docs/*.md: docs/providers.md should show one")
	}
}
