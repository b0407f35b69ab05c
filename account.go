package inkwell

import "regexp"

var accountRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]*$`)

// ValidateAccount is the one rule for an account's name, which the API
// applies to a body's account and the store to a new account: 1 to
// MaxAccountBytes letters, digits, '.', '_', '@' or '-', starting with a
// letter or a digit. A refusal is EINVALID.
func ValidateAccount(name string) error {
	if len(name) > MaxAccountBytes || !accountRE.MatchString(name) {
		return Errorf(EINVALID, "account must be 1-%d letters, digits, '.', '_', '@' or '-', starting with a letter or digit (not %q)", MaxAccountBytes, name)
	}
	return nil
}
