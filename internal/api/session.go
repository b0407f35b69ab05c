package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// Dashboard sign-in (docs/design.md §10, docs/security.md). A browser sends no
// Authorization header of its own, so with tokens in force an operator
// signs in once with an operator token at /signin and the dashboard then
// goes by a session cookie:
//
//   - the cookie (inkwell_session) holds a random session id, HttpOnly
//     (no script reads it), SameSite=Strict (no other site's page sends
//     it), Secure when the request came over TLS (or a proxy says
//     X-Forwarded-Proto: https), Path=/, for sessionTTL at most;
//   - the server keeps each session in memory only, by the SHA-256 of its
//     id: the token it signed in with and a CSRF token. A restart signs
//     everyone out; each serve process has its own sessions;
//   - every request under a session verifies its token again, exactly as
//     a Bearer request does: a revoked token ends its sessions at once;
//   - every request under a session that is not GET or HEAD (Retry,
//     Cancel, sign-out) must carry the session's CSRF token, in the header
//     X-CSRF-Token (the dashboard's script) or the form field csrf_token
//     (a plain form): without it, 403 and nothing written. Cross-site
//     POSTs are refused before that whatever they carry (crossSite).
//
// A request with an Authorization header is judged by that header alone;
// the cookie is read only without one. Audit rows and "cancelled by …"
// name the session's token, as for a Bearer request.

const (
	sessionCookie = "inkwell_session"
	csrfHeader    = "X-CSRF-Token"
	csrfField     = "csrf_token"
	// sessionTTL is how long a sign-in lasts, at most.
	sessionTTL = 12 * time.Hour
)

// session is one signed-in browser.
type session struct {
	token   string // the operator token it signed in with, verified again on every request
	tokenID string
	csrf    string
	expires time.Time
}

// sessions are the signed-in browsers of this process, by the SHA-256 of
// their cookie's id.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session
}

func newSessions() *sessions { return &sessions{m: map[string]*session{}} }

// create starts a session for a verified operator token and returns the
// cookie's id.
func (ss *sessions) create(token string, tok store.Token, now time.Time) (string, *session, error) {
	id, err := randomToken()
	if err != nil {
		return "", nil, err
	}
	csrf, err := randomToken()
	if err != nil {
		return "", nil, err
	}
	se := &session{token: token, tokenID: tok.ID, csrf: csrf, expires: now.Add(sessionTTL)}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for k, old := range ss.m { // sweep: a sign-in is rare, the map small
		if !now.Before(old.expires) {
			delete(ss.m, k)
		}
	}
	ss.m[sessionKey(id)] = se
	return id, se, nil
}

// get returns the live session of a cookie id, or nil.
func (ss *sessions) get(id string, now time.Time) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	k := sessionKey(id)
	se := ss.m[k]
	if se != nil && !now.Before(se.expires) {
		delete(ss.m, k)
		return nil
	}
	return se
}

func (ss *sessions) end(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, sessionKey(id))
}

func sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

type sessionCtxKey struct{}

// sessionOf is the session a request came under, or nil (a Bearer
// request, or tokens not in force).
func sessionOf(ctx context.Context) *session {
	se, _ := ctx.Value(sessionCtxKey{}).(*session)
	return se
}

// fromSession authenticates r by its session cookie: nil, nil when it
// has none, or has an Authorization header, which then decides alone
// (the caller asks for a Bearer token). A cookie of no live
// session, or whose token is no longer valid (revoked), is 401; a request
// that changes something without the session's CSRF token is 403.
func (s *Server) fromSession(r *http.Request) (*store.Token, *session, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" || len(r.Header.Values("Authorization")) > 0 {
		return nil, nil, nil
	}
	se := s.sessions.get(c.Value, time.Now())
	if se == nil {
		return nil, nil, inkwell.Errorf(inkwell.EUNAUTHENTICATED, "the dashboard session has ended (signed out, expired, or the server restarted): sign in again at /signin")
	}
	tok, err := s.auth.tokens.VerifyToken(r.Context(), se.token)
	if err != nil {
		if inkwell.ErrorCode(err) == inkwell.EUNAUTHENTICATED {
			s.sessions.end(c.Value)
			s.log.InfoContext(r.Context(), "request refused: session token no longer valid", "method", r.Method, "path", r.URL.Path, "token_id", se.tokenID)
			return nil, nil, inkwell.Errorf(inkwell.EUNAUTHENTICATED, "the token this session signed in with is no longer valid (revoked?): sign in again at /signin")
		}
		return nil, nil, err
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !csrfMatches(r, se.csrf) {
		s.log.InfoContext(r.Context(), "request refused: session request without its CSRF token", "method", r.Method, "path", r.URL.Path, "token_id", se.tokenID)
		return nil, nil, inkwell.Errorf(inkwell.EFORBIDDEN, "%s %s under a dashboard session needs the session's CSRF token (header %s or form field %s): nothing was done", r.Method, r.URL.Path, csrfHeader, csrfField)
	}
	return &tok, se, nil
}

// csrfMatches compares the request's CSRF token with want in constant time.
func csrfMatches(r *http.Request, want string) bool {
	got := r.Header.Get(csrfHeader)
	if got == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		r.Body = http.MaxBytesReader(nil, r.Body, 4<<10)
		got = r.PostFormValue(csrfField)
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// setSessionCookie sends the session's cookie (maxAge < 0 removes it).
func setSessionCookie(w http.ResponseWriter, r *http.Request, id string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: id, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"),
	})
}

// wantsHTML reports whether r is a browser asking for a page: a refused
// dashboard page then sends it to /signin instead of a JSON error.
func wantsHTML(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && strings.Contains(r.Header.Get("Accept"), "text/html")
}

// signInData is what the /signin page shows.
type signInData struct {
	Title   string
	Message string
}

// handleSignInPage is GET /signin: the form. Without tokens in force
// there is nothing to sign in to: the dashboard.
func (s *Server) handleSignInPage(w http.ResponseWriter, r *http.Request) {
	if inForce, err := s.auth.inForce(r.Context()); err == nil && !inForce {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.renderSignIn(w, r, http.StatusOK, "")
}

// handleSignIn is POST /signin: an operator token in the form field
// token starts a session (303 to the dashboard); any other is refused
// (401, or 403 for a client token) with the form again, and nothing is
// started.
func (s *Server) handleSignIn(w http.ResponseWriter, r *http.Request) {
	inForce, err := s.auth.inForce(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !inForce {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	presented := strings.TrimSpace(r.PostFormValue("token"))
	tok, err := s.auth.tokens.VerifyToken(r.Context(), presented)
	if err != nil {
		if inkwell.ErrorCode(err) != inkwell.EUNAUTHENTICATED {
			s.writeError(w, r, err)
			return
		}
		s.log.InfoContext(r.Context(), "request refused: sign-in with a token that is not valid")
		s.renderSignIn(w, r, http.StatusUnauthorized, "That token is not valid (mistyped, revoked, or from another installation).")
		return
	}
	if tok.Role != store.RoleOperator {
		s.log.InfoContext(r.Context(), "request refused: sign-in with a client token", "token_id", tok.ID)
		s.renderSignIn(w, r, http.StatusForbidden, "Token "+tok.ID+" is a client token: the dashboard needs an operator token.")
		return
	}
	id, _, err := s.sessions.create(presented, tok, time.Now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.auth.tokens.TokenUsed(tok.ID)
	s.log.InfoContext(r.Context(), "dashboard sign-in", "token_id", tok.ID)
	setSessionCookie(w, r, id, int(sessionTTL/time.Second))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// handleSignOut is POST /signout (CSRF-checked like every session POST):
// the session ends here and its cookie is removed.
func (s *Server) handleSignOut(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.sessions.end(c.Value)
	}
	setSessionCookie(w, r, "", -1)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

func (s *Server) renderSignIn(w http.ResponseWriter, r *http.Request, status int, msg string) {
	var buf strings.Builder
	if err := s.pages.t.ExecuteTemplate(&buf, "signin.html", signInData{Title: "sign in · Inkwell", Message: msg}); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(buf.String()))
}
