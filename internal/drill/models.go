package drill

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/inkwell/inkwell/internal/provider"
)

// Every serve of the drill runs from a config file the drill writes
// (docs/providers.md): the scenario's simulator twice, as an openai
// provider (chat completions, whose keys the simulator honours) and as an
// anthropic one (the Messages API, which honours none and bills every
// call it answers); model drill on the first, unpriced, so that the
// money of the short-form jobs is what it always was, and model
// drill-claude on the second, priced, which the chat-form jobs name.
const (
	modelDrill  = "drill"
	modelClaude = "drill-claude"

	providerOpenAI    = "sim-openai"
	providerAnthropic = "sim-anthropic"

	// drill-claude's prices per million tokens, in micros, and its bound.
	claudeInputMicros  = 3_000_000
	claudeOutputMicros = 15_000_000
	claudeMaxOutput    = 200
)

// serveConfig is the config file of a serve whose providers are at url,
// each call bounded by timeout.
func serveConfig(url string, timeout time.Duration) string {
	return fmt.Sprintf(`# Written by inkwell drill for one serve; docs/providers.md.
default_model = %[1]q

[[provider]]
name = %[3]q
kind = "openai"
url = %[5]q
key_env = "INKWELL_PROVIDER_KEY"
timeout = %[6]q
honours_keys = true # the simulator answers a repeated key from its record

[[provider]]
name = %[4]q
kind = "anthropic"
url = %[5]q
key_env = "INKWELL_PROVIDER_KEY"
timeout = %[6]q

[[model]]
name = %[1]q
provider = %[3]q
max_output_tokens = %[7]d

[[model]]
name = %[2]q
provider = %[4]q
input_micros_per_mtok = %[8]d
output_micros_per_mtok = %[9]d
max_output_tokens = %[10]d
`, modelDrill, modelClaude, providerOpenAI, providerAnthropic, url, timeout.String(),
		inkwell.MaxMaxWords*inkwell.TokensPerWord, claudeInputMicros, claudeOutputMicros, claudeMaxOutput)
}

// writeServeConfig writes serveConfig(url, timeout) to path.
func writeServeConfig(path, url string, timeout time.Duration) error {
	if err := os.WriteFile(path, []byte(serveConfig(url, timeout)), 0o644); err != nil {
		return fmt.Errorf("write serve config: %w", err)
	}
	return nil
}

// drillCatalog is the models and providers every serve of the drill runs
// with, read by the same parser serve uses; the checker judges each job
// by its model's provider and prices. The URL plays no part in that.
func drillCatalog() *catalog.Catalog {
	c, err := catalog.Parse("drill.toml", []byte(serveConfig("http://127.0.0.1:1", catalog.DefaultTimeout)))
	if err != nil {
		panic(fmt.Sprintf("drill: its own serve config does not parse: %v", err))
	}
	return c
}

// chatBody is the chat form a drill client sends for a job on
// drill-claude: one user message, with the same words asked for as the
// short form's max_words (max_tokens at TokensPerWord a word).
type chatBody struct {
	Model     string        `json:"model"`
	Messages  []chatMessage `json:"messages"`
	MaxTokens int           `json:"max_tokens"`
	Account   string        `json:"account,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// body is what the client sends for the item: the short form, or on
// drill-claude the chat form.
func (it item) body() []byte {
	var v any = it.req
	if it.model == modelClaude {
		v = chatBody{Model: modelClaude, Messages: []chatMessage{{Role: "user", Content: it.req.Prompt}},
			MaxTokens: inkwell.ShortWords(it.req.MaxWords) * inkwell.TokensPerWord, Account: it.req.Account}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs always marshal
	}
	return b
}

// worstCase is what serve's accept reserves for the item on its model
// (docs/design.md §10, §12): on drill, unpriced on an openai provider
// priced by the word, its output bound in words; on drill-claude,
// Model.WorstCase (every byte of the request a token, plus its
// max_tokens, at the model's prices).
func worstCase(cat *catalog.Catalog, it item) int64 {
	w, err := inkwell.ReadPayload(it.body())
	if err != nil {
		panic(fmt.Sprintf("drill: its own request does not read back: %v", err))
	}
	m, _, err := cat.Lookup(it.model)
	if err != nil {
		panic(fmt.Sprintf("drill: %v", err))
	}
	// Not a sim, not priced per token: what WorstCaseMicros says of the
	// drill's openai provider, and of any provider on a priced model.
	return provider.WorstCaseMicros(nil, m, w)
}

// onClaude says whether the one-job scenario at point sends its job in
// the chat form on drill-claude: every other point, from the first, so
// that complete.before-commit (a paid answer lost) shows the window a
// provider without idempotency keys leaves, and claim.after-commit the
// ordinary path on it.
func onClaude(point string) bool {
	i := slices.Index(crashpoint.Names, point)
	return i >= 0 && i%2 == 0
}

// modelOf is the model of the i-th job (from 0) of a workload whose
// every chatEvery-th job is on drill-claude ("" is the default, drill).
func modelOf(i, chatEvery int) string {
	if chatEvery > 0 && (i+1)%chatEvery == 0 {
		return modelClaude
	}
	return ""
}

// unkeyed is paths for a job whose provider honours no idempotency key:
// every call it answers is billed, so in each read the bills are the
// calls ("2 / 1", a repeat answered from the record, is "2 / 2").
func unkeyed(paths []path) []path {
	var out []path
	for _, p := range paths {
		for m := range p {
			calls, _, _ := strings.Cut(p[m].bills, " / ")
			p[m].bills = calls + " / " + calls
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// aboutClaude is about(point) for the one-job scenario whose job is on
// drill-claude.
func aboutClaude(point string) string {
	const model = "The job is a chat request (`model`, `messages`, `max_tokens`) on `drill-claude`, a priced model whose provider is `anthropic` (the simulator's Messages API), " +
		"which honours no idempotency key: every call it answers is billed. "
	switch point {
	case crashpoint.ProviderAfterCall, crashpoint.CompleteBeforeCommit:
		first := "Serve dies after the provider answered and billed, before anything is written. "
		if point == crashpoint.CompleteBeforeCommit {
			first = "Serve dies inside the completion transaction: result, charge and done are written but not committed, so the database is as at provider.after-call. "
		}
		return model + first + "Recovery fails the orphan (worker restarted, never retried automatically); the client retries it, and the retried call, though it carries the same job-scoped key, is billed a second time: " +
			"2 calls, 2 bills. That is the window of design.md §7 (a provider that ignores keys is called again when the process dies between its answer and the completion commit), measured here; " +
			"the user is still charged once, at the answer's usage and the model's prices."
	}
	return about(point) + " " + model + "No answer is lost on this path, so it is billed once."
}

// secondBills counts, on s, the jobs called on a provider that honours no
// key (the ledger's messages) and the bills beyond the first of each:
// calls answered again because an answer was lost (InvUnkeyedBills).
func (t *Timeline) secondBills(s Snapshot) (jobs, second int64) {
	_, _, perJob := t.billsOf(s)
	for _, j := range perJob {
		if j.unkeyed {
			jobs++
			second += max(0, j.bills-1)
		}
	}
	return jobs, second
}
