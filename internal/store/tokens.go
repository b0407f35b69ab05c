package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/inkwell/inkwell"
)

// API tokens (docs/design.md §10). A token is ink_<id>_<secret>: id is 16 hex
// digits (8 random bytes), secret 64 hex digits (32 random bytes from
// crypto/rand). It is returned once, by CreateToken; the database keeps
// only the id and the SHA-256 of the secret. VerifyToken reads the row
// on every call, so a revocation works at the next request.

// Token roles: the root package's (inkwell.RoleClient, RoleOperator).
const (
	RoleClient   = inkwell.RoleClient
	RoleOperator = inkwell.RoleOperator
)

const (
	tokenPrefix    = "ink_"
	tokenIDLen     = 16 // hex digits
	tokenSecretLen = 64 // hex digits
	// tokenUseFlushEvery is how often the last_used_at marks kept in
	// memory are written, in one low-priority transaction.
	tokenUseFlushEvery = 5 * time.Second
)

// Token is one row of api_tokens, without its secret's hash.
type Token struct {
	ID         string
	Account    string
	Role       string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

// ValidRole reports whether role is one a token may have (inkwell.ValidRole).
func ValidRole(role string) bool { return inkwell.ValidRole(role) }

// CreateToken stores a new token for an existing account and returns it
// with its full text ink_<id>_<secret>, which is never available again.
// An unknown account is ENOTFOUND, a bad role EINVALID; neither writes.
func (s *Store) CreateToken(ctx context.Context, account, role string) (Token, string, error) {
	if !ValidRole(role) {
		return Token{}, "", inkwell.Errorf(inkwell.EINVALID, "role %q: want %s or %s", role, RoleClient, RoleOperator)
	}
	if err := ValidateAccountName(account); err != nil {
		return Token{}, "", err
	}
	id, err := randomHex(tokenIDLen / 2)
	if err != nil {
		return Token{}, "", err
	}
	secret, err := randomHex(tokenSecretLen / 2)
	if err != nil {
		return Token{}, "", err
	}
	sum := sha256.Sum256([]byte(secret))
	created := s.nowTS() // before the transaction: see RetryIfFailed
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := s.txQueryRow(ctx, tx, `SELECT COUNT(*) FROM accounts WHERE name = $1`, account).Scan(&n); err != nil {
			return fmt.Errorf("create token: read account: %w", err)
		}
		if n == 0 {
			return inkwell.Errorf(inkwell.ENOTFOUND, "account %q not found: create it first with 'inkwell accounts add %s'", account, account)
		}
		_, err := s.txExec(ctx, tx, `INSERT INTO api_tokens (id, account, role, secret_sha256, created_at) VALUES ($1, $2, $3, $4, $5)`,
			id, account, role, hex.EncodeToString(sum[:]), created)
		if err != nil {
			return fmt.Errorf("create token: %w", err)
		}
		return nil
	})
	if err != nil {
		return Token{}, "", err
	}
	t, err := s.token(ctx, id)
	if err != nil {
		return Token{}, "", err
	}
	return t, tokenPrefix + id + "_" + secret, nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

const tokenColumns = `id, account, role, created_at, last_used_at, revoked_at`

func scanToken(row rowScanner, extra ...any) (Token, error) {
	var t Token
	var created, used, revoked nullTime
	if err := row.Scan(append([]any{&t.ID, &t.Account, &t.Role, &created, &used, &revoked}, extra...)...); err != nil {
		return t, err
	}
	t.CreatedAt, t.LastUsedAt, t.RevokedAt = created.Time, used.Ptr(), revoked.Ptr()
	return t, nil
}

func (s *Store) token(ctx context.Context, id string) (Token, error) {
	t, err := scanToken(s.rdb.QueryRowContext(ctx, s.dialect.rebind(`SELECT `+tokenColumns+` FROM api_tokens WHERE id = $1`), id))
	if err != nil {
		return t, s.classify(notFound(err, "token %q", id))
	}
	return t, nil
}

// Tokens lists every token, revoked ones too, oldest first. No secret and
// no hash is ever read back.
func (s *Store) Tokens(ctx context.Context) ([]Token, error) {
	scan := func(row rowScanner) (Token, error) { return scanToken(row) }
	return queryAll(ctx, s, "list tokens", scan, `SELECT `+tokenColumns+` FROM api_tokens ORDER BY created_at, id`)
}

// RevokeToken sets revoked_at on token id. It works at the next request:
// VerifyToken reads revoked_at every time. already is true when it was
// revoked before (nothing is written then); an unknown id is ENOTFOUND.
func (s *Store) RevokeToken(ctx context.Context, id string) (t Token, already bool, err error) {
	id = strings.TrimPrefix(id, tokenPrefix)
	if i := strings.IndexByte(id, '_'); i >= 0 {
		id = id[:i] // a whole token was given: its id part; the secret is not needed
	}
	var n int64
	now := s.nowTS() // before the transaction: see RetryIfFailed
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		n, err = s.exec(ctx, tx, `UPDATE api_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL`, now, id)
		return err
	})
	if err != nil {
		return Token{}, false, fmt.Errorf("revoke token: %w", err)
	}
	t, err = s.token(ctx, id)
	return t, err == nil && n == 0, err
}

// TokensExist reports whether any token was ever created (a revoked one
// counts: revoking the last token must not open the server again).
func (s *Store) TokensExist(ctx context.Context) (bool, error) {
	var n int
	if err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM api_tokens LIMIT 1) t`).Scan(&n); err != nil {
		return false, s.classify(fmt.Errorf("any token: %w", err))
	}
	return n > 0, nil
}

// dummySecretSHA256 is compared against when a presented id matches no
// row, so that an unknown id and a wrong secret cost the same: one read by
// id, one SHA-256, one constant-time compare.
var dummySecretSHA256 = func() string {
	sum := sha256.Sum256([]byte("inkwell: no such token"))
	return hex.EncodeToString(sum[:])
}()

// secretMatches hashes the presented secret and compares it, in constant
// time, with the stored hash. hook (tests only) counts the compares.
func secretMatches(storedSHA256, secret string, hook func()) bool {
	if hook != nil {
		hook()
	}
	sum := sha256.Sum256([]byte(secret))
	got := hex.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(got), []byte(storedSHA256)) == 1
}

// parseToken splits ink_<id>_<secret>. It looks at the form only.
func parseToken(s string) (id, secret string, ok bool) {
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		return "", "", false
	}
	id, secret, ok = strings.Cut(rest, "_")
	if !ok || len(id) != tokenIDLen || len(secret) != tokenSecretLen || !isLowerHex(id) || !isLowerHex(secret) {
		return "", "", false
	}
	return id, secret, true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// verifyTokenSQL reads token $1's row, or, when no row has that id, a
// stand-in of the same shape ($2 for its times, $3 for its hash): one row
// either way, the same columns to scan and the same times to parse, so an
// unknown id costs what a wrong secret does (BenchmarkVerifyToken). The
// last column says which it was.
const verifyTokenSQL = `SELECT COALESCE(t.id, $1), COALESCE(t.account, ''), COALESCE(t.role, ''),
		COALESCE(t.created_at, $2), CASE WHEN t.id IS NULL THEN $2 ELSE t.last_used_at END, t.revoked_at,
		COALESCE(t.secret_sha256, $3), t.id IS NOT NULL
	FROM (SELECT 1 AS one) AS one LEFT JOIN api_tokens t ON t.id = $1`

// standInTime is the stand-in row's created_at and last_used_at.
var standInTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// preparedRead is one read statement prepared once on the read pool.
type preparedRead struct {
	once sync.Once
	stmt *sql.Stmt
	err  error
}

// verifyTokenRow runs verifyTokenSQL for id. On SQLite the statement is
// prepared once: it runs on every request of a server with tokens, and
// parsing and planning it each time cost more than the read itself
// (BenchmarkVerifyToken). PostgreSQL's driver keeps its own prepared
// statements, where a pooler in transaction mode allows them.
func (s *Store) verifyTokenRow(ctx context.Context, id string) *sql.Row {
	args := []any{id, s.ts(standInTime), dummySecretSHA256}
	if s.dialect.stmtCache {
		p := &s.tokenVerify
		p.once.Do(func() {
			p.stmt, p.err = s.rdb.PrepareContext(context.WithoutCancel(ctx), s.dialect.rebind(verifyTokenSQL))
		})
		if p.err == nil && p.stmt != nil { // else the prepare failed, or Close came first: run it unprepared
			return p.stmt.QueryRowContext(ctx, args...)
		}
	}
	return s.rdb.QueryRowContext(ctx, s.dialect.rebind(verifyTokenSQL), args...)
}

// VerifyToken checks a presented token: its row by id (read every time,
// so a revocation takes effect at once), the SHA-256 of its secret
// compared in constant time. An unknown id takes the same path as a wrong
// secret (a stand-in row, a compare against a dummy hash) and gets the
// same error. A
// malformed token is refused on its form alone (the form is public). It
// writes nothing; call TokenUsed once the request is allowed.
func (s *Store) VerifyToken(ctx context.Context, presented string) (Token, error) {
	invalid := inkwell.Errorf(inkwell.EUNAUTHENTICATED, "the token is not valid: send Authorization: Bearer ink_<id>_<secret> with a token from 'inkwell tokens create'")
	id, secret, ok := parseToken(presented)
	if !ok {
		return Token{}, inkwell.Errorf(inkwell.EUNAUTHENTICATED, "the token is malformed: want ink_<id>_<secret> as 'inkwell tokens create' prints it")
	}
	var stored string
	var found bool
	t, err := scanToken(s.verifyTokenRow(ctx, id), &stored, &found)
	if err != nil {
		return Token{}, s.classify(fmt.Errorf("verify token: %w", err))
	}
	if match := secretMatches(stored, secret, s.tokenUse.compareHook); !match || !found {
		return Token{}, invalid
	}
	if t.RevokedAt != nil {
		// Only the holder of the right secret learns that it was revoked.
		return Token{}, inkwell.Errorf(inkwell.EUNAUTHENTICATED, "token %s was revoked at %s: ask an operator for a new one", t.ID, t.RevokedAt.Format(time.RFC3339))
	}
	return t, nil
}

// tokenUses keeps last_used_at marks in memory and writes them in one
// low-priority transaction every tokenUseFlushEvery and at Close, so a
// request never waits for a write of its own.
type tokenUses struct {
	mu      sync.Mutex
	pending map[string]time.Time
	// flushing is held by a flush from taking the marks to writing them,
	// so a flush that finds none pending still returns only after the
	// one under way (the ticker's) has written what it took.
	flushing sync.Mutex
	stop     chan struct{} // nil until the flusher starts (or Close)
	done     chan struct{}
	// compareHook, set by tests only (before any use), is called on every
	// secret compare: an unknown id and a wrong secret both compare.
	compareHook func()
	// flushHook, set by tests only (before any use), is called by a flush
	// between taking the marks and writing them.
	flushHook func()
}

// TokenUsed marks token id used now. The mark reaches last_used_at within
// a few seconds (FlushTokenUse), or at Close.
func (s *Store) TokenUsed(id string) {
	u := &s.tokenUse
	now := time.Now().UTC()
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pending == nil {
		u.pending = map[string]time.Time{}
	}
	if now.After(u.pending[id]) {
		u.pending[id] = now
	}
	if u.stop == nil {
		u.stop, u.done = make(chan struct{}), make(chan struct{})
		go s.flushTokenUseLoop(u.stop, u.done)
	}
}

func (s *Store) flushTokenUseLoop(stop, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(tokenUseFlushEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), tokenUseFlushEvery)
			if err := s.FlushTokenUse(ctx); err != nil {
				s.log.Warn("token last-use marks not written yet; retried later", "err", err)
			}
			cancel()
		}
	}
}

// FlushTokenUse writes the pending last_used_at marks now (none: no
// write). A mark never moves last_used_at backwards. Marks that could not
// be written are kept for the next flush. When it returns, every mark
// made before the call is written or kept, none half-way: a flush under
// way is waited for.
func (s *Store) FlushTokenUse(ctx context.Context) error {
	u := &s.tokenUse
	u.flushing.Lock()
	defer u.flushing.Unlock()
	u.mu.Lock()
	batch := u.pending
	u.pending = nil
	u.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	if u.flushHook != nil {
		u.flushHook()
	}
	err := s.inTxAt(ctx, writeLow, func(tx *sql.Tx) error {
		for id, at := range batch {
			if _, err := s.txExec(ctx, tx, `UPDATE api_tokens SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $1)`,
				s.ts(at), id); err != nil {
				return fmt.Errorf("token last use: %w", err)
			}
		}
		return nil
	}, "", "")
	if err != nil {
		u.mu.Lock()
		if u.pending == nil {
			u.pending = map[string]time.Time{}
		}
		for id, at := range batch {
			if at.After(u.pending[id]) {
				u.pending[id] = at
			}
		}
		u.mu.Unlock()
	}
	return err
}

// closeTokenUse stops the flusher and writes what is pending, before the
// pools close.
func (s *Store) closeTokenUse() {
	u := &s.tokenUse
	u.mu.Lock()
	stop, done := u.stop, u.done
	u.stop = make(chan struct{}) // non-nil: no flusher starts after Close
	u.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.FlushTokenUse(ctx); err != nil {
		s.log.Warn("token last-use marks lost at close", "err", err)
	}
}
