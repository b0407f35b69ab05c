package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/inkwell/inkwell"
)

// Accounts (docs/design.md §10): who pays. This file stores and lists them;
// budgets.go reserves, settles and releases against budget_micros, and the
// API limits each account's new requests by rpm.

// Account is one row of accounts.
type Account struct {
	Name           string
	BudgetMicros   *int64 // nil: no budget
	ReservedMicros int64
	SpentMicros    int64
	RPM            int // 0: no limit
	CreatedAt      time.Time
	WebhookURL     string // "": no webhook (webhooks.go)
	// WebhookSecret is set only on the Account CreateAccount returns when
	// it made a signing secret (shown once); reads never fill it.
	WebhookSecret string
}

// ValidateAccountName refuses a name the API would refuse in a body
// (the one rule, inkwell.ValidateAccount).
func ValidateAccountName(name string) error { return inkwell.ValidateAccount(name) }

// accountCreateLockKey serializes account creations on PostgreSQL
// (CreateAccount): a transaction advisory key pair in Inkwell's own
// namespace ('inkq', 1), beside batch admission's ('inkq', 0).
const accountCreateLockKey = "1768844145, 1"

// CreateAccount stores a new account. A name already taken is ECONFLICT
// and changes nothing; bad input is EINVALID and writes nothing.
func (s *Store) CreateAccount(ctx context.Context, a Account) (Account, error) {
	if err := ValidateAccountName(a.Name); err != nil {
		return Account{}, err
	}
	if a.BudgetMicros != nil && *a.BudgetMicros < 0 {
		return Account{}, inkwell.Errorf(inkwell.EINVALID, "budget must not be negative")
	}
	if a.RPM < 0 {
		return Account{}, inkwell.Errorf(inkwell.EINVALID, "rpm must not be negative (0: no limit)")
	}
	if a.WebhookURL != "" {
		if err := ValidateWebhookURL(a.WebhookURL); err != nil {
			return Account{}, err
		}
	}
	var secret string
	createdAt := s.nowTS() // before the transaction: on PostgreSQL the clock is a query
	// spent_micros starts at the charges already stored under the name
	// (jobs accepted for it before it had a row): it always equals them.
	const insert = `INSERT INTO accounts (name, budget_micros, rpm, created_at, spent_micros)
		VALUES ($1, $2, $3, $4, (SELECT COALESCE(SUM(amount_micros), 0) FROM charges WHERE account = $1))
		ON CONFLICT (name) DO NOTHING`
	var budget sql.NullInt64
	if a.BudgetMicros != nil {
		budget = sql.NullInt64{Int64: *a.BudgetMicros, Valid: true}
	}
	// Names are matched exactly; two that differ only in case would be two
	// accounts that every listing and token makes look like one (names are
	// ASCII: lower() folds them alike on both dialects).
	const sameButCase = `SELECT name FROM accounts WHERE lower(name) = lower($1) AND name <> $1 LIMIT 1`
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if !s.dialect.oneWriter {
			// Account creations take turns until they commit, across
			// processes: under READ COMMITTED two creators of "acme" and
			// "Acme" would each see no look-alike and both insert.
			// (SQLite's one writer makes them take turns already.)
			if _, err := s.txExec(ctx, tx, `SELECT pg_advisory_xact_lock(`+accountCreateLockKey+`)`); err != nil {
				return fmt.Errorf("create account: wait for other creations: %w", err)
			}
		}
		var other string
		switch err := s.txQueryRow(ctx, tx, sameButCase, a.Name).Scan(&other); {
		case err == nil:
			return inkwell.Errorf(inkwell.ECONFLICT, "account %q differs from account %q only in case: give each account its own name, or use %q", a.Name, other, other)
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("create account: %w", err)
		}
		n, err := s.exec(ctx, tx, insert, a.Name, budget, a.RPM, createdAt)
		if err != nil {
			return fmt.Errorf("create account: %w", err)
		}
		if n == 0 {
			return inkwell.Errorf(inkwell.ECONFLICT, "account %q already exists", a.Name)
		}
		if a.WebhookURL != "" {
			secret, err = s.setWebhookTx(ctx, tx, a.Name, a.WebhookURL, true, createdAt)
		}
		return err
	})
	if err != nil {
		return Account{}, err
	}
	created, err := s.Account(ctx, a.Name)
	created.WebhookSecret = secret
	return created, err
}

const accountColumns = `name, budget_micros, reserved_micros, spent_micros, rpm, created_at, webhook_url`

func scanAccount(row rowScanner) (Account, error) {
	var a Account
	var budget sql.NullInt64
	var created nullTime
	var webhook sql.NullString
	if err := row.Scan(&a.Name, &budget, &a.ReservedMicros, &a.SpentMicros, &a.RPM, &created, &webhook); err != nil {
		return a, err
	}
	a.WebhookURL = webhook.String
	if budget.Valid {
		a.BudgetMicros = &budget.Int64
	}
	a.CreatedAt = created.Time
	return a, nil
}

// Account returns one account (ENOTFOUND when there is none).
func (s *Store) Account(ctx context.Context, name string) (Account, error) {
	a, err := scanAccount(s.rdb.QueryRowContext(ctx, s.dialect.rebind(`SELECT `+accountColumns+` FROM accounts WHERE name = $1`), name))
	if err != nil {
		return a, s.classify(notFound(err, "account %q", name))
	}
	return a, nil
}

// Accounts lists every account by name.
func (s *Store) Accounts(ctx context.Context) ([]Account, error) {
	return queryAll(ctx, s, "list accounts", scanAccount, `SELECT `+accountColumns+` FROM accounts ORDER BY name`)
}
