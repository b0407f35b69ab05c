package catalog_test

// Mistakes an unlucky operator writes in the config file, and what the
// refusal must say, and never say.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/inkwell/inkwell/internal/catalog"
)

// oneModelFile is a file with one openai provider of url (its line 4),
// and a model of it whose lines from line 9 on are modelLines, then
// max_output_tokens = 5 when they do not set it.
func oneModelFile(url string, modelLines ...string) string {
	if !slices.ContainsFunc(modelLines, func(l string) bool { return strings.HasPrefix(l, "max_output_tokens") }) {
		modelLines = append(modelLines, "max_output_tokens = 5")
	}
	return fmt.Sprintf("[[provider]]\nname = \"o\"\nkind = \"openai\"\nurl = %q\n\n[[model]]\nname = \"m\"\nprovider = \"o\"\n%s\n",
		url, strings.Join(modelLines, "\n"))
}

// TestConfig_URLSecretsNeverEchoed: a key written into url by mistake
// (as its user, its password, its query, or a URL that does not parse
// around a password) is refused, at url's line, and the refusal never
// repeats the key: it reaches serve's log and the terminal. A query is
// refused whatever it holds: the URL is the API's base, the key goes in
// key_env, and serve logs the URL it calls.
func TestConfig_URLSecretsNeverEchoed(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-7Hq2SECRET"
	tests := []struct{ name, url, want string }{
		{"KeyAsUser", "https://" + secret + "@api.openai.com", "holds credentials"},
		{"KeyAsPassword", "https://user:" + secret + "@api.openai.com", "holds credentials"},
		{"PasswordAndBadPort", "https://user:" + secret + "@api.openai.com:port", "is not a URL"},
		{"PasswordAndSpaceInHost", "https://user:" + secret + "@exa mple.com", "is not a URL"},
		{"PasswordAndWrongScheme", "ftp://" + secret + "@api.openai.com", "is not an http"},
		{"KeyInQuery", "https://api.openai.com/v1?api-key=" + secret, "has a query"},
		{"KeyInFragment", "https://api.openai.com/#" + secret, "has a fragment"},
		{"KeyPastedAsURL", secret, "is not an http"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cat, err := catalog.Parse("f.toml", []byte(oneModelFile(tt.url)))
			var fe *catalog.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse = %+v, %v; want a *FileError", cat, err)
			}
			if fe.Line != 4 || !strings.Contains(fe.Message, tt.want) {
				t.Errorf("error %q at line %d, want line 4 saying %q", err, fe.Line, tt.want)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error %q repeats the key written in the url", err)
			}
		})
	}
	// What is still quoted back, to help: a URL without anything secret.
	_, err := catalog.Parse("f.toml", []byte(oneModelFile("api.openai.com")))
	if err == nil || !strings.Contains(err.Error(), `"api.openai.com"`) {
		t.Errorf("Parse(url without a scheme) = %v; want it quoted back", err)
	}
}

// TestConfig_ModelBoundPricedPastAnyChargeRefused: a model whose own
// max_output_tokens at its output price costs more than any job may
// (inkwell.MaxChargeMicros) would have every request that names no limit
// refused at accept, 400: the file is refused instead, at
// max_output_tokens' line. The largest bound that fits is taken.
func TestConfig_ModelBoundPricedPastAnyChargeRefused(t *testing.T) {
	t.Parallel()
	_, err := catalog.Parse("f.toml", []byte(oneModelFile("https://api.openai.com",
		"output_micros_per_mtok = 2000000000", "max_output_tokens = 4294967296")))
	var fe *catalog.FileError
	if !errors.As(err, &fe) || fe.Line != 10 || !strings.Contains(fe.Message, "max_output_tokens") {
		t.Fatalf("Parse = %v; want a refusal at max_output_tokens (line 10)", err)
	}
	// 500,000,000 tokens at 2,000 units a million: exactly a million units.
	cat, err := catalog.Parse("f.toml", []byte(oneModelFile("https://api.openai.com",
		"output_micros_per_mtok = 2000000000", "max_output_tokens = 500000000")))
	if err != nil || cat.Models[0].MaxOutputTokens != 500_000_000 {
		t.Fatalf("Parse(a bound that costs a million units) = %+v, %v; want it read", cat, err)
	}
	// One token more costs past a million units: 500,000,000 is the largest.
	_, err = catalog.Parse("f.toml", []byte(oneModelFile("https://api.openai.com",
		"output_micros_per_mtok = 2000000000", "max_output_tokens = 500000001")))
	if !errors.As(err, &fe) || fe.Line != 10 || !strings.Contains(fe.Message, "max_output_tokens") {
		t.Errorf("Parse(a bound one token past a million units) = %v; want a refusal at max_output_tokens (line 10)", err)
	}
}
