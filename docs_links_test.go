package inkwell_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestDocs_LinksResolve: every relative link in README.md and docs/*.md
// names a file of the repository, and every #anchor a heading (as GitHub
// makes its id) or an <a id> of the page it points to. Users read docs/
// only; a link that leads nowhere is a sentence they cannot follow.
func TestDocs_LinksResolve(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	pages = append(pages, "README.md")
	anchors := map[string]map[string]bool{}
	links := map[string][]docLink{}
	for _, p := range pages {
		anchors[p], links[p] = readDoc(t, p)
	}
	checked := 0
	for _, p := range pages {
		for _, l := range links[p] {
			target, anchor, _ := strings.Cut(l.target, "#")
			file := p
			if target != "" {
				file = filepath.Clean(filepath.Join(filepath.Dir(p), target))
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d: link to %q: no such file", p, l.line, l.target)
					continue
				}
			}
			checked++
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			if anchors[file] == nil {
				a, _ := readDoc(t, file)
				anchors[file] = a
			}
			if !anchors[file][anchor] {
				t.Errorf("%s:%d: link to %q: %s has no heading or <a id> %q", p, l.line, l.target, file, anchor)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d links checked: the link pattern no longer reads the docs", checked)
	}
}

type docLink struct {
	target string
	line   int
}

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	htmlID   = regexp.MustCompile(`<a id="([^"]+)"`)
	inlineCd = regexp.MustCompile("`[^`]*`")
)

// readDoc returns a page's anchors (its headings' GitHub ids, and <a
// id>s) and its relative links, outside fenced code.
func readDoc(t *testing.T, path string) (map[string]bool, []docLink) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	anchors, seen := map[string]bool{}, map[string]int{}
	var links []docLink
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range htmlID.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		if h, ok := heading(line); ok {
			id := headingID(h)
			if k := seen[id]; k > 0 {
				anchors[id+"-"+strconv.Itoa(k)] = true
			} else {
				anchors[id] = true
			}
			seen[id]++
		}
		for _, m := range mdLink.FindAllStringSubmatch(inlineCd.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links = append(links, docLink{target: target, line: n})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return anchors, links
}

func heading(line string) (string, bool) {
	trimmed := strings.TrimLeft(line, "#")
	level := len(line) - len(trimmed)
	if level < 1 || level > 6 || !strings.HasPrefix(trimmed, " ") {
		return "", false
	}
	return strings.TrimSpace(trimmed), true
}

// headingID is the id GitHub gives a heading: lower case, letters,
// digits, '-' and '_' kept, each space a '-', the rest dropped.
func headingID(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
