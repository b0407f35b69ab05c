package api

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/limiter"
)

// accountRPMRecheckDefault is how long the server trusts an account's rpm
// before reading it again: 'inkwell accounts set NAME --rpm N' takes effect
// in a running server within this time.
const accountRPMRecheckDefault = 5 * time.Second

// accountLimits is admission's per-account rpm (docs/design.md §10): each new
// request of an account with an rpm takes a place in a sliding minute of
// this process (limiter.Window); a request that created no job (a
// re-send, a refusal) gives its place back.
type accountLimits struct {
	window  *limiter.Window
	recheck time.Duration

	mu   sync.Mutex
	rpms map[string]cachedRPM
}

type cachedRPM struct {
	rpm int
	at  time.Time
}

func newAccountLimits(recheck time.Duration) *accountLimits {
	if recheck <= 0 {
		recheck = accountRPMRecheckDefault
	}
	return &accountLimits{window: limiter.NewWindow(), recheck: recheck, rpms: make(map[string]cachedRPM)}
}

// rpmOf is account's rpm, read at most once per recheck interval (0: no
// limit, or no such account).
func (l *accountLimits) rpmOf(ctx context.Context, st jobStore, account string) (int, error) {
	now := time.Now()
	l.mu.Lock()
	c, ok := l.rpms[account]
	l.mu.Unlock()
	if ok && now.Sub(c.at) < l.recheck {
		return c.rpm, nil
	}
	a, err := st.Account(ctx, account)
	switch inkwell.ErrorCode(err) {
	case "":
	case inkwell.ENOTFOUND:
		a.RPM = 0
	default:
		return 0, err
	}
	l.mu.Lock()
	if len(l.rpms) >= maxCachedRPMs {
		l.sweep(now)
	}
	l.rpms[account] = cachedRPM{rpm: a.RPM, at: now}
	l.mu.Unlock()
	return a.RPM, nil
}

// maxCachedRPMs bounds the cache of accounts' rpm. Without tokens a body
// may name any account, one that has no row too: each name sent would
// stay in the cache for the life of the process.
const maxCachedRPMs = 10_000

// sweep drops the entries older than the recheck interval (they would be
// read again anyway), and every entry when that is not enough: it is a
// cache. Called with l.mu held.
func (l *accountLimits) sweep(now time.Time) {
	for k, c := range l.rpms {
		if now.Sub(c.at) >= l.recheck {
			delete(l.rpms, k)
		}
	}
	if len(l.rpms) >= maxCachedRPMs {
		clear(l.rpms)
	}
}

// admission is one request's place in its account's rpm.
type admission struct {
	account    string
	ticket     time.Time
	refusal    error         // set when the account's rpm is used up
	retryAfter time.Duration // with refusal: when a place frees up
}

// admit takes a place for a new request of account, or says when one
// frees up. The refusal applies to a new key only: the store still
// answers a re-send (store.AcceptParams.Refuse).
func (s *Server) admit(ctx context.Context, account string) (admission, error) {
	rpm, err := s.rpm.rpmOf(ctx, s.cfg.Store, account)
	if err != nil {
		return admission{}, err
	}
	ticket, wait, ok := s.rpm.window.Take(account, rpm)
	if ok {
		return admission{account: account, ticket: ticket}, nil
	}
	return admission{account: account, retryAfter: wait, refusal: inkwell.Errorf(inkwell.ETOOMANY,
		"account %q may send %d new requests a minute and has sent them: nothing was stored; send the same request again in %s", account, rpm, wait.Round(time.Second))}, nil
}

// admitted gives the place back when the request created no job.
func (s *Server) admitted(a admission, created bool) {
	if !created {
		s.rpm.window.GiveBack(a.account, a.ticket)
	}
}

// underRPM runs accept, a store accept of one request (a job, or a whole
// batch), in a place of account's rpm: accept gets the refusal to pass on
// (nil while there is room), the place is given back when nothing was
// created, and a refusal by the rpm gets its Retry-After.
func (s *Server) underRPM(w http.ResponseWriter, r *http.Request, account string, accept func(refuse error) (created bool, err error)) error {
	adm, err := s.admit(r.Context(), account)
	if err != nil {
		return err
	}
	created, err := accept(adm.refusal)
	s.admitted(adm, created)
	if err != nil && err == adm.refusal {
		setRetryAfter(w, adm.retryAfter)
	}
	return err
}

// setRetryAfter sets Retry-After, in whole seconds (at least 1), for a
// refusal by an account's rpm.
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(d.Seconds())))))
}

// reserve checks work against the catalog (a known model, fields its
// provider can carry, an output limit within the model's) and returns what
// it reserves against its account's budget. Nothing is written before it.
func (s *Server) reserve(w inkwell.Work) (int64, error) {
	var m inkwell.Model
	if s.cfg.Catalog != nil {
		var err error
		if m, err = s.cfg.Catalog.Check(w.Chat); err != nil {
			return 0, err
		}
	}
	if s.cfg.WorstCase == nil {
		return 0, nil
	}
	r := s.cfg.WorstCase(w, m)
	if r < 0 || r > inkwell.MaxChargeMicros {
		return 0, inkwell.Errorf(inkwell.EINVALID, "this request could cost more than one job may (%d micros at most): ask for fewer output tokens (max_completion_tokens)", int64(inkwell.MaxChargeMicros))
	}
	return r, nil
}
