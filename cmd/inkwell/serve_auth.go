package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
)

// serve --auth (docs/design.md §10, docs/security.md).

const authFlagHelp = "API tokens: auto (required as soon as one token exists), required (always), or off (no tokens; allowed on loopback only). Beyond loopback a token must exist: inkwell tokens create --account NAME --role operator"

func authModeName(s string) string {
	if s == "" {
		return string(api.AuthAuto)
	}
	return s
}

// checkAuthMode reads --auth and refuses off beyond loopback. It runs
// before the database is opened.
func checkAuthMode(mode, addr string) (api.AuthMode, error) {
	m, err := api.ParseAuthMode(mode)
	if err != nil {
		return "", err
	}
	if m == api.AuthOff && !listensOnLoopback(addr) {
		return "", inkwell.Errorf(inkwell.EINVALID, "--auth off is allowed on loopback only (--addr 127.0.0.1:PORT), not on %s: anyone who reaches the port could spend money", addr)
	}
	return m, nil
}

// checkAuthTokens refuses to listen beyond loopback while no token exists
// (whatever the mode: auto would serve everyone, required no one), warns
// when required on loopback will refuse every request, and warns when off
// ignores tokens that exist (their holders may think they are needed).
func checkAuthTokens(ctx context.Context, st *store.Store, mode api.AuthMode, addr, db string, log *slog.Logger) error {
	if mode == api.AuthOff {
		warnTokensIgnored(ctx, st, log)
		return nil
	}
	exist, err := st.TokensExist(ctx)
	if err != nil {
		return err
	}
	switch {
	case exist:
		return nil
	case !listensOnLoopback(addr):
		return inkwell.Errorf(inkwell.EINVALID, "refusing to listen on %s beyond loopback: no API token exists, so anyone who reaches the port could submit jobs that spend money and read every job. "+
			"Create an operator token first, keep what it prints, and start again (or listen on 127.0.0.1): inkwell tokens create --account %s --role operator --db %s (docs/security.md)",
			addr, inkwell.DefaultAccount, store.RedactDSN(db))
	case mode == api.AuthRequired:
		log.Warn("--auth required and no API token exists: every request but /healthz, /readyz, /openapi.json, /static/… and /signin is refused until one is created",
			"how", "inkwell tokens create --account "+inkwell.DefaultAccount+" --role operator")
	}
	return nil
}

// warnTokensIgnored warns, under --auth off, that the API tokens that
// exist (not revoked) are not asked for: every request on loopback is
// served without one. A failed read is logged, not a reason to refuse to
// start: off never needs the tokens.
func warnTokensIgnored(ctx context.Context, st *store.Store, log *slog.Logger) {
	toks, err := st.Tokens(ctx)
	if err != nil {
		log.Warn("--auth off: could not count the API tokens it ignores", "err", err)
		return
	}
	live := 0
	for _, t := range toks {
		if t.RevokedAt == nil {
			live++
		}
	}
	if live > 0 {
		log.Warn(fmt.Sprintf("--auth off: %d API token(s) exist and are ignored: every request is served without a token (loopback only); drop --auth off to require them", live),
			"tokens", live)
	}
}
