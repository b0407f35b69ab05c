package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/openai/openai-go/v3"
)

// TestOpenAISDK_BatchSurvivesKill9: a batch uploaded and created with the
// official OpenAI Go SDK, its serve killed with SIGKILL while calls are in
// flight and some lines are done, finishes after a restart (recovery closes
// the dead calls; a retry by hand queues them again) with one charge per
// line and one provider bill per line: the provider honours the job-scoped
// key, so a call the dead process had sent is answered again, not billed
// again. The output file, read with the SDK, has every line once.
func TestOpenAISDK_BatchSurvivesKill9(t *testing.T) {
	t.Parallel()
	const lines = 6
	sim := simtest.MustStart(t, providersim.Config{Latency: 400 * time.Millisecond})
	db := filepath.Join(t.TempDir(), "inkwell.db")
	cfg := chatConfig(t, sim.URL)
	srv := startServe(t, db, "--config", cfg, "--concurrency", "2", "--grace", "1s")
	client := sdkClient(srv.URL)

	var file bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&file, `{"custom_id":"line-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"writer","messages":[{"role":"user","content":"note %d"}],"max_tokens":20}}`+"\n", i, i)
	}
	f, err := client.Files.New(t.Context(), openai.FileNewParams{File: openai.File(&file, "requests.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	batch, err := client.Batches.New(t.Context(), openai.BatchNewParams{InputFileID: f.ID,
		Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatalf("create batch: %v", err)
	}

	// Kill it with calls in flight and some lines done.
	st := storetest.MustOpen(t, db, store.Options{NoMigrate: true})
	waitFor(t, "a line done and calls in flight", func() bool {
		return len(idsWhere(t, st, `status = 'done'`)) >= 1 && len(idsWhere(t, st, `status = 'running'`)) >= 1
	})
	srv.Signal(t, syscall.SIGKILL)
	srv = startServe(t, db, "--config", cfg, "--concurrency", "2", "--grace", "1s")
	client = sdkClient(srv.URL)

	// Recovery closed the dead calls as failed; retry them by hand.
	restarted := idsWhere(t, st, `status = 'failed' AND error_class = 'worker_restarted'`)
	if len(restarted) == 0 {
		t.Fatalf("no job closed by recovery after the kill")
	}
	for _, id := range restarted {
		resp, err := http.Post(fmt.Sprintf("%s/v1/jobs/%d/retry", srv.URL, id), "application/json", nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("retry job %d: %v %v", id, resp, err)
		}
		resp.Body.Close()
	}
	var got *openai.Batch
	waitFor(t, "the batch completed", func() bool {
		got, err = client.Batches.Get(t.Context(), batch.ID)
		return err == nil && got.Status == openai.BatchStatusCompleted && got.RequestCounts.Completed == lines
	})

	// The output, with the SDK: every line once, each a chat completion.
	res, err := client.Files.Content(t.Context(), got.OutputFileID)
	if err != nil {
		t.Fatalf("output %s: %v", got.OutputFileID, err)
	}
	defer res.Body.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		var line struct {
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int                   `json:"status_code"`
				Body       openai.ChatCompletion `json:"body"`
			} `json:"response"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("output line %s: %v", sc.Text(), err)
		}
		seen[line.CustomID]++
		if line.Response.StatusCode != http.StatusOK || len(line.Response.Body.Choices) != 1 || strings.TrimSpace(line.Response.Body.Choices[0].Message.Content) == "" {
			t.Errorf("output line %s: want status 200 and a chat completion with text", sc.Text())
		}
	}
	for i := range lines {
		if n := seen[fmt.Sprintf("line-%d", i)]; n != 1 {
			t.Errorf("line-%d appears %d times in the output, want once", i, n)
		}
	}

	// One charge per line, one bill per line.
	if n := countRowsIn(t, st, "charges"); n != lines {
		t.Errorf("%d charges for %d lines", n, lines)
	}
	ledger := sim.MustLedger(t)
	var bills int64
	for _, e := range ledger.Entries {
		bills += e.Bills
	}
	if bills != lines {
		t.Errorf("the provider billed %d times for %d lines (ledger %+v)", bills, lines, ledger.Entries)
	}
}

// waitFor polls cond until it holds, within waitLimit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", waitLimit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func idsWhere(t *testing.T, st *store.Store, where string) []int64 {
	t.Helper()
	rows, err := st.DB().QueryContext(t.Context(), `SELECT id FROM jobs WHERE `+where)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}
