package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// The official OpenAI Go SDK, which nobody here wrote, against a real
// `inkwell serve` child run from a config file: a priced model on an
// OpenAI-compatible provider (the simulator) and one on the in-process sim.

// chatConfig is a config file with model "writer" (openai kind, the
// simulator at simURL, priced) and "sketch" (sim kind, unpriced).
func chatConfig(t *testing.T, simURL string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "inkwell.toml")
	cfg := fmt.Sprintf(`default_model = "writer"

[[provider]]
name = "upstream"
kind = "openai"
url = %q
honours_keys = true

[[provider]]
name = "local"
kind = "sim"

[[model]]
name = "writer"
provider = "upstream"
upstream = "gpt-sim-1"
input_micros_per_mtok = 2500000
output_micros_per_mtok = 10000000
max_output_tokens = 400

[[model]]
name = "sketch"
provider = "local"
max_output_tokens = 100
`, simURL)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func sdkClient(url string) openai.Client {
	return openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("unused-no-token-exists"), option.WithMaxRetries(0))
}

// TestOpenAISDK_ChatCompletionsAgainstServe: a chat completion sent twice
// with one Idempotency-Key is one job, one charge and one provider bill,
// answered the same both times; the charge is the answer's usage at the
// model's prices; without a key each request is a job of its own; an
// unknown model is a 400 the SDK reads, naming the known models.
func TestOpenAISDK_ChatCompletionsAgainstServe(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--config", chatConfig(t, sim.URL))
	client := sdkClient(srv.URL)
	params := openai.ChatCompletionNewParams{
		Model:       "writer",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("a haiku about ink")},
		Temperature: openai.Float(0.2),
	}

	first, err := client.Chat.Completions.New(t.Context(), params, option.WithHeader("Idempotency-Key", "sdk-chat-1"))
	if err != nil {
		t.Fatalf("first completion: %v", err)
	}
	again, err := client.Chat.Completions.New(t.Context(), params, option.WithHeader("Idempotency-Key", "sdk-chat-1"))
	if err != nil {
		t.Fatalf("the same completion again: %v", err)
	}
	if first.ID == "" || again.ID != first.ID || first.Choices[0].Message.Content == "" || again.Choices[0].Message.Content != first.Choices[0].Message.Content {
		t.Errorf("answers: %q %q / %q %q; want one non-empty answer twice", first.ID, first.Choices[0].Message.Content, again.ID, again.Choices[0].Message.Content)
	}
	if first.Model != "gpt-sim-1" || first.Choices[0].FinishReason != "stop" || first.Usage.CompletionTokens == 0 {
		t.Errorf("answer model %q, finish %q, usage %+v; want the upstream name, stop, and the usage", first.Model, first.Choices[0].FinishReason, first.Usage)
	}

	st := storetest.MustOpen(t, db, store.Options{})
	jobs := countRowsIn(t, st, "jobs")
	d, err := st.Show(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	model := inkwell.Model{InputMicrosPerMTok: 2500000, OutputMicrosPerMTok: 10000000}
	switch c := d.Charge; {
	case jobs != 1:
		t.Errorf("%d jobs after one request sent twice with one key, want 1", jobs)
	case c == nil || c.PromptTokens == nil || c.CompletionTokens == nil:
		t.Errorf("charge %+v: want one that keeps its token counts", c)
	case *c.PromptTokens != first.Usage.PromptTokens || *c.CompletionTokens != first.Usage.CompletionTokens:
		t.Errorf("charge tokens %d + %d, the answer's usage %d + %d", *c.PromptTokens, *c.CompletionTokens, first.Usage.PromptTokens, first.Usage.CompletionTokens)
	case c.AmountMicros != model.Cost(first.Usage.PromptTokens, first.Usage.CompletionTokens) || c.Model != "writer":
		t.Errorf("charge %d micros on %q; want the usage at the model's prices, %d, on writer", c.AmountMicros, c.Model, model.Cost(first.Usage.PromptTokens, first.Usage.CompletionTokens))
	}
	if e, ok := sim.MustLedger(t).Request(first.ID); !ok || e.Bills != 1 {
		t.Errorf("ledger for %s: %+v (found %v), want billed once", first.ID, e, ok)
	}

	// Without a key: each request is a job of its own.
	for range 2 {
		if _, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
			Model: "sketch", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a note")},
		}); err != nil {
			t.Fatalf("keyless completion: %v", err)
		}
	}
	if n := countRowsIn(t, st, "jobs"); n != 3 {
		t.Errorf("%d jobs after two keyless requests, want 3", n)
	}

	// An unknown model: the SDK sees a 400 that lists the known ones, and
	// nothing is written.
	_, err = client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "gpt-5-nonexistent", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
	}, option.WithHeader("Idempotency-Key", "sdk-chat-unknown"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, "writer, sketch") {
		t.Errorf("unknown model: %v; want a 400 naming writer, sketch", err)
	}
	if n := countRowsIn(t, st, "jobs"); n != 3 {
		t.Errorf("%d jobs after a refused request, want 3", n)
	}
}

// countRowsIn counts a table's rows.
func countRowsIn(t *testing.T, st *store.Store, table string) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
