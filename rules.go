package inkwell

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// The rules for names and addresses that more than one layer checks (the
// API in a body, the store before a write, the CLI before it opens a
// file): written once, here. Each refusal is EINVALID and says what to
// send instead.

var (
	accountRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]*$`)
	laneNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
)

// ValidateAccount checks an account's name: 1 to MaxAccountBytes letters,
// digits, '.', '_', '@' or '-', starting with a letter or a digit.
func ValidateAccount(name string) error {
	if len(name) > MaxAccountBytes || !accountRE.MatchString(name) {
		return Errorf(EINVALID, "account must be 1-%d letters, digits, '.', '_', '@' or '-', starting with a letter or digit (not %q)", MaxAccountBytes, name)
	}
	return nil
}

// ValidateLane checks a lane's name: 1–63 letters, digits, '.', '_' or '-'.
func ValidateLane(lane string) error {
	if !laneNameRE.MatchString(lane) {
		return Errorf(EINVALID, "lane %q: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", lane)
	}
	return nil
}

// Token roles (docs/design.md §10).
const (
	RoleClient   = "client"   // submits and reads its own account's jobs
	RoleOperator = "operator" // also retries, cancels and reads everything
)

// ValidRole reports whether role is one a token may have.
func ValidRole(role string) bool { return role == RoleClient || role == RoleOperator }

// MaxWebhookURLBytes bounds a webhook URL.
const MaxWebhookURLBytes = 2048

// ValidateWebhookURL refuses a URL the webhook sender could not post to:
// an absolute http or https URL with a host, no user info, no fragment.
func ValidateWebhookURL(raw string) error {
	bad := func(why string) error {
		return Errorf(EINVALID, "webhook URL %q: %s (want an absolute http:// or https:// URL)", raw, why)
	}
	if len(raw) > MaxWebhookURLBytes {
		return bad(fmt.Sprintf("longer than %d bytes", MaxWebhookURLBytes))
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return bad("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("the scheme must be http or https")
	case u.Host == "" || u.Hostname() == "":
		return bad("no host")
	case u.User != nil:
		return bad("user info in a URL ends up in logs; use a secret path or the signature instead")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return bad("a fragment is never sent")
	case strings.ContainsAny(raw, " \t\r\n"):
		return bad("white space")
	}
	return nil
}

// Payer decides who pays for a request (docs/design.md §4, §10): with a
// token in force (tokenAccount not ""), the token's account, and a body
// naming another account is refused (ok false); without one, the body's
// account, DefaultAccount when it names none. The decision is stored in
// jobs.account, which every later reader (the charge, the budget, the
// webhook row) takes from there.
func Payer(tokenAccount, bodyAccount string) (account string, ok bool) {
	switch {
	case tokenAccount != "":
		return tokenAccount, bodyAccount == "" || bodyAccount == tokenAccount
	case bodyAccount == "":
		return DefaultAccount, true
	}
	return bodyAccount, true
}
