package provider_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

// TestAnthTodayrev_EmptyFinalUserTurnBecomesPrefill: today's mapping
// leaves out a turn with no content ("an empty turn: the Messages API
// refuses empty content, and it says nothing"). That holds between two
// turns, but not for the LAST turn: a conversation
//
//	user "Name a colour." / assistant "Red." / user ""   (or "  ")
//
// asks for a reply to the user's (empty) last turn; with the user turn
// dropped, the Messages API request ends with the assistant's earlier
// reply, which the Messages API reads as a prefill: the model continues
// "Red." instead of answering, and the job is done and charged for an
// answer to another request than the one sent (its trailing white space
// is even trimmed, as if it were the client's prefill). Before today the
// same request was sent with the empty turn and refused (rejected,
// nothing billed).
//
// Right behaviour: a request whose last user/tool turn has no content is
// refused at accept (provider.CheckMessages, 400, nothing written), or
// its mapping still ends on a user turn; never silently made a prefill.
// Found in review and fixed: toMessages refuses an empty last user turn
// (it sent the request ending with the assistant's "Red.").
func TestAnthTodayrev_EmptyFinalUserTurnBecomesPrefill(t *testing.T) {
	t.Parallel()
	for name, chat := range map[string]string{
		"EmptyString":    `{"messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"Red."},{"role":"user","content":""}]}`,
		"WhitespaceOnly": `{"messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"Red. "},{"role":"user","content":"  \n"}]}`,
		"EmptyParts":     `{"messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"Red."},{"role":"user","content":[]}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := mustChat(t, chat)
			if err := provider.CheckMessages(c); err != nil {
				return // refused at accept: right
			}
			srv := startCapture(t, http.StatusOK, okMessage, nil)
			if _, err := mustAnthropic(t, srv.URL, 10*time.Second).Generate(context.Background(),
				inkwell.ProviderRequest{IdempotencyKey: "job-final-empty", Chat: c}); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			_, msgs, raw := sentMessages(t, srv)
			if last := msgs[len(msgs)-1]; last.Role != "user" {
				t.Errorf("chat %s\naccepted (CheckMessages nil) and sent as %s\nthe request sent ends with an %s turn: the Messages API "+
					"continues it as a prefill instead of answering the user's last turn; want it refused at accept "+
					"(the last user turn has no content) or sent ending on a user turn", chat, raw, last.Role)
			}
		})
	}
}
