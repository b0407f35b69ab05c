package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// The official OpenAI Node SDK and Anthropic TypeScript SDK, which nobody
// here wrote, run by the scripts in testdata/nodesdk (pinned in its
// package.json and package-lock.json) against a real `inkwell serve` child
// and the provider simulator.

const nodeSDKDir = "testdata/nodesdk"

// nodeSDK returns the node binary, skipping when node or the installed
// packages are missing, unless INKWELL_TEST_NODE_SDK=1 asks for a failure.
func nodeSDK(t *testing.T) string {
	t.Helper()
	required := os.Getenv("INKWELL_TEST_NODE_SDK") == "1"
	node, err := exec.LookPath("node")
	if err != nil {
		if required {
			t.Fatal("node is not on PATH and INKWELL_TEST_NODE_SDK=1")
		}
		t.Skip("node is not on PATH")
	}
	if _, err := os.Stat(filepath.Join(nodeSDKDir, "node_modules")); err != nil {
		if required {
			t.Fatalf("%s/node_modules is missing and INKWELL_TEST_NODE_SDK=1: run `npm ci --prefix cmd/inkwell/%s`", nodeSDKDir, nodeSDKDir)
		}
		t.Skipf("%s/node_modules is missing: run `npm ci --prefix cmd/inkwell/%s` to run it", nodeSDKDir, nodeSDKDir)
	}
	return node
}

// runNode runs a script of testdata/nodesdk with env added and decodes the
// one JSON object it prints into out.
func runNode(t *testing.T, node, script string, env []string, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = nodeSDKDir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstderr:\n%s\nstdout:\n%s", script, err, stderr.String(), stdout.String())
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), out); err != nil {
		t.Fatalf("node %s printed %q: %v", script, stdout.String(), err)
	}
}

// TestNodeSDK_OpenAIAgainstServe: the OpenAI Node SDK uploads a batch file,
// makes a batch, reads it to completed and reads its output; lists batches
// page by page; sends one chat completion twice under one Idempotency-Key;
// and reads an unknown model as a BadRequestError. The database then holds
// one charge per batch line and one job for the twice-sent completion.
func TestNodeSDK_OpenAIAgainstServe(t *testing.T) {
	t.Parallel()
	node := nodeSDK(t)
	sim := simtest.MustStart(t, providersim.Config{Latency: 2 * time.Second}) // "writer": slow, so a batch can be cancelled
	db := filepath.Join(t.TempDir(), "inkwell.db")
	token := mustClientToken(t, db, "acme")
	srv := startServe(t, db, "--config", chatConfig(t, sim.URL))

	var got struct {
		Batch struct {
			ID            string
			Status        string
			RequestCounts struct{ Total, Completed, Failed int } `json:"request_counts"`
			OutputLines   []string                               `json:"output_lines"`
		}
		Cancelled struct {
			ID            string
			FirstStatus   string `json:"first_status"`
			Status        string
			RequestCounts struct{ Total, Completed, Failed int } `json:"request_counts"`
		}
		Listed []string
		Files  struct {
			Uploaded, Listed, Deleted []string
			Left                      int
			BatchAfter                struct{ Total, Completed int } `json:"batch_after"`
		}
		Chat struct {
			ID      string
			AgainID string `json:"again_id"`
			Content string
		}
		UnknownModel struct {
			Status  int
			Class   string
			Message string
		} `json:"unknown_model"`
		SDKHeaders     []string `json:"sdk_headers"`
		SDKIdempotency []string `json:"sdk_idempotency"`
	}
	runNode(t, node, "openai.cjs", []string{"INKWELL_URL=" + srv.URL, "INKWELL_TOKEN=" + token}, &got)
	t.Logf("headers the SDK sends: %v", got.SDKHeaders)

	if got.Batch.Status != "completed" || got.Batch.RequestCounts.Total != 3 || got.Batch.RequestCounts.Completed != 3 ||
		strings.Join(got.Batch.OutputLines, ",") != "node-1,node-2,node-3" {
		t.Errorf("batch %+v; want 3 completed lines node-1..3 in order", got.Batch)
	}
	if len(got.Listed) != 3 || got.Listed[len(got.Listed)-1] != got.Batch.ID {
		t.Errorf("auto-paginated list %v; want the 3 batches, newest first, %s last", got.Listed, got.Batch.ID)
	}
	newestFirst := slices.Clone(got.Files.Uploaded)
	slices.Reverse(newestFirst)
	if len(got.Files.Uploaded) != 3 || !slices.Equal(got.Files.Listed, newestFirst) || !slices.Equal(got.Files.Deleted, newestFirst) || got.Files.Left != 0 {
		t.Errorf("files %+v; want the 3 uploads listed newest first, each deleted, none left", got.Files)
	}
	if got.Files.BatchAfter.Total != 3 || got.Files.BatchAfter.Completed != 3 {
		t.Errorf("the first batch after its file was deleted: %+v; want its 3 lines completed", got.Files.BatchAfter)
	}
	if got.Cancelled.Status != "cancelled" || got.Cancelled.RequestCounts.Total != 20 || got.Cancelled.RequestCounts.Completed >= 20 {
		t.Errorf("cancelled batch %+v; want cancelled with lines left undone", got.Cancelled)
	}
	if got.Chat.ID == "" || got.Chat.AgainID != got.Chat.ID || got.Chat.Content == "" {
		t.Errorf("chat %+v; want one answer twice", got.Chat)
	}
	if got.UnknownModel.Status != 400 || got.UnknownModel.Class != "BadRequestError" || !strings.Contains(got.UnknownModel.Message, "writer, sketch") {
		t.Errorf("unknown model %+v; want a BadRequestError 400 naming writer, sketch", got.UnknownModel)
	}
	if len(got.SDKIdempotency) != 0 {
		t.Errorf("the SDK sent idempotency keys of its own: %v", got.SDKIdempotency)
	}

	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	var chatJobs, charges int
	if err := st.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM jobs WHERE idempotency_key = 'node-chat-1'`).Scan(&chatJobs); err != nil {
		t.Fatal(err)
	}
	if chatJobs != 1 {
		t.Errorf("%d jobs for the completion sent twice under one key, want 1", chatJobs)
	}
	// One charge per line of the completed batch (its id is batch_N).
	var firstBatch int64
	if _, err := fmt.Sscanf(got.Batch.ID, "batch_%d", &firstBatch); err != nil {
		t.Fatalf("batch id %q: %v", got.Batch.ID, err)
	}
	if err := st.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM charges WHERE job_id IN (SELECT id FROM jobs WHERE batch_id = ?)`, firstBatch).Scan(&charges); err != nil {
		t.Fatal(err)
	}
	if charges != 3 {
		t.Errorf("%d charges for the completed batch of 3 lines, want 3", charges)
	}
	if n := countRowsIn(t, st, "jobs"); n != 3+20+3+1 {
		t.Errorf("%d jobs; want 3+20+3 batch lines and 1 chat completion (the unknown model writes none)", n)
	}
}

// TestNodeSDK_AnthropicAgainstProviderSim: the Anthropic TypeScript SDK
// reads providersim's Messages API answer (id, type message, role, text
// blocks, model, stop_reason, usage) and its 529 as an APIError with status
// 529 and Anthropic's error body; the answer is billed once in the ledger.
func TestNodeSDK_AnthropicAgainstProviderSim(t *testing.T) {
	t.Parallel()
	node := nodeSDK(t)
	sim := simtest.MustStart(t, providersim.Config{})
	failing := simtest.MustStart(t, providersim.Config{FailRate: 1})
	limited := simtest.MustStart(t, providersim.Config{RPM: 60}) // a call a second: the second call is a 429, retry-after 1
	var got struct {
		Message struct {
			ID, Type, Role, Model string
			StopReason            string `json:"stop_reason"`
			Content               []struct{ Type, Text string }
			Usage                 struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
			}
		}
		Limited struct {
			IDs      []string
			Statuses []int
		}
		Overloaded struct {
			Status int
			Class  string
			Error  struct {
				Type  string
				Error struct{ Type, Message string }
			}
		}
	}
	runNode(t, node, "anthropic.cjs", []string{"SIM_URL=" + sim.URL, "SIM_FAILING_URL=" + failing.URL, "SIM_LIMITED_URL=" + limited.URL}, &got)
	m := got.Message
	if m.ID == "" || m.Type != "message" || m.Role != "assistant" || len(m.Content) == 0 || m.Content[0].Type != "text" ||
		m.Content[0].Text == "" || m.StopReason == "" || m.Usage.InputTokens == 0 || m.Usage.OutputTokens == 0 {
		t.Errorf("message %+v; want Anthropic's shape with text and usage", m)
	}
	if e, ok := sim.MustLedger(t).Request(m.ID); !ok || e.Bills != 1 {
		t.Errorf("ledger for %s: %+v (found %v), want billed once", m.ID, e, ok)
	}
	// The 429 the SDK retried is not billed; the answer it got is, once.
	if len(got.Limited.IDs) != 2 || !slices.Contains(got.Limited.Statuses, 429) {
		t.Errorf("limited sim: %+v; want two answers, one after a 429", got.Limited)
	}
	ledger := limited.MustLedger(t)
	for _, id := range got.Limited.IDs {
		if e, ok := ledger.Request(id); !ok || e.Bills != 1 {
			t.Errorf("ledger for %s: %+v (found %v), want billed once", id, e, ok)
		}
	}
	o := got.Overloaded
	if o.Status != 529 || o.Error.Type != "error" || o.Error.Error.Type != "overloaded_error" || o.Error.Error.Message == "" {
		t.Errorf("529 as the SDK sees it: %+v; want status 529, body {type: error, error: {type: overloaded_error, message}}", o)
	}
}
