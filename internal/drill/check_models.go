package drill

import (
	"encoding/json"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/store"
)

// What the checker asks of a job's model and provider (docs/design.md §7,
// §12): a provider that honours no idempotency key may bill a job again
// only for an answer lost, a priced model charges the answer's usage at
// its prices, and accept reserves the provable worst case.

// jobRoute is where a job ran, as the catalog says: its model, whether
// serve trusted its provider to honour keys (a timeout or shutdown is then
// retry-safe), and whether the provider bills every call it answers (the
// Messages API) rather than answering a repeated key from its record.
type jobRoute struct {
	model       inkwell.Model
	kind        string
	honoursKeys bool
	unkeyed     bool
}

// route is job j's route: its payload's model (kept by prune) looked up
// in the catalog. Without a catalog, every job ran on one openai provider
// whose bills are keyed, unpriced, trusted as Evidence.HonoursKeys says.
func (c *checker) route(j JobRow) jobRoute {
	if c.cat == nil {
		return jobRoute{kind: catalog.KindOpenAI, honoursKeys: c.honoursKeys}
	}
	var named struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal([]byte(j.Payload), &named) // a payload that is no object names no model
	m, p, err := c.cat.Lookup(named.Model)
	if err != nil {
		// Accept refuses an unknown model, so no job names one; judge it on
		// the default model, whose provider's kind its bills then contradict.
		m, p, _ = c.cat.Lookup("")
	}
	return jobRoute{model: m, kind: p.Kind, honoursKeys: p.HonoursKeys, unkeyed: p.Kind == catalog.KindAnthropic}
}

// mayHaveLostAnswer says whether an attempt that failed with class may
// have had its call answered, and billed, with the answer never stored:
// the process died (worker_restarted), stopped (shutdown) or gave up
// waiting (timeout) while the call was out, or a cancel aborted it.
func mayHaveLostAnswer(class inkwell.ErrorClass) bool {
	switch class {
	case inkwell.ClassWorkerRestarted, inkwell.ClassShutdown, inkwell.ClassTimeout, inkwell.ClassCancelled:
		return true
	}
	return false
}

// unkeyedBills checks the bills of a job whose provider honours no key:
// one for the answer stored (or being fetched), and one more for each
// attempt whose answer may have been lost, at most. This is the window of
// docs/design.md §7 (a second call after a death between the answer and
// the completion commit); invariant 2 still charges the user once.
func (c *checker) unkeyedBills(j JobRow, key string, b billing) {
	var lost int64
	for _, a := range c.snap.attemptsOf(j.ID) {
		if a.Status == inkwell.StatusFailed && mayHaveLostAnswer(inkwell.ErrorClass(a.ErrorClass.String)) {
			lost++
		}
	}
	if b.bills > 1+lost {
		c.add(j.ID, InvUnkeyedBills, "provider key %s, which its provider does not honour, was billed %d times (%d calls), but only %d attempt(s) may have lost an answer: at most %d bill(s)",
			key, b.bills, b.calls, lost, 1+lost)
	}
}

// pricedCharge checks a charge on a priced model against the ledger entry
// e it names: the charge names the model and keeps the answer's usage,
// its completion tokens are the provider's count of the billed text, its
// prompt tokens (while the prompt is kept) the count of the prompt sent,
// and its amount is that usage at the model's prices.
func (c *checker) pricedCharge(j JobRow, rt jobRoute, ch ChargeRow, e providersim.LedgerEntry) {
	m := rt.model
	switch {
	case ch.Model.String != m.Name:
		c.add(j.ID, InvPricedCharge, "charge names model %q, the job runs on %q", ch.Model.String, m.Name)
		return
	case !ch.PromptTokens.Valid || !ch.CompletionTokens.Valid:
		c.add(j.ID, InvPricedCharge, "charge keeps no usage (prompt_tokens %v, completion_tokens %v), though the provider reported it", ch.PromptTokens, ch.CompletionTokens)
		return
	}
	in, out := ch.PromptTokens.Int64, ch.CompletionTokens.Int64
	if want := int64(provider.UsageOf("", e.Text).CompletionTokens); out != want {
		c.add(j.ID, InvPricedCharge, "charge counts %d completion tokens; the provider counts %d for the text it billed in request %s", out, want, e.RequestID)
	}
	if prompt, ok := promptSent(j); ok {
		if want := int64(provider.UsageOf(prompt, "").PromptTokens); in != want {
			c.add(j.ID, InvPricedCharge, "charge counts %d prompt tokens; the provider counts %d for the prompt sent", in, want)
		}
	}
	if want := m.Cost(in, out); ch.AmountMicros != want {
		c.add(j.ID, InvPricedCharge, "charge is %d micros; %d prompt and %d completion tokens at %d and %d micros per million tokens on %s cost %d",
			ch.AmountMicros, in, out, m.InputMicrosPerMTok, m.OutputMicrosPerMTok, m.Name, want)
	}
}

// promptSent is the prompt a simulator reads from job j's request (its
// last user message), while the payload keeps it.
func promptSent(j JobRow) (string, bool) {
	if isPruned(j) {
		return "", false
	}
	w, err := inkwell.ReadPayload([]byte(j.Payload))
	if err != nil {
		return "", false
	}
	return w.Chat.LastUserText(), true
}

// reservations checks, on one snapshot, that each job's reservation is
// what accept must reserve on its model (provider.WorstCaseMicros: on a
// priced model, inkwell.Model.WorstCase), while its payload is whole.
// Without a catalog the checker does not know the models, and says nothing.
func (c *checker) reservations() {
	if c.cat == nil {
		return
	}
	for _, r := range c.snap.Reservations {
		j, ok := c.snap.job(r.JobID)
		if !ok || isPruned(j) {
			continue
		}
		w, err := inkwell.ReadPayload([]byte(j.Payload))
		if err != nil {
			continue // InvOneJobPerKey and the API's own checks speak for a payload gone wrong
		}
		rt := c.route(j)
		// Neither a sim nor priced per token, as the drill's openai provider.
		if want := provider.WorstCaseMicros(nil, rt.model, w); r.Micros != want {
			c.add(j.ID, InvReservedWorst, "job reserves %s (%d micros) on model %s; its worst case there is %d micros", store.Amount(r.Micros), r.Micros, rt.model.Name, want)
		}
	}
}
