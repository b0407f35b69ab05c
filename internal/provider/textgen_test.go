package provider_test

import (
	"strings"
	"testing"
	"unicode"

	"github.com/inkwell/inkwell/internal/provider"
)

func TestGenerate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		maxWords  int
		wantWords int
	}{
		{"One", 1, 1},
		{"Seven", 7, 7},
		{"Fifty", 50, 50},
		{"ZeroIsDefault", 0, 50},
		{"NegativeIsDefault", -3, 50},
		{"CappedAtMax", 5000, 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := provider.Generate("a poem about ink", tt.maxWords)
			if n := len(strings.Fields(got)); n != tt.wantWords {
				t.Errorf("Generate(_, %d) has %d words, want %d", tt.maxWords, n, tt.wantWords)
			}
			if again := provider.Generate("a poem about ink", tt.maxWords); again != got {
				t.Errorf("Generate is not deterministic:\n%q\n%q", got, again)
			}
			if !unicode.IsUpper(rune(got[0])) || !strings.HasSuffix(got, ".") {
				t.Errorf("Generate(_, %d) = %q, want a capitalized sentence ending in a period", tt.maxWords, got)
			}
			if gotPrice, want := provider.Price(got), int64(tt.wantWords)*provider.MicrosPerWord; gotPrice != want {
				t.Errorf("Price = %d, want %d", gotPrice, want)
			}
		})
	}
}

func TestGenerate_PromptMatters(t *testing.T) {
	t.Parallel()
	a, b := provider.Generate("a poem about ink", 30), provider.Generate("a poem about paper", 30)
	if a == b {
		t.Errorf("two prompts gave the same text %q", a)
	}
	if c := provider.Generate("a poem about ink", 31); strings.HasPrefix(c, strings.TrimSuffix(a, ".")) {
		t.Errorf("maxWords 31 extends the 30-word text, want an unrelated text: %q", c)
	}
}

// MaxWords travels as max_tokens; the simulator must read back the same count.
func TestMaxTokens_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, maxWords := range []int{-1, 0, 1, 2, 49, 50, 51, 2000, 2001} {
		if got, want := provider.WordsForMaxTokens(provider.MaxTokens(maxWords)), provider.Words(maxWords); got != want {
			t.Errorf("WordsForMaxTokens(MaxTokens(%d)) = %d, want %d", maxWords, got, want)
		}
	}
	if got, want := provider.WordsForMaxTokens(0), 50; got != want {
		t.Errorf("WordsForMaxTokens(0) = %d, want %d", got, want)
	}
	if got, want := provider.WordsForMaxTokens(1), 1; got != want {
		t.Errorf("WordsForMaxTokens(1) = %d, want %d", got, want)
	}
}
