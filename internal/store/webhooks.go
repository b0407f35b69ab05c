package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
)

// Webhooks (docs/design.md §11). This file owns an account's webhook settings
// (accounts.webhook_url, webhook_secret, webhook_since) and every write to
// webhook_deliveries but one: the row for an ending job is written by the
// trigger webhook_deliveries_on_job_end (migration 0010), inside the
// transaction of whichever transition ends the job (complete, fail, cancel,
// recovery, rescue), so no transition needs to know about webhooks and none
// can forget one. The sender (internal/webhook) claims due rows here, posts
// them, and records the outcome here.

// WebhookSecretPrefix starts every signing secret, as Standard Webhooks
// serializes symmetric secrets.
const WebhookSecretPrefix = "whsec_"

// MaxWebhookURLBytes bounds a webhook URL.
const MaxWebhookURLBytes = inkwell.MaxWebhookURLBytes

// WebhookDelivery is one row of webhook_deliveries, with the job's
// idempotency key (which clients know their jobs by).
type WebhookDelivery struct {
	ID             int64
	JobID          int64
	IdempotencyKey string
	Account        string
	Event          string // job.done or job.failed
	JobError       string
	JobErrorClass  string
	OccurredAt     time.Time // the job's finished_at
	CreatedAt      time.Time
	Attempts       int
	NextAttemptAt  time.Time
	LastAttemptAt  *time.Time
	LastStatus     int // the receiver's last HTTP status; 0: none
	LastError      string
	DeliveredAt    *time.Time
	GaveUpAt       *time.Time
	ReplayOf       int64 // 0: an original delivery
}

// State is pending, delivered or gave_up.
func (d WebhookDelivery) State() string {
	switch {
	case d.DeliveredAt != nil:
		return "delivered"
	case d.GaveUpAt != nil:
		return "gave_up"
	}
	return "pending"
}

// Parked reports a pending delivery that waits for its account to have a
// webhook URL again (WebhookParked).
func (d WebhookDelivery) Parked() bool {
	return d.DeliveredAt == nil && d.GaveUpAt == nil && !d.NextAttemptAt.Before(WebhookParked)
}

// WebhookParked is the next_attempt_at of a pending delivery whose account
// has no webhook URL (it was removed after the job ended): past any time a
// sender looks for, so that the due index's scan (next_attempt_at <= now)
// never reaches it however many wait. A sender parks such deliveries when
// its claim meets them (parkOrphans); setting a URL again makes them due
// at once (unparkWebhooks). Before, they stayed due, and every
// poll of every sender read all of them to send none: with 200,000
// waiting, 63 ms a second under SQLite's write lock.
var WebhookParked = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// MessageID is the Standard Webhooks webhook-id of the delivery: the same
// on every attempt and for every replay of it, so that a receiver can
// dedupe, and different across installations (the installation id).
func (d WebhookDelivery) MessageID(installation string) string {
	root := d.ID
	if d.ReplayOf != 0 {
		root = d.ReplayOf
	}
	return "msg_" + installation[:min(12, len(installation))] + "_" + strconv.FormatInt(root, 10)
}

// WebhookSend is a claimed delivery: where to send it and with what key.
type WebhookSend struct {
	WebhookDelivery
	URL    string
	Secret string // whsec_…
}

// ValidateWebhookURL is the one rule for a webhook URL (inkwell.ValidateWebhookURL).
func ValidateWebhookURL(raw string) error { return inkwell.ValidateWebhookURL(raw) }

// NewWebhookSecret makes a signing secret: whsec_ and the base64 of 32
// random bytes (Standard Webhooks asks for 24 to 64).
func NewWebhookSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	return WebhookSecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// setWebhookTx sets an account's webhook URL in tx (url "" removes it). A
// new secret is made when rotate is set or the account has none; it is
// returned then, and "" otherwise. webhook_since is set when the URL goes
// from none to one. ENOTFOUND when there is no such account.
//
// now is the store's time, read before tx began: on PostgreSQL the clock
// is a query, which inside a transaction would want a second connection.
func (s *Store) setWebhookTx(ctx context.Context, tx *sql.Tx, account, url string, rotate bool, now any) (secret string, err error) {
	var old, oldSecret sql.NullString
	err = s.txQueryRow(ctx, tx, `SELECT webhook_url, webhook_secret FROM accounts WHERE name = $1`, account).Scan(&old, &oldSecret)
	if err != nil {
		return "", notFound(err, "account %q", account)
	}
	if rotate || (!oldSecret.Valid && url != "") {
		if secret, err = NewWebhookSecret(); err != nil {
			return "", err
		}
	}
	const upd = `UPDATE accounts SET webhook_url = CAST($2 AS TEXT),
		webhook_secret = COALESCE(CAST($3 AS TEXT), webhook_secret),
		webhook_since = CASE WHEN CAST($2 AS TEXT) IS NULL THEN NULL WHEN webhook_url IS NULL THEN $4 ELSE webhook_since END
		WHERE name = $1`
	var u, sec sql.NullString
	if url != "" {
		u = sql.NullString{String: url, Valid: true}
	}
	if secret != "" {
		sec = sql.NullString{String: secret, Valid: true}
	}
	if err := s.execOne(ctx, tx, upd, account, u, sec, now); err != nil {
		return "", fmt.Errorf("set webhook of %q: %w", account, err)
	}
	if url != "" {
		// After the account's row is written (its lock held on
		// PostgreSQL, so a sender's park waits for this transaction
		// and then sees the URL): what waited for a URL is due now.
		if _, err := s.exec(ctx, tx, unparkWebhooks, account, now, s.ts(WebhookParked)); err != nil {
			return "", fmt.Errorf("set webhook of %q: deliveries waiting for a URL: %w", account, err)
		}
	}
	return secret, nil
}

// unparkWebhooks makes account $1's parked deliveries due at $2 ($3 is
// WebhookParked). Only parked ones: a delivery being sent keeps its lease
// (its next_attempt_at), so no second sender takes it meanwhile. It reads
// the due index from WebhookParked on: the parked deliveries only.
const unparkWebhooks = `UPDATE webhook_deliveries SET next_attempt_at = $2
	WHERE account = $1 AND delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at >= $3`

// SetWebhookParams says what SetWebhook changes.
type SetWebhookParams struct {
	Account string
	URL     string // "" with Remove
	Remove  bool   // no webhook from now on; pending deliveries wait for a URL
	// RotateSecret makes a new signing secret (returned once). An account
	// given its first URL gets one anyway.
	RotateSecret bool
}

// SetWebhook sets, changes or removes an account's webhook URL, or
// rotates its secret. It returns the account and the new secret ("" when
// the secret did not change). Bad input is EINVALID and writes nothing.
func (s *Store) SetWebhook(ctx context.Context, p SetWebhookParams) (Account, string, error) {
	switch {
	case p.Remove && p.URL != "":
		return Account{}, "", inkwell.Errorf(inkwell.EINVALID, "give a webhook URL or remove it, not both")
	case p.Remove && p.RotateSecret:
		return Account{}, "", inkwell.Errorf(inkwell.EINVALID, "a removed webhook has no secret to rotate")
	case !p.Remove && p.URL == "" && !p.RotateSecret:
		return Account{}, "", inkwell.Errorf(inkwell.EINVALID, "give a webhook URL, remove it, or rotate its secret")
	}
	if err := ValidateAccountName(p.Account); err != nil {
		return Account{}, "", err
	}
	if p.URL != "" {
		if err := ValidateWebhookURL(p.URL); err != nil {
			return Account{}, "", err
		}
	}
	var secret string
	now := s.nowTS()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		url := p.URL
		if url == "" && !p.Remove { // rotate only: keep the URL
			var cur sql.NullString
			if err := s.txQueryRow(ctx, tx, `SELECT webhook_url FROM accounts WHERE name = $1`, p.Account).Scan(&cur); err != nil {
				return notFound(err, "account %q", p.Account)
			}
			if !cur.Valid {
				return inkwell.Errorf(inkwell.EINVALID, "account %q has no webhook URL: set one (its secret comes with it)", p.Account)
			}
			url = cur.String
		}
		var err error
		secret, err = s.setWebhookTx(ctx, tx, p.Account, url, p.RotateSecret, now)
		return err
	})
	if err != nil {
		return Account{}, "", err
	}
	a, err := s.Account(ctx, p.Account)
	return a, secret, err
}

// WebhookSecret reads an account's signing secret (tests and the drill
// verify signatures with it; the sender gets it with its claim).
func (s *Store) WebhookSecret(ctx context.Context, account string) (string, error) {
	var sec sql.NullString
	err := s.rdb.QueryRowContext(ctx, s.dialect.rebind(`SELECT webhook_secret FROM accounts WHERE name = $1`), account).Scan(&sec)
	if err != nil {
		return "", s.classify(notFound(err, "account %q", account))
	}
	return sec.String, nil
}

const deliveryColumns = `d.id, d.job_id, j.idempotency_key, d.account, d.event, d.job_error, d.job_error_class, d.occurred_at, d.created_at,
	d.attempts, d.next_attempt_at, d.last_attempt_at, d.last_status, d.last_error, d.delivered_at, d.gave_up_at, d.replay_of`

const deliveryFrom = ` FROM webhook_deliveries d JOIN jobs j ON j.id = d.job_id`

func scanDelivery(row rowScanner, extra ...any) (WebhookDelivery, error) {
	var d WebhookDelivery
	var jobErr, class, lastErr sql.NullString
	var status, replayOf sql.NullInt64
	var occurred, created, next, last, delivered, gaveUp nullTime
	dest := append([]any{&d.ID, &d.JobID, &d.IdempotencyKey, &d.Account, &d.Event, &jobErr, &class, &occurred, &created,
		&d.Attempts, &next, &last, &status, &lastErr, &delivered, &gaveUp, &replayOf}, extra...)
	if err := row.Scan(dest...); err != nil {
		return d, err
	}
	d.JobError, d.JobErrorClass, d.LastError = jobErr.String, class.String, lastErr.String
	d.LastStatus, d.ReplayOf = int(status.Int64), replayOf.Int64
	d.OccurredAt, d.CreatedAt, d.NextAttemptAt = occurred.Time, created.Time, next.Time
	d.LastAttemptAt, d.DeliveredAt, d.GaveUpAt = last.Ptr(), delivered.Ptr(), gaveUp.Ptr()
	return d, nil
}

// WebhookFilter selects deliveries for WebhookDeliveries.
type WebhookFilter struct {
	Account string // "": every account
	JobID   int64  // 0: every job
	Pending bool   // only those not delivered and not given up
	Limit   int    // default 100
}

// WebhookDeliveries lists deliveries, newest first.
func (s *Store) WebhookDeliveries(ctx context.Context, f WebhookFilter) ([]WebhookDelivery, error) {
	q := `SELECT ` + deliveryColumns + deliveryFrom + ` WHERE ($1 = '' OR d.account = $1) AND ($2 = 0 OR d.job_id = $2)`
	if f.Pending {
		q += ` AND d.delivered_at IS NULL AND d.gave_up_at IS NULL`
	}
	q += ` ORDER BY d.id DESC LIMIT $3`
	if f.Limit <= 0 {
		f.Limit = 100
	}
	scan := func(row rowScanner) (WebhookDelivery, error) { return scanDelivery(row) }
	return queryAll(ctx, s, "list webhook deliveries", scan, s.dialect.rebind(q), f.Account, f.JobID, f.Limit)
}

// WebhookDelivery returns one delivery (ENOTFOUND when there is none).
func (s *Store) WebhookDelivery(ctx context.Context, id int64) (WebhookDelivery, error) {
	d, err := scanDelivery(s.rdb.QueryRowContext(ctx, s.dialect.rebind(`SELECT `+deliveryColumns+deliveryFrom+` WHERE d.id = $1`), id))
	if err != nil {
		return d, s.classify(notFound(err, "webhook delivery %d", id))
	}
	return d, nil
}

// ClaimWebhooks claims up to n due deliveries of accounts that have a
// webhook URL. A claim counts the attempt (attempts + 1) and leases the
// row: it pushes next_attempt_at out by lease, so that a sender that dies
// mid-send leaves the row to be claimed again when the lease ends (at
// least once), and another sender meanwhile never takes it. On PostgreSQL
// the pick is FOR UPDATE SKIP LOCKED, so several serve processes claim
// apart without waiting on each other.
func (s *Store) ClaimWebhooks(ctx context.Context, n int, lease time.Duration) ([]WebhookSend, error) {
	if n <= 0 {
		return nil, nil
	}
	now := s.now()
	// A read first, on the read pool: an idle sender (nothing due, the
	// usual case) never takes the write lock (SQLite) or a row lock.
	var due int
	err := s.rdb.QueryRowContext(ctx, s.dialect.rebind(`SELECT COUNT(*) FROM (SELECT 1 FROM webhook_deliveries
		WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at <= $1 LIMIT 1) x`), s.ts(now)).Scan(&due)
	if err != nil {
		return nil, s.classify(fmt.Errorf("look for due webhook deliveries: %w", err))
	}
	if due == 0 {
		return nil, nil
	}
	claim := s.claimWebhooksSQL()
	var out []WebhookSend
	var parked int64
	var looked bool // for deliveries to park
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		out, parked, looked = out[:0], 0, false
		rows, err := s.txQuery(ctx, tx, claim, s.ts(now), n, s.ts(now.Add(lease)))
		if err != nil {
			return fmt.Errorf("claim webhook deliveries: %w", err)
		}
		var ids []string
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, strconv.FormatInt(id, 10))
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if len(ids) < n || s.parkLookDue(now) {
			if parked, err = s.parkOrphans(ctx, tx, now); err != nil {
				return err
			}
			looked = true
		}
		if len(ids) == 0 {
			return nil
		}
		// ids are int64s read from the database just now, never outside text.
		sel := `SELECT ` + deliveryColumns + `, a.webhook_url, a.webhook_secret` + deliveryFrom +
			` JOIN accounts a ON a.name = d.account WHERE d.id IN (` + strings.Join(ids, ",") + `) ORDER BY d.id`
		rows, err = tx.QueryContext(ctx, sel)
		if err != nil {
			return fmt.Errorf("read claimed webhook deliveries: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var w WebhookSend
			var u, sec sql.NullString
			if w.WebhookDelivery, err = scanDelivery(rows, &u, &sec); err != nil {
				return err
			}
			w.URL, w.Secret = u.String, sec.String
			out = append(out, w)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	if looked {
		s.lastPark.Store(now.UnixNano())
	}
	if parked > 0 {
		s.log.Info("webhooks: parked the due deliveries of accounts without a webhook URL; they are sent once one is set",
			"deliveries", parked)
	}
	return out, nil
}

// parkOrphans parks, in the claim's transaction, due deliveries of
// accounts that have no webhook URL: a claim that took fewer than it
// asked for while deliveries were due may have met some, and a run of
// full claims (a backlog being sent) looks for them once per parkEvery.
// They are parked once; no poll reads them again until a URL is set
// (WebhookParked). At most maxParkPerPoll a poll, so that one poll's hold
// of SQLite's write lock is bounded however many wait: with 200,000
// waiting, 20 polls of 0.2-0.8 s, then 15 µs a poll (all at once: one
// poll of 1.1-1.6 s; before parking, 70-100 ms every poll;
// BenchmarkWebhookPollOrphans).
func (s *Store) parkOrphans(ctx context.Context, tx *sql.Tx, now time.Time) (int64, error) {
	n, err := s.exec(ctx, tx, s.parkOrphanWebhooksSQL(), s.ts(now), s.ts(WebhookParked), maxParkPerPoll)
	if err != nil {
		return 0, fmt.Errorf("park webhook deliveries of accounts without a URL: %w", err)
	}
	return n, nil
}

// parkLookDue reports whether a full claim at now looks for deliveries to
// park: parkEvery after the last look, or at once when the clock went back
// past it.
func (s *Store) parkLookDue(now time.Time) bool {
	since := now.UnixNano() - s.lastPark.Load()
	return since >= int64(parkEvery) || since < 0
}

// maxParkPerPoll bounds the deliveries one poll parks.
const maxParkPerPoll = 10_000

// parkEvery: a sender whose claims are all full (it sends a backlog, and
// polls again at once) still looks for deliveries to park this often. Not
// on every full claim: with a backlog of deliveries to send, the look reads
// past all of them.
const parkEvery = time.Minute

// parkOrphanWebhooksSQL is parkOrphans' statement: $1 now, $2
// WebhookParked, $3 at most how many. Only due deliveries: one being sent
// holds its lease (next_attempt_at in the future) and is parked, if its
// account still has no URL, once a failed send makes it due again.
//
// On PostgreSQL, the locks say why no row is parked on a guess:
//   - orphan locks the accounts met FOR SHARE before any delivery is
//     written. A SetWebhook giving one a URL either waits for this park
//     and then makes its deliveries due (unparkWebhooks, after the
//     account's row), or commits first, and the lock, having waited, reads
//     the URL and leaves the account out. Only the accounts of the first
//     $3 due deliveries without a URL (none on an ordinary poll), in name
//     order, as every transaction that locks several accounts takes them
//     (lockBudgetsSQL): in table order the park deadlocked with an
//     outcome group locking two budgeted accounts.
//   - park takes the deliveries FOR UPDATE SKIP LOCKED, as a claim does:
//     two senders parking at once never wait on each other's rows (they
//     deadlocked), a row a claim holds is left to a later poll, and a row
//     leased since this statement began is read again as it is now, no
//     longer due, and left out.
func (s *Store) parkOrphanWebhooksSQL() string {
	const due = `d.delivered_at IS NULL AND d.gave_up_at IS NULL AND d.next_attempt_at <= $1`
	return `WITH met AS MATERIALIZED (
		SELECT DISTINCT account FROM (SELECT d.account FROM webhook_deliveries d
			WHERE ` + due + `
			  AND NOT EXISTS (SELECT 1 FROM accounts a WHERE a.name = d.account AND a.webhook_url IS NOT NULL)
			ORDER BY d.next_attempt_at LIMIT $3) x
	), orphan AS MATERIALIZED (
		SELECT a.name FROM accounts a WHERE a.name IN (SELECT account FROM met) AND a.webhook_url IS NULL
		ORDER BY a.name` + s.dialect.shareLock + `
	), park AS MATERIALIZED (
		SELECT d.id FROM webhook_deliveries d
		WHERE ` + due + ` AND d.account IN (SELECT name FROM orphan)
		ORDER BY d.next_attempt_at LIMIT $3` + s.dialect.claimLock + `
	)
	UPDATE webhook_deliveries SET next_attempt_at = $2
	WHERE ` + s.dialect.picked("park")
}

// WebhookDelivered records a 2xx for a delivery. It is idempotent: a
// delivery already marked (by this sender before a crash, or by another
// after a lease ran out) stays as it was, and that is no error.
func (s *Store) WebhookDelivered(ctx context.Context, id int64, status int) error {
	const upd = `UPDATE webhook_deliveries SET delivered_at = $2, last_status = $3, last_error = NULL
		WHERE id = $1 AND delivered_at IS NULL`
	now := s.nowTS() // before the transaction: see setWebhookTx
	return s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := s.exec(ctx, tx, upd, id, now, status)
		return err
	})
}

// WebhookFailParams record one failed send.
type WebhookFailParams struct {
	ID       int64
	Attempts int       // the attempts count of the claim that sent it (fence)
	Status   int       // the receiver's HTTP status; 0: no answer
	Error    string    // what went wrong, in words
	NextAt   time.Time // when to try again
	GiveUp   bool      // no more attempts: gave_up_at is set instead
	// ReceiverDown says the receiver did not answer, or answered 429 or
	// 5xx: the account's other deliveries due before NextAt would meet
	// the same, so they wait until then too (webhookHoldAccount), if the
	// account's URL is still URL, the one the send went to.
	ReceiverDown bool
	URL          string
}

// webhookHoldAccount is the rest of a failed send whose receiver is down:
// the account's other pending deliveries due before the failed one's next
// try ($2) wait until then, so that a dead receiver's backlog does not
// take every send slot from the other accounts' deliveries, one time-out
// after another. Their attempts are not counted (they were not sent). At
// most webhookHoldChunk a failure: a backlog larger than that is held by
// the failures that follow. On PostgreSQL rows another sender holds are
// skipped (claimLock), so two senders holding one account never wait on
// each other.
const webhookHoldChunk = 10_000

// $1 is the failed delivery, $2 its next try, $3 the URL it was sent to:
// the account is the delivery's only while it still sends there (a URL
// changed since the claim is another receiver, and nothing is held).
func (s *Store) webhookHoldAccountSQL() string {
	return `UPDATE webhook_deliveries SET next_attempt_at = $2
		WHERE id IN (SELECT id FROM webhook_deliveries
			WHERE account = (SELECT d.account FROM webhook_deliveries d JOIN accounts a ON a.name = d.account
			                 WHERE d.id = $1 AND a.webhook_url = $3)
			  AND delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at < $2 AND id <> $1
			ORDER BY next_attempt_at LIMIT ` + strconv.Itoa(webhookHoldChunk) + s.dialect.claimLock + `)`
}

// claimWebhooksSQL is ClaimWebhooks' statement: $1 now, $2 how many, $3
// the lease's end.
func (s *Store) claimWebhooksSQL() string {
	// Picked once in a materialized CTE: the PostgreSQL planner may rescan
	// an IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED) and take more than n
	// (see ClaimUpTo). EXISTS, not a join, so that only the delivery rows
	// are locked, never the account's.
	return `WITH due AS MATERIALIZED (
		SELECT d.id FROM webhook_deliveries d
		WHERE d.delivered_at IS NULL AND d.gave_up_at IS NULL AND d.next_attempt_at <= $1
		  AND EXISTS (SELECT 1 FROM accounts a WHERE a.name = d.account AND a.webhook_url IS NOT NULL)
		ORDER BY d.next_attempt_at, d.id LIMIT $2` + s.dialect.claimLock + `)
		UPDATE webhook_deliveries SET attempts = attempts + 1, next_attempt_at = $3, last_attempt_at = $1
		WHERE ` + s.dialect.picked("due") + ` AND (delivered_at IS NULL AND gave_up_at IS NULL) IS TRUE
		RETURNING id`
}

// webhookFailed is WebhookFailed's write. Its guard is written "(…) IS
// TRUE", which implies no partial index: "delivered_at IS NULL AND
// gave_up_at IS NULL" let a kept plan read all of webhook_deliveries_due,
// every pending delivery, for each failed send (as deliveries pile up
// while a receiver is down).
const webhookFailed = `UPDATE webhook_deliveries SET last_status = $3, last_error = $4, next_attempt_at = $5, gave_up_at = $6
		WHERE id = $1 AND attempts = $2 AND (delivered_at IS NULL AND gave_up_at IS NULL) IS TRUE`

// WebhookFailed records a failed send: the error and when to try again,
// or that the sender gave up. Fenced by the claim's attempts count: when
// the lease ran out and another sender claimed the row since, this late
// word changes nothing (and is no error). With ReceiverDown (and not
// GiveUp) the account's other deliveries due before NextAt wait until then
// too; held is how many.
func (s *Store) WebhookFailed(ctx context.Context, p WebhookFailParams) (held int, err error) {
	upd := webhookFailed
	var status sql.NullInt64
	if p.Status != 0 {
		status = sql.NullInt64{Int64: int64(p.Status), Valid: true}
	}
	var gaveUp any
	if p.GiveUp {
		gaveUp = s.nowTS()
	}
	next := s.ts(p.NextAt)
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		held = 0
		n, err := s.exec(ctx, tx, upd, p.ID, p.Attempts, status, p.Error, next, gaveUp)
		if err != nil || n != 1 || !p.ReceiverDown || p.GiveUp {
			return err
		}
		n, err = s.exec(ctx, tx, s.webhookHoldAccountSQL(), p.ID, next, p.URL)
		held = int(n)
		return err
	})
	return held, err
}

// ReplayWebhook sends a delivery again. A pending one is made due now (it
// keeps its row). A delivered or given-up one gets a new row, replay_of
// naming the original, with the same event data and the same webhook-id,
// due now. The account must have a webhook URL. It returns the row that
// will be sent and whether it is new.
func (s *Store) ReplayWebhook(ctx context.Context, id int64) (WebhookDelivery, bool, error) {
	var newID int64
	now := s.nowTS() // before the transaction: see setWebhookTx
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var delivered, gaveUp nullTime
		var hasURL bool
		err := s.txQueryRow(ctx, tx, `SELECT d.delivered_at, d.gave_up_at, a.webhook_url IS NOT NULL
			FROM webhook_deliveries d JOIN accounts a ON a.name = d.account WHERE d.id = $1`, id).Scan(&delivered, &gaveUp, &hasURL)
		if err != nil {
			return notFound(err, "webhook delivery %d", id)
		}
		if !hasURL {
			return inkwell.Errorf(inkwell.EINVALID, "webhook delivery %d: its account has no webhook URL now: set one with 'inkwell accounts webhook', then replay", id)
		}
		if !delivered.Valid && !gaveUp.Valid {
			newID = id
			return s.execOne(ctx, tx, `UPDATE webhook_deliveries SET next_attempt_at = $2 WHERE id = $1 AND delivered_at IS NULL AND gave_up_at IS NULL`, id, now)
		}
		const copyRow = `INSERT INTO webhook_deliveries (job_id, account, event, job_error, job_error_class, occurred_at, created_at, next_attempt_at, replay_of)
			SELECT job_id, account, event, job_error, job_error_class, occurred_at, $2, $2, COALESCE(replay_of, id)
			FROM webhook_deliveries WHERE id = $1 RETURNING id`
		return s.txQueryRow(ctx, tx, copyRow, id, now).Scan(&newID)
	})
	if err != nil {
		return WebhookDelivery{}, false, err
	}
	d, err := s.WebhookDelivery(ctx, newID)
	return d, newID != id, err
}

// WebhookBacklog is what the metrics say of the deliveries not sent yet.
type WebhookBacklog struct {
	Pending int64      // to be sent: not delivered, not given up, not parked
	Oldest  *time.Time // the oldest of those's created_at
	Parked  int64      // waiting for their account to have a URL (WebhookParked)
}

// WebhookBacklog counts the pending deliveries (the due index only). The
// parked ones are counted apart: they wait for an operator, not for a
// sender, and would hold the oldest pending age up for as long as they
// wait. Each part reads its own range of the due index (the pending ones
// once, for their count and oldest), so that the parked ones cost a scrape
// only their count, however many wait.
func (s *Store) WebhookBacklog(ctx context.Context) (WebhookBacklog, error) {
	var b WebhookBacklog
	var oldest nullTime
	const pending = `FROM webhook_deliveries WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at`
	err := s.rdb.QueryRowContext(ctx, s.dialect.rebind(`SELECT p.n, (SELECT COUNT(*) `+pending+` >= $1), p.oldest
		FROM (SELECT COUNT(*) AS n, MIN(created_at) AS oldest `+pending+` < $1) p`), s.ts(WebhookParked)).Scan(&b.Pending, &b.Parked, &oldest)
	if err != nil {
		return b, s.classify(fmt.Errorf("webhook backlog: %w", err))
	}
	b.Oldest = oldest.Ptr()
	return b, nil
}
