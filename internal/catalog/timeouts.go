package catalog

import (
	"fmt"
	"time"
)

// SlowTokensPerSecond is the pace a long answer may be written at without
// streaming: a large model under load writes 20 to 60 tokens a second, and
// the slowest is what a timeout must allow for.
const SlowTokensPerSecond = 30

// TimeoutWarnings says, for each model of a provider that bills (openai,
// anthropic), when its longest answer written at SlowTokensPerSecond
// takes longer than the provider's timeout. Such a call is cut off while
// the provider still writes it: it may be billed, and where keys are not
// honoured it is not retried, so its answer is paid for and lost. Not an
// error (answers are mostly shorter, and the operator knows the
// provider's pace); serve logs each and inkwell models prints them.
func (c *Catalog) TimeoutWarnings() []string {
	var out []string
	for _, m := range c.Models {
		_, p, err := c.Lookup(m.Name)
		if err != nil || p.Kind == KindSim || p.Timeout <= 0 {
			continue
		}
		longest := time.Duration(m.MaxOutputTokens) * time.Second / SlowTokensPerSecond
		if longest > p.Timeout {
			out = append(out, fmt.Sprintf("model %s may write %d tokens, %s at %d tokens a second, longer than provider %s's timeout %s: "+
				"a call cut off at its timeout may still be billed, and is retried only where keys are honoured; raise timeout (the official SDKs wait 10m) or lower max_output_tokens",
				m.Name, m.MaxOutputTokens, longest.Round(time.Second), SlowTokensPerSecond, p.Name, p.Timeout))
		}
	}
	return out
}
