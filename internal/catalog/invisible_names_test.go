package catalog_test

import (
	"fmt"
	"testing"

	"github.com/inkwell/inkwell/internal/catalog"
)

// TestConfig_InvisibleNamePartsRefused: the catalog refuses a
// model name holding "an invisible character (a zero-width space, joiner
// or mark)" because "m\u200b" reads as "m" in every log and listing and is
// another model. The check was unicode.Cf only; the Unicode
// default-ignorable characters that are not Cf render as nothing too: the
// combining grapheme joiner U+034F (Mn), a variation selector U+FE0F
// (Mn), the Hangul fillers U+3164 and U+115F (Lo), a Mongolian free
// variation selector U+180B (Mn). Each gave a second model that reads as
// "m" beside the model "m".
func TestConfig_InvisibleNamePartsRefused(t *testing.T) {
	t.Parallel()
	for _, r := range []rune{'\u034f', '\ufe0f', '\u3164', '\u180b', '\u115f'} {
		t.Run(fmt.Sprintf("U+%04X", r), func(t *testing.T) {
			file := edgeHead + edgeModel + "\n[[model]]\nname = \"m" + string(r) + "\"\nprovider = \"o\"\nmax_output_tokens = 5\n"
			cat, err := catalog.Parse("inkwell.toml", []byte(file))
			if err == nil {
				t.Errorf("a second model named %q (reads as \"m\") accepted beside \"m\": models %q; want it refused as holding an invisible character", "m"+string(r), cat.Names())
			}
		})
	}
}
