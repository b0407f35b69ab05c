package catalog_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/catalog"
)

// TestConfig_Full reads back every key of a file with a sim, an openai and
// an anthropic provider.
func TestConfig_Full(t *testing.T) {
	t.Parallel()
	got, err := catalog.Load("testdata/full.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := &catalog.Catalog{
		Providers: []catalog.Provider{
			{Name: "local", Kind: "sim", RPM: 60, Timeout: 60 * time.Second, HonoursKeys: true, Latency: 250 * time.Millisecond},
			{Name: "openai", Kind: "openai", URL: "https://api.openai.com", KeyEnv: "OPENAI_API_KEY", RPM: 500, TPM: 200000,
				Timeout: 90 * time.Second, HonoursKeys: true, LimitField: "max_completion_tokens"},
			{Name: "anthropic", Kind: "anthropic", URL: "https://api.anthropic.com/", KeyEnv: "ANTHROPIC_API_KEY", Timeout: 2 * time.Minute},
		},
		Models: []inkwell.Model{
			{Name: "gpt-4o-mini", Provider: "openai", Upstream: "gpt-4o-mini-2024-07-18", InputMicrosPerMTok: 150000, OutputMicrosPerMTok: 600000, MaxOutputTokens: 16384, ImageTokens: 48169, InputTokens: 128_000},
			{Name: "claude-x", Provider: "anthropic", Upstream: "claude-x-20250101", InputMicrosPerMTok: 3_000_000, OutputMicrosPerMTok: 15_000_000, MaxOutputTokens: 8192, ImageTokens: 0},
			{Name: "echo", Provider: "local", Upstream: "echo", MaxOutputTokens: 1, ImageTokens: inkwell.DefaultImageTokens},
		},
		Default: "claude-x",
		Path:    "testdata/full.toml",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(full.toml) (-want +got):\n%s", diff)
	}
}

// TestConfig_Defaults: a file with only the required keys gets upstream =
// name, a 60s timeout, honours_keys true for the sim only, max_image_tokens
// inkwell.DefaultImageTokens, and the first model as the default.
func TestConfig_Defaults(t *testing.T) {
	t.Parallel()
	got, err := catalog.Load("testdata/defaults.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := &catalog.Catalog{
		Providers: []catalog.Provider{
			{Name: "sim", Kind: "sim", Timeout: catalog.DefaultTimeout, HonoursKeys: true},
			{Name: "oa", Kind: "openai", URL: "http://127.0.0.1:9090", Timeout: catalog.DefaultTimeout},
			{Name: "an", Kind: "anthropic", URL: "https://api.anthropic.com", Timeout: catalog.DefaultTimeout},
		},
		Models: []inkwell.Model{
			{Name: "first", Provider: "oa", Upstream: "first", MaxOutputTokens: 100, ImageTokens: inkwell.DefaultImageTokens},
			{Name: "second", Provider: "an", Upstream: "second", MaxOutputTokens: 200, ImageTokens: inkwell.DefaultImageTokens},
		},
		Default: "first",
		Path:    "testdata/defaults.toml",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(defaults.toml) (-want +got):\n%s", diff)
	}
}

// TestConfig_Refused loads each file of testdata/refused. Its first line
// is "# want: TEXT", TEXT a part of the error; the line at fault ends with
// "# <- refused" (none: the fault is the whole file, line 0).
func TestConfig_Refused(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/refused/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/refused files: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".toml"), func(t *testing.T) {
			t.Parallel()
			wantText, wantLine := mustReadWant(t, path)
			cat, err := catalog.Load(path)
			var fe *catalog.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("Load = %+v, %v; want a *FileError", cat, err)
			}
			if fe.Path != path || fe.Line != wantLine {
				t.Errorf("error at %s:%d, want %s:%d (%v)", fe.Path, fe.Line, path, wantLine, err)
			}
			if !strings.Contains(fe.Message, wantText) {
				t.Errorf("error %q\ndoes not say %q", fe.Message, wantText)
			}
			if wantLine > 0 && !strings.HasPrefix(err.Error(), fmt.Sprintf("%s:%d: ", path, wantLine)) {
				t.Errorf("error %q does not start with file:line", err)
			}
		})
	}
}

// mustReadWant reads a refused file's expectations.
func mustReadWant(t *testing.T, path string) (text string, line int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	text, ok := strings.CutPrefix(lines[0], "# want: ")
	if !ok {
		t.Fatalf("%s: the first line is not '# want: TEXT'", path)
	}
	for i, l := range lines {
		if strings.HasSuffix(l, "# <- refused") {
			return text, i + 1
		}
	}
	return text, 0
}

// TestConfig_KeyNeverRead: a key_env whose variable is unset is no error,
// and a set one's value is not read into the catalog; a key written in
// key_env by mistake is not repeated in the error.
func TestConfig_KeyNeverRead(t *testing.T) {
	const secret = "sk-test-never-in-the-catalog"
	t.Setenv("OPENAI_API_KEY", secret)
	t.Setenv("ANTHROPIC_API_KEY", "")
	os.Unsetenv("ANTHROPIC_API_KEY")
	cat, err := catalog.Load("testdata/full.toml")
	if err != nil {
		t.Fatalf("Load with ANTHROPIC_API_KEY unset: %v", err)
	}
	if s := fmt.Sprintf("%#v", cat); strings.Contains(s, secret) {
		t.Errorf("the catalog holds the key's value: %s", s)
	}
	_, err = catalog.Load("testdata/refused/key_in_key_env.toml")
	if err == nil || strings.Contains(err.Error(), "sk-proj") {
		t.Errorf("Load(key_in_key_env.toml) = %v; want an error that does not repeat the key", err)
	}
}

// TestConfig_Parse names the file in errors and in Path, and refuses an
// empty file.
func TestConfig_Parse(t *testing.T) {
	t.Parallel()
	data := []byte("[[provider]]\nname = \"s\"\nkind = \"sim\"\n[[model]]\nname = \"m\"\nprovider = \"s\"\nmax_output_tokens = 5\n")
	cat, err := catalog.Parse("mem.toml", data)
	if err != nil || cat.Path != "mem.toml" || cat.Default != "m" {
		t.Fatalf("Parse = %+v, %v; want Path mem.toml, Default m", cat, err)
	}
	_, err = catalog.Parse("empty.toml", nil)
	if err == nil || err.Error() != "empty.toml: no [[model]]: add at least one, naming a [[provider]] (docs/providers.md)" {
		t.Errorf("Parse(empty) = %v", err)
	}
}

func TestConfig_MissingFile(t *testing.T) {
	t.Parallel()
	_, err := catalog.Load(filepath.Join(t.TempDir(), "none.toml"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "none.toml") {
		t.Errorf("Load(missing) = %v; want a not-exist error naming the file", err)
	}
}

// FuzzParse: any input is a catalog or a *FileError, never a panic, and a
// refusal names a line inside the file.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.toml")
	more, _ := filepath.Glob("testdata/refused/*.toml")
	for _, path := range append(files, more...) {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cat, err := catalog.Parse("f.toml", data)
		var fe *catalog.FileError
		switch {
		case err == nil && (len(cat.Models) == 0 || cat.Default == ""):
			t.Fatalf("Parse = %+v without a model or a default", cat)
		case err != nil && !errors.As(err, &fe):
			t.Fatalf("Parse error %v is not a *FileError", err)
		case fe != nil && (fe.Line < 0 || fe.Line > strings.Count(string(data), "\n")+1):
			t.Fatalf("Parse error at line %d of a %d-line file: %v", fe.Line, strings.Count(string(data), "\n")+1, err)
		}
	})
}

// TestConfig_KeyEnv: a variable's name is accepted however it is written;
// a key pasted in its place is refused without being repeated, even when
// it is made only of a name's characters (Groq's gsk_…, Mistral's 32
// mixed-case characters), since serve prints the name when the variable
// is unset.
func TestConfig_KeyEnv(t *testing.T) {
	t.Parallel()
	file := func(keyEnv string) []byte {
		return []byte("[[provider]]\nname = \"p\"\nkind = \"openai\"\nurl = \"https://api.example.com\"\nkey_env = \"" + keyEnv +
			"\"\n[[model]]\nname = \"m\"\nprovider = \"p\"\nmax_output_tokens = 5\n")
	}
	for _, name := range []string{"OPENAI_API_KEY", "GROQ_API_KEY", "openai_key_2", "MY_ORG_PROD_OPENAI_API_KEY_2024", "Groq_Key", "SK_PROD"} {
		if cat, err := catalog.Parse("ok.toml", file(name)); err != nil || cat.Providers[0].KeyEnv != name {
			t.Errorf("key_env %q: %v; want it accepted", name, err)
		}
	}
	for _, key := range []string{"gsk_3FzqR8XbT1mNw9YkLp2VhJd6", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gH"} {
		_, err := catalog.Parse("key.toml", file(key))
		if err == nil || !strings.Contains(err.Error(), "never the key itself") || strings.Contains(err.Error(), key) {
			t.Errorf("key_env %q: %v; want a refusal that does not repeat it", key, err)
		}
	}
}
