package providersim_test

// Adversary pass (anthropic): the simulator's Messages API is what every
// offline test of the Anthropic provider runs against, so what it takes
// and bills must be what the real Messages API takes and bills.

import (
	"net/http"
	"strings"
	"testing"

	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
)

// TestAnthAdv_SimRefusesWhatTheMessagesAPIRefuses (found in review, fixed: checkContent): bodies the
// real Messages API answers 400 invalid_request_error (unbilled), which
// the simulator answers 200 and bills. Among them are exactly the bodies
// Inkwell's mapping sends for an empty turn ("content": null), a white
// space part, or a prefill ending in white space
// (internal/provider/anthropic_anthadv_test.go): tests against the
// simulator see those jobs done and charged, where the real API fails
// them. A temperature above 1 is refused too (Inkwell refuses it at
// accept; the simulator should not be the one place it passes).
//
// Right behaviour: decodeMessages (providersim/messages.go) checks what
// the real API checks: content a string or a non-empty list (empty only
// for a final assistant turn), no text block of white space only, no
// final assistant text ending in white space, temperature and top_p in
// 0..1; 400 invalid_request_error, nothing billed.
func TestAnthAdv_SimRefusesWhatTheMessagesAPIRefuses(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	const head = `{"model":"claude-x","max_tokens":8,`
	for _, tc := range []struct{ name, body string }{
		{"NullContent", head + `"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null},{"role":"user","content":"again"}]}`},
		{"EmptyContentList", head + `"messages":[{"role":"user","content":[]},{"role":"assistant","content":"ok"},{"role":"user","content":"go"}]}`},
		{"WhitespaceTextBlock", head + `"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":"\n"}]}]}`},
		{"PrefillTrailingWhitespace", head + `"messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":[{"type":"text","text":"The colour is "}]}]}`},
		{"TemperatureAboveOne", head + `"temperature":1.5,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		status, body := postMessage(t, sim.URL, "2023-06-01", tc.body)
		if status != http.StatusBadRequest || !strings.Contains(body, "invalid_request_error") {
			t.Errorf("%s: simulator answered %d %.120s; the Messages API answers 400 invalid_request_error, unbilled", tc.name, status, body)
		}
	}
	if got := sim.MustLedger(t).TotalBills; got != 0 {
		t.Errorf("the simulator billed %d calls the Messages API refuses", got)
	}
}
