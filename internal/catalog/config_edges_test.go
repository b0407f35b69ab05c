package catalog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/inkwell/inkwell/internal/catalog"
)

// edgeHead is one openai provider; the model tables follow it.
const edgeHead = "[[provider]]\nname = \"o\"\nkind = \"openai\"\nurl = \"https://api.openai.com\"\n\n"

const edgeModel = "[[model]]\nname = \"m\"\nprovider = \"o\"\nmax_output_tokens = 5\n"

// TestConfig_TopLevelDottedUnknownKeyRefused: docs/providers.md
// says "a key that no table takes" is refused, naming the line. A
// top-level key the file does not take is refused when written plainly
// (server = 3) or as an inline table (server = { port = 3 }), but not
// when written as a dotted key (limits.rpm = 500) or as a sub-table
// header ([server.http], [[budget.account]]): those are silently ignored
// (config.go unknownTop skips every undecoded key longer than one part,
// and BurntSushi/toml does not list the implicit parent "limits" as
// undecoded). An operator who writes limits they believe are in force
// gets none, and no error.
func TestConfig_TopLevelDottedUnknownKeyRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file, key string
		line            int
	}{
		{"Plain", "limits = 500\n" + edgeHead + edgeModel, "limits", 1},                            // refused before too
		{"Inline", "limits = { rpm = 500 }\n" + edgeHead + edgeModel, "limits", 1},                 // refused before too
		{"Dotted", "limits.rpm = 500\n" + edgeHead + edgeModel, "limits", 1},                       // was accepted
		{"SubTable", edgeHead + edgeModel + "[server.http]\nport = 8080\n", "server", 10},          // was accepted
		{"SubArray", edgeHead + edgeModel + "[[budget.account]]\nname = \"acme\"\n", "budget", 10}, // was accepted
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat, err := catalog.Parse("inkwell.toml", []byte(tc.file))
			var fe *catalog.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse accepted a file with the unknown top-level key %q (models %v): want a *FileError naming it", tc.key, cat.Names())
			}
			if !strings.Contains(fe.Message, `"`+tc.key+`"`) {
				t.Errorf("refusal %q does not name the key %q", fe.Message, tc.key)
			}
			if fe.Line != tc.line {
				t.Errorf("refusal at line %d, want %d: %v", fe.Line, tc.line, err)
			}
		})
	}
}

// TestConfig_LowercaseHexKeyInKeyEnvRefused: key_env must name a
// variable, "never the key itself", and a value that looks like a key is
// refused so that serve's start-up log ("key_env" is logged) and inkwell
// models never print it. looksLikeKey knows prefixed keys and long
// mixed-case runs, but a long lowercase hex key (64 hex characters, the
// shape of e.g. an API secret made from 32 random bytes) passes as a
// variable name and is then logged and printed. No variable name is 64
// hex digits.
func TestConfig_LowercaseHexKeyInKeyEnvRefused(t *testing.T) {
	t.Parallel()
	const key = "af9c2e8b7d14f6a9e0c5b2d8f7a1e4c63f9c2e8b7d14f6a9e0c5b2d8f7a1e4c6"
	file := "[[provider]]\nname = \"o\"\nkind = \"openai\"\nurl = \"https://api.example.com\"\nkey_env = \"" + key + "\"\n\n" + edgeModel
	cat, err := catalog.Parse("inkwell.toml", []byte(file))
	if err == nil {
		t.Fatalf("key_env = a 64-character hex key accepted (catalog key_env %q): serve logs it at start and inkwell models prints it", cat.Providers[0].KeyEnv)
	}
	if strings.Contains(err.Error(), key) {
		t.Errorf("the refusal repeats the key: %v", err)
	}
}

// TestConfig_PriceEdgesRefused: NaN, infinities, a fraction, a
// value past int64 and a hex price past the bound are each refused at the
// price's own line, and nothing of the kind reaches a Model (so no
// reservation can overflow into a negative one).
func TestConfig_PriceEdgesRefused(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"nan", "inf", "-inf", "0.5", "1e3", "0x7fffffffffffffff", "-1", "2000000001", "\"150000\""} {
		file := edgeHead + "[[model]]\nname = \"m\"\nprovider = \"o\"\noutput_micros_per_mtok = " + v + "\nmax_output_tokens = 5\n"
		_, err := catalog.Parse("inkwell.toml", []byte(file))
		var fe *catalog.FileError
		if !errors.As(err, &fe) || fe.Line != 9 {
			t.Errorf("output_micros_per_mtok = %s: %v; want a refusal at line 9", v, err)
		}
	}
	// Past int64: a TOML syntax error, at its line.
	_, err := catalog.Parse("inkwell.toml", []byte(edgeHead+"[[model]]\nname = \"m\"\nprovider = \"o\"\ninput_micros_per_mtok = 9223372036854775808\nmax_output_tokens = 5\n"))
	var fe *catalog.FileError
	if !errors.As(err, &fe) || fe.Line != 9 {
		t.Errorf("a price past int64: %v; want a refusal at line 9", err)
	}
}

// TestConfig_NamesThatLookAlikeRefused: two models or providers whose
// names differ only in case, or a name with an invisible character, read
// as one name in every log and listing while requests match them exactly:
// refused at the second name's line.
func TestConfig_NamesThatLookAlikeRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file, want string
		line             int
	}{
		{"ModelCase", edgeHead + edgeModel + "\n[[model]]\nname = \"M\"\nprovider = \"o\"\nmax_output_tokens = 5\n", `written "m"`, 12},
		{"ProviderCase", edgeHead + "[[provider]]\nname = \"O\"\nkind = \"openai\"\nurl = \"https://api.openai.com\"\n\n" + edgeModel, `written "o"`, 7},
		{"ZeroWidth", edgeHead + "[[model]]\nname = \"m\u200b\"\nprovider = \"o\"\nmax_output_tokens = 5\n", "invisible character", 7},
		// "café" as one code point (NFC), then as e and U+0301 (NFD).
		{"AccentEncoding", edgeHead + "[[model]]\nname = \"caf\u00e9\"\nprovider = \"o\"\nmax_output_tokens = 5\n\n[[model]]\nname = \"cafe\u0301\"\nprovider = \"o\"\nmax_output_tokens = 5\n", "how an accent is encoded", 12},
		{"AccentEncodingAndCase", edgeHead + "[[model]]\nname = \"caf\u00e9\"\nprovider = \"o\"\nmax_output_tokens = 5\n\n[[model]]\nname = \"CAFE\u0301\"\nprovider = \"o\"\nmax_output_tokens = 5\n", "written \"caf\u00e9\"", 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := catalog.Parse("inkwell.toml", []byte(tc.file))
			var fe *catalog.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse: %v; want a *FileError", err)
			}
			if !strings.Contains(fe.Message, tc.want) || fe.Line != tc.line {
				t.Errorf("refusal at line %d: %q; want line %d saying %q", fe.Line, fe.Message, tc.line, tc.want)
			}
		})
	}
}
