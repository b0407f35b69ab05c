package provider_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

// TestAnthropic_EmptyLastTurnIsNeverSentAsPrefill: the mapping leaves out
// a turn with no content ("an empty turn: the Messages API refuses empty
// content, and it says nothing"). That holds between two turns, but not
// for the LAST turn: a conversation
//
//	user "Name a colour." / assistant "Red." / user ""   (or "  ")
//
// asks for a reply to the user's (empty) last turn; with the user turn
// dropped, the Messages API request would end with the assistant's earlier
// reply, which the Messages API reads as a prefill: the model continues
// "Red." instead of answering, and the job is done and charged for an
// answer to another request than the one sent (its trailing white space
// even trimmed, as if it were the client's prefill).
//
// The same holds when the empty user turn is followed by an empty
// assistant turn: both are dropped (the assistant one as "an empty turn",
// the user one as "between others"), and what is sent ends with "Red.".
// So "empty last turn" must be judged after the trailing empty turns are
// dropped, not on the last message alone.
//
// What must happen: such a request is refused at accept
// (provider.CheckMessages, 400, nothing written; toMessages refuses it
// the same way in the worker), or its mapping still ends on a user turn;
// never silently made a prefill. TestAccept_AnthropicEmptyFinalUserTurnIsRefused
// (internal/api) is the accept side.
func TestAnthropic_EmptyLastTurnIsNeverSentAsPrefill(t *testing.T) {
	t.Parallel()
	for name, chat := range map[string]string{
		// The empty turn is the last message.
		"EmptyString":    `{"messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"Red."},{"role":"user","content":""}]}`,
		"WhitespaceOnly": `{"messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"Red. "},{"role":"user","content":"  \n"}]}`,
		"EmptyParts":     `{"messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"Red."},{"role":"user","content":[]}]}`,
		// An empty assistant turn follows the empty user turn.
		"EmptyUserThenEmptyAssistant": `{"messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"Red."},{"role":"user","content":""},{"role":"assistant","content":""}]}`,
		"BlankUserThenBlankAssistant": `{"messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"Red."},{"role":"user","content":" "},{"role":"assistant","content":"\n"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := mustChat(t, chat)
			if err := provider.CheckMessages(c); err != nil {
				return // refused at accept: right
			}
			srv := startCapture(t, http.StatusOK, okMessage, nil)
			if _, err := mustAnthropic(t, srv.URL, 10*time.Second).Generate(context.Background(),
				inkwell.ProviderRequest{IdempotencyKey: "job-empty-last-turn", Chat: c}); err != nil {
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

// TestCheckMessages_EmptyLastUserTurnAfterUserTurnIsAccepted: [user "hi",
// user ""] left without its empty turn ends on the user's "hi": no
// prefill, and the Messages API answers it. The empty-last-turn check must
// not refuse it (saying "the answer before it would be continued", when
// there is no answer before it): a job stored before that check existed
// would then fail at the lane (rejected) instead of running. Refused only
// when what precedes the dropped turn is an assistant turn.
func TestCheckMessages_EmptyLastUserTurnAfterUserTurnIsAccepted(t *testing.T) {
	t.Parallel()
	c := mustChat(t, `{"messages":[{"role":"user","content":"Name a colour."},{"role":"user","content":""}]}`)
	if err := provider.CheckMessages(c); err != nil {
		t.Errorf("CheckMessages refused [user, empty user]: %v; dropping the empty turn leaves a request ending on a user turn, which is no prefill", err)
	}
}
