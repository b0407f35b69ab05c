package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// Authentication and authorization (docs/design.md §10): each route
// declares who may call it (routes.go: public, client, operator); a client
// token sees its own account's rows only, another's being 404. The table
// of who may do what is docs/security.md's.

// AuthMode is serve --auth.
type AuthMode string

const (
	// AuthAuto requires tokens as soon as one exists (the default).
	AuthAuto AuthMode = "auto"
	// AuthRequired always requires a token.
	AuthRequired AuthMode = "required"
	// AuthOff never asks for one; serve allows it on loopback only.
	AuthOff AuthMode = "off"
)

// ParseAuthMode reads serve --auth ("" is auto).
func ParseAuthMode(s string) (AuthMode, error) {
	switch m := AuthMode(s); m {
	case "":
		return AuthAuto, nil
	case AuthAuto, AuthRequired, AuthOff:
		return m, nil
	}
	return "", inkwell.Errorf(inkwell.EINVALID, "--auth must be auto, required or off, not %q", s)
}

// authRecheckDefault is how long auto mode trusts "no token exists" before
// it reads api_tokens again. Once a token exists, auto never reads again:
// tokens are never deleted (a revoked one keeps its row).
const authRecheckDefault = 2 * time.Second

// tokenStore is what authentication needs of the store.
type tokenStore interface {
	VerifyToken(ctx context.Context, presented string) (store.Token, error)
	TokensExist(ctx context.Context) (bool, error)
	TokenUsed(id string)
}

// access is what a route asks of its caller.
type access int

const (
	public   access = iota // anyone
	client                 // any valid token (a client sees its own account only)
	operator               // an operator token
)

// authGate decides whether tokens are in force.
type authGate struct {
	mode    AuthMode
	tokens  tokenStore
	recheck time.Duration
	exist   atomic.Bool  // auto: a token exists (never goes back to false)
	checked atomic.Int64 // auto: when "no token" was last read (UnixNano; 0: never)
	mu      sync.Mutex   // one reader of api_tokens at a time
}

// inForce reports whether this request needs a token. An error (the
// database could not say) refuses the request rather than guess. In auto
// mode the answer "no token" is trusted for recheck without a read or a
// lock, so a server without tokens pays two atomic loads per request.
func (g *authGate) inForce(ctx context.Context) (bool, error) {
	switch g.mode {
	case AuthOff:
		return false, nil
	case AuthRequired:
		return true, nil
	}
	if g.exist.Load() {
		return true, nil
	}
	if g.fresh() {
		return false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.exist.Load() {
		return true, nil
	}
	if g.fresh() {
		return false, nil // another request read it while this one waited
	}
	exist, err := g.tokens.TokensExist(ctx)
	if err != nil {
		return false, fmt.Errorf("auth: are tokens in force: %w", err)
	}
	g.exist.Store(exist)
	g.checked.Store(time.Now().UnixNano())
	return exist, nil
}

// fresh reports whether "no token" was read less than recheck ago.
func (g *authGate) fresh() bool {
	at := g.checked.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < g.recheck
}

type principalKey struct{}

// principalOf is the verified token of the request, or nil when tokens
// are not in force (an anonymous request, allowed).
func principalOf(ctx context.Context) *store.Token {
	t, _ := ctx.Value(principalKey{}).(*store.Token)
	return t
}

// actor names who asked for a request, for audit_log and the words a
// transition stores ("cancelled by …"): the token's id (never its secret)
// when the request carried one (a bearer token, or the token a dashboard
// session signed in with), else "api".
func actor(r *http.Request) string {
	if t := principalOf(r.Context()); t != nil {
		return store.ActorToken(t.ID)
	}
	return store.ActorAPI
}

// guard wraps a route's handler with its access rule. A refusal writes
// nothing and records no token use; an allowed request that succeeds
// marks its token used (batched, see store.TokenUsed).
func (s *Server) guard(level access, h http.HandlerFunc) http.HandlerFunc {
	if level == public {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		tok, se, err := s.authenticate(r, level)
		if err != nil {
			if inkwell.ErrorCode(err) == inkwell.EUNAUTHENTICATED && wantsHTML(r) {
				http.Redirect(w, r, "/signin", http.StatusSeeOther) // a browser: to the sign-in form
				return
			}
			s.writeError(w, r, err)
			return
		}
		if tok == nil {
			h(w, r)
			return
		}
		ctx := context.WithValue(r.Context(), principalKey{}, tok)
		if se != nil {
			ctx = context.WithValue(ctx, sessionCtxKey{}, se)
		}
		used := new(atomic.Bool)
		ctx = context.WithValue(ctx, usedKey{}, used)
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h(rec, r.WithContext(ctx))
		if rec.status < 400 || used.Load() {
			s.auth.tokens.TokenUsed(tok.ID)
		}
	}
}

// usedKey holds a request's mark that it stored something (stored): a
// chat completion whose job is stored and then answered 504 (its
// --sync-wait ran out) or 4xx/5xx (its job failed) used its token, though
// its status says otherwise; only a refused request does not count.
type usedKey struct{}

// stored marks the request's token used (a no-op without tokens).
func stored(ctx context.Context) {
	if used, ok := ctx.Value(usedKey{}).(*atomic.Bool); ok {
		used.Store(true)
	}
}

// authenticate returns the request's verified token (nil when tokens are
// not in force) and, when it came by a dashboard session rather than an
// Authorization header, that session (session.go); or the refusal: 401
// without a valid token or session, 403 for a role below level or a
// session request without its CSRF token.
func (s *Server) authenticate(r *http.Request, level access) (*store.Token, *session, error) {
	inForce, err := s.auth.inForce(r.Context())
	if err != nil || !inForce {
		return nil, nil, err
	}
	stok, se, err := s.fromSession(r) // nil, nil, nil without a cookie, or with an Authorization header
	if err != nil {
		return nil, nil, err // writeError logs the refusal
	}
	var tok store.Token
	if stok != nil {
		tok = *stok
	} else if tok, err = s.fromBearer(r); err != nil {
		return nil, nil, err
	}
	if level == operator && tok.Role != store.RoleOperator {
		return nil, nil, inkwell.Errorf(inkwell.EFORBIDDEN, "%s %s needs an operator token; token %s is a %s token of account %q", r.Method, r.URL.Path, tok.ID, tok.Role, tok.Account)
	}
	return &tok, se, nil
}

// fromBearer verifies the request's Authorization: Bearer token.
func (s *Server) fromBearer(r *http.Request) (store.Token, error) {
	presented, err := bearer(r)
	if err != nil {
		s.log.InfoContext(r.Context(), "request refused: no valid token", "method", r.Method, "path", r.URL.Path, "reason", inkwell.ErrorMessage(err))
		return store.Token{}, err
	}
	tok, err := s.auth.tokens.VerifyToken(r.Context(), presented)
	if err != nil && inkwell.ErrorCode(err) == inkwell.EUNAUTHENTICATED {
		s.log.InfoContext(r.Context(), "request refused: token not valid", "method", r.Method, "path", r.URL.Path)
	}
	return tok, err
}

// bearer reads the one Authorization: Bearer header.
func bearer(r *http.Request) (string, error) {
	vals := r.Header.Values("Authorization")
	switch {
	case len(vals) == 0:
		return "", inkwell.Errorf(inkwell.EUNAUTHENTICATED, "this server requires an API token: send Authorization: Bearer ink_<id>_<secret> (an operator creates one with 'inkwell tokens create --account NAME')")
	case len(vals) > 1:
		return "", inkwell.Errorf(inkwell.EUNAUTHENTICATED, "send one Authorization header, not %d", len(vals))
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", inkwell.Errorf(inkwell.EUNAUTHENTICATED, "the Authorization header must be 'Bearer ink_<id>_<secret>'")
	}
	return strings.TrimSpace(tok), nil
}

// ownedBy reports whether tok may see job: no token (tokens not in
// force), an operator, or a client of the job's account.
func ownedBy(tok *store.Token, job inkwell.Job) bool {
	return tok == nil || tok.Role == store.RoleOperator || jobAccount(job) == tok.Account
}

// jobAccount is the account that pays for job (jobs.account, copied from
// the payload by migration 0008 for jobs stored before it).
func jobAccount(job inkwell.Job) string {
	if job.Account == "" {
		return inkwell.DefaultAccount
	}
	return job.Account
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(status int) {
	s.status = status
	s.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
