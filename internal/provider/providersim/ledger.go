package providersim

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the ledger's driver, registered as "sqlite"
)

// Ledger is the simulator's record of what it answered and billed, as
// GET /ledger returns it.
type Ledger struct {
	Entries           []LedgerEntry `json:"entries"`
	TotalBills        int64         `json:"total_bills"`
	TotalAmountMicros int64         `json:"total_amount_micros"` // sum of amount_micros * bills
}

// KindMessages is the Kind of an entry billed by POST /v1/messages, which
// honours no idempotency key; a chat completion's Kind is "".
const KindMessages = "messages"

// LedgerEntry is one billed answer. Key is the honoured idempotency key:
// empty for a chat completion sent without one, and for every message, so
// such calls get one entry each. SentKey is the Idempotency-Key header a
// message was sent with, not honoured ("" for a chat completion).
type LedgerEntry struct {
	Key          string `json:"key"`
	SentKey      string `json:"sent_key,omitempty"`
	Kind         string `json:"kind,omitempty"` // "" or KindMessages
	RequestID    string `json:"request_id"`
	Calls        int64  `json:"calls"` // answered calls for this entry, repeats included
	Bills        int64  `json:"bills"` // times billed: 1, unless something is badly wrong
	AmountMicros int64  `json:"amount_micros"`
	Text         string `json:"text"`
}

// Entry returns the entry for an idempotency key.
func (l Ledger) Entry(key string) (LedgerEntry, bool) {
	for _, e := range l.Entries {
		if key != "" && e.Key == key {
			return e, true
		}
	}
	return LedgerEntry{}, false
}

// Sent returns the entries of the calls sent under an Idempotency-Key,
// honoured or not, in the order they were billed.
func (l Ledger) Sent(key string) []LedgerEntry {
	var out []LedgerEntry
	for _, e := range l.Entries {
		if key != "" && (e.Key == key || e.SentKey == key) {
			out = append(out, e)
		}
	}
	return out
}

// Billed is how many times calls sent under an Idempotency-Key were
// billed: 1 for a job whose provider honours keys, however often it was
// sent; once per answered call for one that does not.
func (l Ledger) Billed(key string) int64 {
	var n int64
	for _, e := range l.Sent(key) {
		n += e.Bills
	}
	return n
}

// Request returns the entry for a provider request id, as a charge names it.
func (l Ledger) Request(requestID string) (LedgerEntry, bool) {
	for _, e := range l.Entries {
		if e.RequestID == requestID {
			return e, true
		}
	}
	return LedgerEntry{}, false
}

// ReadLedger reads the ledger file at path without a server; the drill uses
// it after killing processes. It refuses a missing file rather than
// creating an empty ledger that would read as "nothing billed".
func ReadLedger(ctx context.Context, path string) (Ledger, error) {
	if _, err := os.Stat(path); err != nil {
		return Ledger{}, fmt.Errorf("read ledger: %w", err)
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return Ledger{}, fmt.Errorf("read ledger: %w", err)
	}
	defer db.Close()
	return readLedger(ctx, db)
}

// FetchLedger reads a running simulator's ledger over HTTP. baseURL is the
// simulator's root, such as "http://127.0.0.1:9090".
func FetchLedger(ctx context.Context, client *http.Client, baseURL string) (Ledger, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(baseURL, "/")+"/ledger", nil)
	if err != nil {
		return Ledger{}, fmt.Errorf("fetch ledger: %w", err)
	}
	res, err := client.Do(req)
	if err != nil {
		return Ledger{}, fmt.Errorf("fetch ledger: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return Ledger{}, fmt.Errorf("fetch ledger: HTTP %d", res.StatusCode)
	}
	var l Ledger
	if err := json.NewDecoder(res.Body).Decode(&l); err != nil {
		return Ledger{}, fmt.Errorf("fetch ledger: decode: %w", err)
	}
	return l, nil
}

// dsn opens the ledger durably: WAL so GET /ledger and ReadLedger never
// block a bill, synchronous(FULL) so a committed bill survives a power cut
// (one fsync per group of bills, billing.go), and immediate transactions so
// a writer takes the write lock at BEGIN: one server has one writer, but
// two processes on one file queue on busy_timeout instead of failing with
// SQLITE_BUSY when both try to upgrade a read lock.
func dsn(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
}

const schema = `CREATE TABLE IF NOT EXISTS ledger (
	seq           INTEGER PRIMARY KEY AUTOINCREMENT,
	idem_key      TEXT UNIQUE,          -- NULL when the call had no key: billed each time
	request_id    TEXT NOT NULL UNIQUE,
	request_hash  TEXT NOT NULL,        -- prompt and words, to refuse a key reused for another request
	model         TEXT NOT NULL,
	text          TEXT NOT NULL,
	amount_micros INTEGER NOT NULL,
	calls         INTEGER NOT NULL,
	bills         INTEGER NOT NULL,
	created_at    INTEGER NOT NULL,     -- unix seconds, the answer's "created"
	last_call_at  INTEGER NOT NULL,
	kind          TEXT,                 -- NULL: a chat completion; 'messages': POST /v1/messages
	sent_key      TEXT                  -- the Idempotency-Key header of a message, not honoured
)`

// addedColumns are the columns added since the first ledger files: a file
// that lacks them is migrated in place when a server opens it.
var addedColumns = []struct{ name, ddl string }{
	{"kind", `ALTER TABLE ledger ADD COLUMN kind TEXT`},
	{"sent_key", `ALTER TABLE ledger ADD COLUMN sent_key TEXT`},
}

func openLedger(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create ledger in %s: %w", path, err)
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate ledger in %s: %w", path, err)
	}
	return db, nil
}

// migrate adds the columns an older ledger file lacks; its rows, all chat
// completions, read as before (kind and sent_key NULL).
func migrate(ctx context.Context, db *sql.DB) error {
	cols, err := columns(ctx, db)
	if err != nil {
		return err
	}
	for _, c := range addedColumns {
		if cols[c.name] {
			continue
		}
		if _, err := db.ExecContext(ctx, c.ddl); err != nil {
			return fmt.Errorf("add column %s: %w", c.name, err)
		}
	}
	return nil
}

// columns names the ledger table's columns.
func columns(ctx context.Context, db *sql.DB) (map[string]bool, error) {
	rows, err := db.QueryContext(ctx, `SELECT name FROM pragma_table_info('ledger')`)
	if err != nil {
		return nil, fmt.Errorf("read ledger columns: %w", err)
	}
	defer rows.Close()
	cols := make(map[string]bool)
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("read ledger columns: %w", err)
		}
		cols[name] = true
	}
	return cols, rows.Err()
}

// entry is one ledger row as the server uses it.
type entry struct {
	Key         sql.NullString
	RequestID   string
	RequestHash string
	Model       string
	Text        string
	Amount      int64
	Calls       int64
	Created     int64
	SentKey     sql.NullString // a messages call's Idempotency-Key, not honoured
}

// errKeyReused: the key was billed for a different prompt. The simulator
// refuses like Stripe does, rather than answer another request's text.
var errKeyReused = errors.New("idempotency key reused for a different request")

// bill records one answered call, as one member of a group's transaction
// (billing.go), and returns the row to answer with. A new key (or no key)
// inserts a billed row; a known key counts the call and returns the stored
// row unbilled. The INSERT comes first so that of two calls with one new
// key, in one group or in two, exactly one inserts and the other reads
// its row. Every path writes with one statement at most (the INSERT, or
// the UPDATE after an INSERT that did nothing), so a constraint failure
// is undone by SQLite's statement rollback alone and the group's other
// bills stand.
func bill(ctx context.Context, tx *sql.Tx, e entry, now time.Time) (_ entry, billed bool, err error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO ledger
		(idem_key, request_id, request_hash, model, text, amount_micros, calls, bills, created_at, last_call_at)
		VALUES (?, ?, ?, ?, ?, ?, 1, 1, ?, ?) ON CONFLICT (idem_key) DO NOTHING`,
		e.Key, e.RequestID, e.RequestHash, e.Model, e.Text, e.Amount, now.Unix(), now.Unix())
	if err != nil {
		return entry{}, false, fmt.Errorf("bill: insert: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return entry{}, false, fmt.Errorf("bill: insert: %w", err)
	} else if n == 1 {
		e.Calls, e.Created = 1, now.Unix()
		return e, true, nil
	}
	stored, err := repeatCall(ctx, tx, e, now)
	if err != nil {
		return entry{}, false, err
	}
	return stored, false, nil
}

// repeatCall counts a call for a key already in the ledger and returns the
// stored answer. A key reused for another request writes nothing.
func repeatCall(ctx context.Context, tx *sql.Tx, e entry, now time.Time) (entry, error) {
	s := entry{Key: e.Key}
	err := tx.QueryRowContext(ctx, `SELECT request_id, request_hash, model, text, amount_micros, calls, created_at
		FROM ledger WHERE idem_key = ?`, e.Key).
		Scan(&s.RequestID, &s.RequestHash, &s.Model, &s.Text, &s.Amount, &s.Calls, &s.Created)
	if err != nil {
		return entry{}, fmt.Errorf("bill: read stored answer: %w", err)
	}
	if s.RequestHash != e.RequestHash {
		return entry{}, errKeyReused
	}
	if _, err := tx.ExecContext(ctx, `UPDATE ledger SET calls = calls + 1, last_call_at = ? WHERE idem_key = ?`,
		now.Unix(), e.Key); err != nil {
		return entry{}, fmt.Errorf("bill: count repeat: %w", err)
	}
	s.Calls++
	return s, nil
}

// billEach records one answered messages call as its own billed entry, as
// one member of a group's transaction: the Messages API honours no
// idempotency key, so a repeated key is billed again. The key the call
// sent is kept, to count a job's bills. One statement, as bill.
func billEach(ctx context.Context, tx *sql.Tx, e entry, now time.Time) (entry, error) {
	_, err := tx.ExecContext(ctx, `INSERT INTO ledger
		(idem_key, request_id, request_hash, model, text, amount_micros, calls, bills, created_at, last_call_at, kind, sent_key)
		VALUES (NULL, ?, ?, ?, ?, ?, 1, 1, ?, ?, ?, ?)`,
		e.RequestID, e.RequestHash, e.Model, e.Text, e.Amount, now.Unix(), now.Unix(), KindMessages, e.SentKey)
	if err != nil {
		return entry{}, fmt.Errorf("bill: insert: %w", err)
	}
	e.Calls, e.Created = 1, now.Unix()
	return e, nil
}

// readLedger reads every entry. A file no server has migrated yet (ReadLedger
// on an old file) reads as chat completions, without being written to.
func readLedger(ctx context.Context, db *sql.DB) (Ledger, error) {
	cols, err := columns(ctx, db)
	if err != nil {
		return Ledger{}, fmt.Errorf("read ledger: %w", err)
	}
	kind, sentKey := "COALESCE(kind, '')", "COALESCE(sent_key, '')"
	if !cols["kind"] || !cols["sent_key"] {
		kind, sentKey = "''", "''"
	}
	rows, err := db.QueryContext(ctx, `SELECT COALESCE(idem_key, ''), `+sentKey+`, `+kind+`, request_id, calls, bills, amount_micros, text
		FROM ledger ORDER BY seq`)
	if err != nil {
		return Ledger{}, fmt.Errorf("read ledger: %w", err)
	}
	defer rows.Close()
	l := Ledger{Entries: []LedgerEntry{}}
	for rows.Next() {
		var e LedgerEntry
		if err := rows.Scan(&e.Key, &e.SentKey, &e.Kind, &e.RequestID, &e.Calls, &e.Bills, &e.AmountMicros, &e.Text); err != nil {
			return Ledger{}, fmt.Errorf("read ledger: %w", err)
		}
		l.Entries = append(l.Entries, e)
		l.TotalBills += e.Bills
		l.TotalAmountMicros += e.AmountMicros * e.Bills
	}
	if err := rows.Err(); err != nil {
		return Ledger{}, fmt.Errorf("read ledger: %w", err)
	}
	return l, nil
}
