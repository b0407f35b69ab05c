package main

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/openai/openai-go/v3"
)

// TestOpenAISDK_ModelsAgainstServe: the official SDK's models.list() and
// models.retrieve() against a real serve child with a config file name the
// file's models, each owned by its provider, and an unknown model is the
// 404 the SDK reads. A chat completion on the in-process sim says when it
// was made (it said 1970).
func TestOpenAISDK_ModelsAgainstServe(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	started := time.Now().Unix()
	srv := startServe(t, filepath.Join(t.TempDir(), "inkwell.db"), "--config", chatConfig(t, sim.URL))
	client := sdkClient(srv.URL)

	page, err := client.Models.List(t.Context())
	if err != nil {
		t.Fatalf("models.list: %v", err)
	}
	var got []string
	for _, m := range page.Data {
		got = append(got, m.ID+"@"+m.OwnedBy)
		if m.Created < started || m.Created > time.Now().Unix() {
			t.Errorf("model %s created %d; want the server's start, between %d and now", m.ID, m.Created, started)
		}
	}
	if want := []string{"writer@upstream", "sketch@local"}; !slices.Equal(got, want) {
		t.Errorf("models.list = %v, want %v (the file's order, each with its provider)", got, want)
	}

	m, err := client.Models.Get(t.Context(), "sketch")
	if err != nil || m.ID != "sketch" || m.OwnedBy != "local" {
		t.Errorf("models.retrieve(sketch) = %+v, %v; want sketch owned by local", m, err)
	}
	_, err = client.Models.Get(t.Context(), "gpt-5")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || !strings.Contains(apiErr.Message, "known models: writer, sketch") {
		t.Errorf("models.retrieve(gpt-5): %v; want a 404 naming the known models", err)
	}

	before := time.Now().Unix()
	c, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "sketch", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a note")},
	})
	if err != nil {
		t.Fatalf("chat completion on sketch: %v", err)
	}
	if c.Created < before || c.Created > time.Now().Unix() {
		t.Errorf("chat completion created %d; want the time it answered, from %d", c.Created, before)
	}
}
