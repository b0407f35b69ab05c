package worker

import (
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// Route is where a job's call goes: its model, the provider that serves
// it, that provider's limiter (one per provider: its rpm, tpm and 429
// pause), and whether the provider honours idempotency keys (which decides
// what automatic retry may do, docs/design.md §9).
type Route struct {
	Model       inkwell.Model
	Provider    inkwell.Provider
	Limiter     Limiter // nil: no limits
	HonoursKeys bool
}

// Router picks each job's route by the model it names ("" the default
// model). serve builds one from its config file (docs/providers.md).
type Router interface {
	Route(model string) (Route, error)
	// Limiters lists every provider's limiter, for the heartbeat's pause.
	Limiters() []Limiter
	// WorstCase is what accept reserved for work on model m: the most its
	// answer may be charged (chargeMicros caps the charge at it).
	WorstCase(w inkwell.Work, m inkwell.Model) int64
}

// route is the job's route: Config.Router's, or without one the lane's
// one provider and limiter.
func (l *Lane) route(model string) (Route, error) {
	if l.cfg.Router != nil {
		return l.cfg.Router.Route(model)
	}
	return Route{Model: inkwell.Model{Name: model, Upstream: model}, Provider: l.cfg.Provider,
		Limiter: l.cfg.Limiter, HonoursKeys: l.cfg.Retry.ProviderHonoursKeys}, nil
}

// limiters is every limiter the lane's calls wait on.
func (l *Lane) limiters() []Limiter {
	if l.cfg.Router != nil {
		return l.cfg.Router.Limiters()
	}
	if l.cfg.Limiter != nil {
		return []Limiter{l.cfg.Limiter}
	}
	return nil
}

// pausedUntil is the latest end of a 429 pause among the lane's
// providers (zero when none is paused).
func (l *Lane) pausedUntil() time.Time {
	var until time.Time
	for _, lim := range l.limiters() {
		if u := lim.PausedUntil(); u.After(until) {
			until = u
		}
	}
	return until
}

// retryPolicy is the lane's retry policy for j: whether a second call can
// spend money twice is the provider's to say.
func (l *Lane) retryPolicy(j *claimedJob) RetryPolicy {
	p := l.cfg.Retry
	if j.route != nil {
		p.ProviderHonoursKeys = j.route.HonoursKeys
	}
	return p
}

// providerRequest is the call for work w on route rt: the chat request
// with the upstream model name and the output bound in force, and what the
// simulators write from.
func providerRequest(key string, w inkwell.Work, rt Route) inkwell.ProviderRequest {
	chat := w.Chat
	chat.Model = rt.Model.Upstream
	chat.MaxOutputTokens = rt.Model.OutputBound(w.Chat)
	req := inkwell.ProviderRequest{IdempotencyKey: key, Chat: chat}
	if w.Short != nil {
		req.Prompt, req.MaxWords = w.Short.Prompt, w.Short.MaxWords
		return req
	}
	// Prompt stays empty: the simulators read the last user message from
	// Chat when they need it, so a call in flight holds no copy of it.
	if chat.MaxOutputTokens > 0 {
		req.MaxWords = max(1, chat.MaxOutputTokens/inkwell.TokensPerWord)
	}
	return req
}

// estimate is a call's token cost as a limiter sees it before the call:
// the short form as EstimateTokens has it; the chat form its input at
// about four bytes a token plus its output bound. The answer's usage
// corrects it afterwards (Limiter.Done).
func estimate(w inkwell.Work, req inkwell.ProviderRequest) int {
	if w.Short != nil || req.Chat.Fields == nil {
		return EstimateTokens(req)
	}
	return (req.Chat.InputBytes()+3)/4 + req.Chat.MaxOutputTokens
}

// chargeMicros is what an answer is charged on its route's model: a priced
// model charges its usage at the model's prices; an answer without usage
// its provable bound (every byte of the request a prompt token, and the
// answer's bytes, at most the output bound it was sent with, as completion
// tokens), which never passes what accept reserved. An unpriced model
// charges what the provider says it billed.
func chargeMicros(rt *Route, b callBounds, resp inkwell.ProviderResponse) int64 {
	if rt == nil || !rt.Model.Priced() {
		return resp.AmountMicros
	}
	if resp.Usage {
		return rt.Model.Cost(resp.PromptTokens, resp.CompletionTokens)
	}
	out := int64(len(resp.Text) + len(resp.Response))
	if b.outputBound > 0 {
		out = min(out, b.outputBound)
	}
	return rt.Model.Cost(b.inputBytes, out)
}

// capCharge holds a charge to the call's cap (Lane.chargeCap: its worst
// case, and its reservation): a user is never charged past the worst
// case the accept promised and the budget counted, whatever usage an
// answer reports. A provider's count past it (a miscount, tokens the request's
// bytes do not show, such as an image's) is the operator's to take up
// with the provider: the lane logs it, and the charge row keeps the
// reported counts as evidence. capped says the charge was lowered.
func capCharge(amount int64, b callBounds) (charged int64, capped bool) {
	if b.worstCase < 0 || amount <= b.worstCase {
		return amount, false
	}
	return b.worstCase, true
}

// callBounds is what the charge needs of a call's request: its size as
// InputBytes counts it, the output bound it was sent with, and the most
// it may be charged (Lane.chargeCap; -1: no cap). A claimed job keeps
// these numbers instead of the request.
type callBounds struct{ inputBytes, outputBound, worstCase int64 }

func boundsOf(req inkwell.ProviderRequest, worstCase int64) callBounds {
	return callBounds{int64(req.Chat.InputBytes()), int64(req.Chat.MaxOutputTokens), worstCase}
}

// chargeCap is the most job c's answer to w on rt may be charged: the
// worst case of the request as it is sent (Router.WorstCase), and never
// more than the reservation the job holds (the store caps the charge at
// it too: a price raised since the accept, or a request whose stored
// form counts more bytes than the body accept measured). -1: no cap, a
// lane without a Router for a job without a reservation, whose
// provider's word is the charge.
func (l *Lane) chargeCap(c *store.Claimed, w inkwell.Work, rt Route) int64 {
	limit := int64(-1)
	if l.cfg.Router != nil {
		limit = l.cfg.Router.WorstCase(w, rt.Model)
	}
	if c.Reserved && (limit < 0 || c.ReservedMicros < limit) {
		limit = c.ReservedMicros
	}
	return limit
}
