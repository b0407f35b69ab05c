package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestOpenAISDK_Batches: the official OpenAI Go SDK, which nobody here
// wrote, runs the Files and Batches API against an in-process `inkwell
// serve` (the sim provider) with only its base URL and key changed: a
// client token uploads a batch file of chat requests, makes a batch of
// it, reads it until it is completed, and reads its output file; lists
// its batches; and cancels a second batch while it runs.
func TestOpenAISDK_Batches(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inkwell.db")
	token := mustClientToken(t, db, "acme")
	m, err := OpenMain(t.Context(), MainConfig{DB: db, Addr: "127.0.0.1:0", Lane: "local", Grace: 5 * time.Second,
		Heartbeat: 100 * time.Millisecond, Poll: 50 * time.Millisecond, Rescue: time.Second, Concurrency: 4,
		Provider: provider.NewSim(20 * time.Millisecond), ProviderName: "sim"})
	if err != nil {
		t.Fatalf("OpenMain: %v", err)
	}
	defer m.Close()
	url, stop := runMain(t, m)
	defer stop()
	client := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey(token), option.WithMaxRetries(0))
	ctx := t.Context()

	f, err := client.Files.New(ctx, openai.FileNewParams{
		File:    openai.File(strings.NewReader(chatRequests("line", 3)), "requests.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch,
	})
	if err != nil {
		t.Fatalf("Files.New: %v", err)
	}
	if f.Filename != "requests.jsonl" || f.Bytes != int64(len(chatRequests("line", 3))) || f.Purpose != openai.FileObjectPurposeBatch {
		t.Errorf("file %+v; want requests.jsonl, its bytes, purpose batch", f)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{
		InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h, Metadata: map[string]string{"run": "sdk"},
	})
	if err != nil {
		t.Fatalf("Batches.New: %v", err)
	}
	if b.InputFileID != f.ID || b.RequestCounts.Total != 3 || b.Metadata["run"] != "sdk" {
		t.Errorf("batch %+v; want 3 requests of file %s, the metadata", b, f.ID)
	}
	storetest.WaitFor(t, waitLimit, "the batch completed", func() bool {
		got, err := client.Batches.Get(ctx, b.ID)
		if err != nil {
			t.Fatalf("Batches.Get: %v", err)
		}
		b = got
		return b.Status == openai.BatchStatusCompleted
	})
	if b.RequestCounts.Completed != 3 || b.OutputFileID == "" || b.ErrorFileID != "" || b.CompletedAt == 0 {
		t.Fatalf("completed batch %+v; want 3 completed, an output file, no error file", b)
	}
	assertOutput(t, client, b.OutputFileID, "line", 3)

	// A second batch, cancelled while its lines run.
	f2, err := client.Files.New(ctx, openai.FileNewParams{File: strings.NewReader(chatRequests("more", 200)), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatalf("Files.New: %v", err)
	}
	b2, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f2.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatalf("Batches.New: %v", err)
	}
	c, err := client.Batches.Cancel(ctx, b2.ID)
	if err != nil {
		t.Fatalf("Batches.Cancel: %v", err)
	}
	if (c.Status != openai.BatchStatusCancelled && c.Status != openai.BatchStatusCancelling) || c.CancellingAt == 0 || c.RequestCounts.Failed == 0 {
		t.Errorf("cancelled batch %+v; want cancelling or cancelled, its lines failed", c)
	}
	storetest.WaitFor(t, waitLimit, "the second batch cancelled", func() bool {
		got, err := client.Batches.Get(ctx, b2.ID)
		if err != nil {
			t.Fatalf("Batches.Get: %v", err)
		}
		c = got
		return c.Status == openai.BatchStatusCancelled
	})
	if c.CancelledAt == 0 || c.RequestCounts.Completed+c.RequestCounts.Failed != 200 || c.ErrorFileID == "" {
		t.Errorf("cancelled batch %+v; want every line ended, an error file", c)
	}

	page, err := client.Batches.List(ctx, openai.BatchListParams{Limit: openai.Int(1)})
	if err != nil {
		t.Fatalf("Batches.List: %v", err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != b2.ID || !page.HasMore {
		t.Fatalf("first page %+v; want the newest batch, %s, and more", page.Data, b2.ID)
	}
	next, err := page.GetNextPage()
	if err != nil || next == nil || len(next.Data) != 1 || next.Data[0].ID != b.ID || next.HasMore {
		t.Errorf("next page %+v, %v; want %s and no more", next, err, b.ID)
	}

	_, err = client.Files.Get(ctx, "file-000000000000000000000000")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("Files.Get of no file: %v; want the SDK's 404", err)
	}

	// The cleanup a team's script does once a batch is done: list the
	// uploads a page at a time (the SDK's auto-pager follows after), and
	// delete them; the batches made of them stay whole.
	var listed []string
	iter := client.Files.ListAutoPaging(ctx, openai.FileListParams{Limit: openai.Int(1), Purpose: openai.String("batch")})
	for iter.Next() {
		listed = append(listed, iter.Current().ID)
	}
	if err := iter.Err(); err != nil || !slices.Equal(listed, []string{f2.ID, f.ID}) {
		t.Fatalf("Files.ListAutoPaging = %v, %v; want %s then %s (newest first)", listed, err, f2.ID, f.ID)
	}
	for _, id := range listed {
		del, err := client.Files.Delete(ctx, id)
		if err != nil || !del.Deleted || del.ID != id {
			t.Errorf("Files.Delete(%s) = %+v, %v; want deleted", id, del, err)
		}
	}
	if _, err := client.Files.Get(ctx, f.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("Files.Get of a deleted file: %v; want the SDK's 404", err)
	}
	if left, err := client.Files.List(ctx, openai.FileListParams{}); err != nil || len(left.Data) != 0 {
		t.Errorf("Files.List after deleting both: %+v, %v; want none", left, err)
	}
	got, err := client.Batches.Get(ctx, b.ID)
	if err != nil || got.RequestCounts.Total != 3 || got.InputFileID != f.ID {
		t.Fatalf("the batch after its file was deleted: %+v, %v; want its 3 lines", got, err)
	}
	assertOutput(t, client, got.OutputFileID, "line", 3)

	// An upload that goes two hours after it is stored (expires_after, as
	// the SDK sends it): its expires_at says when.
	f3, err := client.Files.New(ctx, openai.FileNewParams{File: strings.NewReader(chatRequests("later", 1)), Purpose: openai.FilePurposeBatch,
		ExpiresAfter: openai.FileNewParamsExpiresAfter{Seconds: 7200}})
	if err != nil || f3.ExpiresAt != f3.CreatedAt+7200 {
		t.Errorf("Files.New with expires_after 7200 s: %+v, %v; want expires_at created_at+7200", f3, err)
	}
	if f3, err = client.Files.Get(ctx, f3.ID); err != nil || f3.ExpiresAt != f3.CreatedAt+7200 {
		t.Errorf("Files.Get of it: %+v, %v; want expires_at created_at+7200", f3, err)
	}
}

// mustClientToken makes account and a client token of it in the database
// at db (made here), and returns the token: serve then requires one.
func mustClientToken(t *testing.T, db, account string) string {
	t.Helper()
	st := storetest.MustOpen(t, db, store.Options{})
	if _, err := st.CreateAccount(t.Context(), store.Account{Name: account}); err != nil {
		t.Fatal(err)
	}
	_, token, err := st.CreateToken(t.Context(), account, store.RoleClient)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return token
}

// chatRequests is a batch input file of n chat requests, custom_ids
// prefix-1 … prefix-n.
func chatRequests(prefix string, n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"custom_id":"%s-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"a haiku about ink, number %d"}],"max_tokens":60}}`+"\n", prefix, i, i)
	}
	return b.String()
}

// assertOutput reads an output file through the SDK: one line per
// request, in order, each a 200 whose body is a chat completion with text.
func assertOutput(t *testing.T, client openai.Client, fileID, prefix string, n int) {
	t.Helper()
	resp, err := client.Files.Content(t.Context(), fileID)
	if err != nil {
		t.Fatalf("Files.Content: %v", err)
	}
	defer resp.Body.Close()
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var line struct {
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int                   `json:"status_code"`
				Body       openai.ChatCompletion `json:"body"`
			} `json:"response"`
			Error *struct{ Code string } `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("output line %s: %v", sc.Bytes(), err)
		}
		if line.Response.StatusCode != http.StatusOK || line.Error != nil || len(line.Response.Body.Choices) == 0 || line.Response.Body.Choices[0].Message.Content == "" {
			t.Errorf("output line %s; want a 200 with a chat completion's text", sc.Bytes())
		}
		got = append(got, line.CustomID)
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("%s-%d", prefix, i+1)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("output custom_ids %v, want %v", got, want)
	}
}
