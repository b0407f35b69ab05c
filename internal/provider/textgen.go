package provider

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/inkwell/inkwell"
)

// MicrosPerWord is the price of one generated word, in millionths of the
// currency unit. Sim and the simulator both bill with Price.
const MicrosPerWord = 1000

// TokensPerWord is how MaxWords travels over the chat-completions API
// (inkwell.TokensPerWord).
const TokensPerWord = inkwell.TokensPerWord

// Generate returns a deterministic text for prompt: the same prompt and
// maxWords always give the same words. It has exactly Words(maxWords) words,
// in sentences, so a test can count them.
func Generate(prompt string, maxWords int) string {
	n := Words(maxWords)
	s1, s2 := seed(prompt, n)
	return generate(s1, s2, n)
}

// generate writes n words from the seed of a prompt (seed).
func generate(s1, s2 uint64, n int) string {
	rng := rand.NewPCG(s1, s2)
	var b strings.Builder
	left := 0 // words left in the current sentence
	for i := range n {
		w := vocabulary[rng.Uint64()%uint64(len(vocabulary))]
		if left == 0 {
			left = 6 + int(rng.Uint64()%9)
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		left--
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		if left == 0 || i == n-1 {
			b.WriteByte('.')
		}
	}
	return b.String()
}

// Price is what a text costs: MicrosPerWord for each word.
func Price(text string) int64 {
	return int64(len(strings.Fields(text))) * MicrosPerWord
}

// Words is the number of words Generate writes for maxWords: the short
// form's (inkwell.ShortWords).
func Words(maxWords int) int { return inkwell.ShortWords(maxWords) }

// MaxTokens is the max_tokens an OpenAI call sends for maxWords.
func MaxTokens(maxWords int) int { return Words(maxWords) * TokensPerWord }

// WordsForMaxTokens is the inverse of MaxTokens, used by the simulator. No
// max_tokens (zero) means the default number of words.
func WordsForMaxTokens(maxTokens int) int {
	if maxTokens <= 0 {
		return inkwell.DefaultMaxWords
	}
	return Words(max(1, maxTokens/TokensPerWord))
}

// seed hashes the inputs so that nearby prompts give unrelated texts. PCG
// is a fixed algorithm, so the text does not change between Go releases.
func seed(prompt string, words int) (uint64, uint64) {
	sum := sha256.Sum256([]byte(strconv.Itoa(words) + "\x00" + prompt))
	return binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16])
}

var vocabulary = []string{
	"the", "ink", "river", "quiet", "paper", "lamp", "morning", "letter",
	"harbor", "window", "a", "slow", "bright", "garden", "stone", "and",
	"wind", "over", "under", "story", "road", "small", "old", "voice",
	"of", "light", "field", "clock", "after", "rain", "with", "bridge",
	"careful", "house", "map", "blue", "winter", "song", "through", "hill",
	"north", "open", "page", "near", "thread", "green", "tide", "every",
	"shadow", "written", "far", "salt", "candle", "between", "kind", "orchard",
	"measured", "ledger", "evening", "warm", "line", "patient", "door", "sea",
}
