package provider_test

// A reviewer's tests of the day's last changes (lastrev). Every bug they
// showed is fixed (see git log); where a comment below says what the code
// does wrong, it tells how it was when the test was written.

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

// TestAnthLastrev_EmptyTurnsAfterAnswerStillBecomePrefill: ce285c4 refuses
// an empty LAST user turn (toMessages, anthropic_request.go), but only when
// that turn is the last non-system message (lastTurn). Follow the empty
// user turn with an empty assistant turn and both are dropped (the
// assistant one as "an empty turn", the user one as "between others"):
// the request sent ends with the assistant's earlier "Red.", which the
// Messages API continues as a prefill, and the job is answered (and
// charged) for another request than the one sent, the very case the fix
// meant to close. Right behaviour: refuse (or keep a user turn last)
// whenever dropping empty turns leaves an assistant turn last that the
// client did not send last with content; e.g. judge "empty last turn"
// after dropping the trailing empty turns, not on the last message alone.
func TestAnthLastrev_EmptyTurnsAfterAnswerStillBecomePrefill(t *testing.T) {
	t.Parallel()
	for name, chat := range map[string]string{
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
				inkwell.ProviderRequest{IdempotencyKey: "job-lastrev-empty", Chat: c}); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			_, msgs, raw := sentMessages(t, srv)
			if last := msgs[len(msgs)-1]; last.Role != "user" {
				t.Errorf("chat %s\naccepted and sent as %s\nit ends with the assistant's earlier answer, a prefill the model continues; want it refused at accept", chat, raw)
			}
		})
	}
}

// TestAnthLastrev_EmptyLastUserTurnAfterUserTurn: [user "hi", user ""]
// left without its empty turn ends on the user's "hi": no prefill, and the
// Messages API answers it (as it was sent before ce285c4). The new check
// refuses it anyway, saying "the answer before it would be continued",
// which is not so: there is no answer before it. Such a job stored before
// the upgrade now fails at the lane (rejected) instead of running. Right
// behaviour (arguable; stricter than needed rather than wrong): refuse
// only when what precedes the dropped turn is an assistant turn.
func TestAnthLastrev_EmptyLastUserTurnAfterUserTurn(t *testing.T) {
	t.Parallel()
	c := mustChat(t, `{"messages":[{"role":"user","content":"Name a colour."},{"role":"user","content":""}]}`)
	if err := provider.CheckMessages(c); err != nil {
		t.Errorf("CheckMessages refused [user, empty user]: %v; dropping the empty turn leaves a request ending on a user turn, which is no prefill", err)
	}
}
