package catalog_test

import (
	"strings"
	"testing"

	"github.com/inkwell/inkwell/internal/catalog"
)

// TestCatalog_TimeoutWarnings: a model whose longest answer, written at
// SlowTokensPerSecond, outlasts its provider's timeout is warned of (the
// call would be cut off while the provider writes it, and may be billed);
// a shorter one, or one on the simulator, is not.
func TestCatalog_TimeoutWarnings(t *testing.T) {
	t.Parallel()
	cat, err := catalog.Parse("inkwell.toml", []byte(`
[[provider]]
name = "claude"
kind = "anthropic"
url = "https://api.anthropic.com"

[[provider]]
name = "patient"
kind = "openai"
url = "https://api.openai.com"
timeout = "10m"

[[provider]]
name = "local"
kind = "sim"

[[model]]
name = "long"
provider = "claude"
max_output_tokens = 8192

[[model]]
name = "short"
provider = "claude"
max_output_tokens = 1000

[[model]]
name = "long-patient"
provider = "patient"
max_output_tokens = 8192

[[model]]
name = "long-sim"
provider = "local"
max_output_tokens = 8192
`))
	if err != nil {
		t.Fatal(err)
	}
	warns := cat.TimeoutWarnings()
	if len(warns) != 1 || !strings.HasPrefix(warns[0], "model long may write 8192 tokens, 4m33s at 30 tokens a second, longer than provider claude's timeout 1m0s") {
		t.Errorf("warnings %q; want one, for model long (8,192 tokens at 30 a second outlast the default 60s)", warns)
	}
}
