package api_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
)

// tokenWasUsed says whether the token whose secret is text has a
// last_used_at once the pending marks are written (false: never used).
func tokenWasUsed(t *testing.T, se *secEnv, text string) bool {
	t.Helper()
	if err := se.st.FlushTokenUse(t.Context()); err != nil {
		t.Fatal(err)
	}
	toks, err := se.st.Tokens(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	id := text[len("ink_") : len("ink_")+16]
	for _, tk := range toks {
		if tk.ID == id {
			return tk.LastUsedAt != nil
		}
	}
	t.Fatalf("token %s not listed", id)
	return false
}

// TestSecurity_ChatCompletionThatStoredAJobMarksTokenUsed: docs/security.md
// says last_used_at is how an operator rotating tokens sees which are
// still in use ("tokens list shows when each was last used"), and only "a
// request that is refused does not count as a use". A POST
// /v1/chat/completions that STORED a job (which will run and spend the
// account's money) but answers 504 still_queued (its --sync-wait ran out),
// or answers a failed job's status (409 for a cancelled one), was not
// refused: the token was used to spend money, and must be marked used.
// Were a token marked used only when the handler's status is < 400 (as
// guard(), auth.go, once did), a client that only ever gets 504s (slow
// provider) or failed jobs would look unused and be revoked by a
// rotation. So the accept marks the request (auth.go, stored).
func TestSecurity_ChatCompletionThatStoredAJobMarksTokenUsed(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	_, fresh, err := se.st.CreateToken(t.Context(), "acme", store.RoleClient)
	if err != nil {
		t.Fatal(err)
	}
	se.secrets = append(se.secrets, fresh[len(fresh)-64:])
	if tokenWasUsed(t, se, fresh) {
		t.Fatal("a fresh token is marked used before any request")
	}
	before := se.counts()["jobs"]
	r := se.req(http.MethodPost, "/v1/chat/completions", "Bearer "+fresh,
		map[string]string{"Idempotency-Key": "token-use-chat-1"}, []byte(`{"messages":[{"role":"user","content":"a poem"}]}`))
	if r.status != http.StatusGatewayTimeout {
		t.Fatalf("chat completion with no lane: %d %s, want 504 (the sync wait runs out)", r.status, r.body)
	}
	after := se.counts()["jobs"]
	if after != before+1 {
		t.Fatalf("the chat completion stored no job: jobs %d -> %d", before, after)
	}
	if !tokenWasUsed(t, se, fresh) {
		t.Errorf("a chat completion that stored a job (and answered 504 still_queued) did not mark its token used: " +
			"'tokens list' shows the token as never used although it spends the account's money")
	}

	// A re-send (same key, same body) of a job that has since failed
	// (cancelled): the answer is the failed job's 409, a use all the same.
	_, fresh2, err := se.st.CreateToken(t.Context(), "acme", store.RoleClient)
	if err != nil {
		t.Fatal(err)
	}
	se.secrets = append(se.secrets, fresh2[len(fresh2)-64:])
	id, _ := strconv.ParseInt(r.header.Get("Inkwell-Job-Id"), 10, 64)
	if _, err := se.st.Cancel(t.Context(), id, "test"); err != nil {
		t.Fatal(err)
	}
	r = se.req(http.MethodPost, "/v1/chat/completions", "Bearer "+fresh2,
		map[string]string{"Idempotency-Key": "token-use-chat-1"}, []byte(`{"messages":[{"role":"user","content":"a poem"}]}`))
	if r.status != http.StatusConflict {
		t.Fatalf("re-send of a cancelled chat job: %d %s, want 409", r.status, r.body)
	}
	if !tokenWasUsed(t, se, fresh2) {
		t.Errorf("a chat completion answered with its (failed) job did not mark its token used")
	}
}
