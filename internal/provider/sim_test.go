package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

func TestSim_Generate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sim := provider.NewSim(0)
	req := inkwell.ProviderRequest{IdempotencyKey: "job-1", Prompt: "a letter to the sea", MaxWords: 12}

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		got, err := sim.Generate(ctx, req)
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		if want := provider.Generate(req.Prompt, req.MaxWords); got.Text != want {
			t.Errorf("Text = %q, want %q", got.Text, want)
		}
		if want := provider.Price(got.Text); got.AmountMicros != want || want != 12*provider.MicrosPerWord {
			t.Errorf("AmountMicros = %d, want %d (12 words)", got.AmountMicros, want)
		}
		// "a letter to the sea": 5 words, and 12 written, at 2 tokens a word.
		if got.TokensUsed != (5+12)*provider.TokensPerWord {
			t.Errorf("TokensUsed = %d, want %d", got.TokensUsed, (5+12)*provider.TokensPerWord)
		}
		again, _ := sim.Generate(ctx, req)
		if !reflect.DeepEqual(again, got) {
			t.Errorf("second call = %+v, want %+v", again, got)
		}
	})
	t.Run("RequestIDFollowsKey", func(t *testing.T) {
		t.Parallel()
		a, _ := sim.Generate(ctx, req)
		other := req
		other.IdempotencyKey = "job-2"
		b, _ := sim.Generate(ctx, other)
		if a.RequestID == b.RequestID || a.RequestID == "" {
			t.Errorf("RequestIDs %q and %q, want distinct non-empty ids for distinct keys", a.RequestID, b.RequestID)
		}
	})
}

func TestSim_Generate_ContextCanceled(t *testing.T) {
	t.Parallel()
	sim := provider.NewSim(time.Hour) // would block the test if ctx were ignored
	ctx, cancel := context.WithCancel(context.Background())
	done := generateAsync(ctx, sim)
	cancel()
	if err := waitErr(t, done); !errors.Is(err, context.Canceled) {
		t.Errorf("Generate after cancel = %v, want context.Canceled", err)
	}
}

func TestSim_Generate_Deadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	done := generateAsync(ctx, provider.NewSim(time.Hour))
	if err := waitErr(t, done); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Generate past deadline = %v, want context.DeadlineExceeded", err)
	}
}

// generateAsync calls sim in a goroutine, so a Sim that ignores ctx fails
// the test instead of hanging it.
func generateAsync(ctx context.Context, sim *provider.Sim) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := sim.Generate(ctx, inkwell.ProviderRequest{IdempotencyKey: "k", Prompt: "p"})
		done <- err
	}()
	return done
}

func waitErr(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Generate did not return within 10s of its context ending")
		return nil
	}
}

// TestSim_CompletionSaysWhenItAnswered: the chat.completion the sim
// answers has "created" set to the time of the answer, in unix seconds,
// as a real provider's has (it was 0, which an SDK shows as 1970).
func TestSim_CompletionSaysWhenItAnswered(t *testing.T) {
	t.Parallel()
	before := time.Now().Unix()
	resp, err := provider.NewSim(0).Generate(t.Context(), inkwell.ProviderRequest{IdempotencyKey: "job-1", Prompt: "p", MaxWords: 5})
	after := time.Now().Unix()
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Object  string `json:"object"`
		Created int64  `json:"created"`
	}
	if err := json.Unmarshal(resp.Response, &c); err != nil || c.Object != "chat.completion" || c.Created < before || c.Created > after {
		t.Errorf("sim completion = %s (%v); want a chat.completion created between %d and %d", resp.Response, err, before, after)
	}
}
