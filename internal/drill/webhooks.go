package drill

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/inkwell/inkwell/internal/store"
)

// Webhooks in the drill (docs/design.md §11): every scenario's database gets
// the drill's account ("drill", the account of every request the clients
// send) with a webhook URL on a real receiver in the drill's own process,
// set by the real `inkwell accounts webhook NAME --url` before the first
// serve. So every job end of every scenario writes a delivery, every serve
// sends them, and a crash at any point (webhook.after-send above all) must
// leave the deliveries as check_webhooks.go holds them: a row for every
// ended job at every read, each delivered at least once in the end.

// drillAccount is the account the clients' requests name (scenario.items,
// random.go's workloads).
const drillAccount = "drill"

// webhookTimeout is serve's --webhook-timeout in the drill: a send cut off
// by a kill is claimed again after its lease (timeout + 5 s).
const webhookTimeout = "1s"

// hooks is the drill's webhook receiver: a real HTTP server on loopback
// that answers 204 and counts the webhook-ids it received.
type hooks struct {
	url string
	srv *http.Server
	mu  sync.Mutex
	ids map[string]int
}

func startHooks() (*hooks, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("drill: webhook receiver: %w", err)
	}
	h := &hooks{url: "http://" + ln.Addr().String(), ids: map[string]int{}}
	h.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.ids[r.Header.Get("webhook-id")]++
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() {
		if err := h.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // deliveries it missed stay pending: the checker says so
		}
	}()
	return h, nil
}

// received is a copy of the webhook-ids received so far, with their counts.
func (h *hooks) received() map[string]int {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.ids))
	for k, v := range h.ids {
		out[k] = v
	}
	return out
}

func (h *hooks) stop() {
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = h.srv.Shutdown(ctx)
}

// addWebhookAccounts runs `inkwell accounts webhook NAME --url …` on
// the scenario's fresh database (which also migrates it) for each account
// of p.webhookAccounts ("drill" when none is set; random mode gives half
// its clients' accounts a webhook, and the other half none).
func (p *play) addWebhookAccounts(ctx context.Context) error {
	if p.d.hooks == nil {
		return nil // a drill built by a test without a receiver
	}
	names := p.webhookAccounts
	if len(names) == 0 {
		names = []string{drillAccount}
	}
	for _, name := range names {
		logPath := filepath.Join(p.d.work, p.slug+".accounts.log")
		// The account exists already (giveBudgets made it, with its budget).
		args := []string{"accounts", "webhook", name, "--url", p.d.hooks.url + "/" + p.slug, "--db", p.dsn}
		c, err := startChild("accounts webhook", p.d.cfg.Bin, args, childEnv(""), logPath)
		if err != nil {
			return err
		}
		p.ps.add(c)
		if err := c.waitExit(ctx, p.d.lim.stop); err != nil {
			c.kill()
			return fmt.Errorf("inkwell accounts webhook: %w", err)
		}
		if !c.state.Success() {
			return fmt.Errorf("inkwell accounts webhook %s --url exited with %s; last lines:\n%s", name, c.exitText(), c.tailText())
		}
	}
	return nil
}

// awaitWebhooks waits, before the last serve stops, until the database
// holds no delivery that is not delivered: the receiver has been up all
// along, so each one must get there.
func (p *play) awaitWebhooks(ctx context.Context, sv *child) error {
	st, err := store.Open(ctx, p.dsn, store.Options{NoMigrate: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	defer st.Close()
	const q = `SELECT COUNT(*) FROM webhook_deliveries WHERE delivered_at IS NULL`
	var left int
	err = sv.poll(ctx, p.d.lim.settle, func() bool {
		return st.DB().QueryRowContext(ctx, q).Scan(&left) == nil && left == 0
	})
	if err != nil {
		return fmt.Errorf("waiting for every webhook delivery to be delivered on %s: %w; %d not delivered", sv.name, err, left)
	}
	p.event("every webhook delivery is delivered", "")
	return nil
}

// DeliveryRow is one row of webhook_deliveries.
type DeliveryRow struct {
	ID, JobID              int64
	Account, Event         string
	OccurredAt             string
	Attempts               int64
	DeliveredAt, GaveUpAt  sql.NullString
	ReplayOf               sql.NullInt64
	LastError              sql.NullString
	LastStatus             sql.NullInt64
	NextAttemptAt, Created string
}

// WebhookAccountRow is an account with a webhook URL.
type WebhookAccountRow struct {
	Name  string
	Since sql.NullString
}

const (
	qDeliveries = `SELECT id, job_id, account, event, occurred_at, attempts, delivered_at, gave_up_at, replay_of, last_error, last_status,
			next_attempt_at, created_at
		FROM webhook_deliveries ORDER BY id`
	qWebhookAccounts = `SELECT name, webhook_since FROM accounts WHERE webhook_url IS NOT NULL ORDER BY name`
)

func readDeliveries(ctx context.Context, tx *sql.Tx, s *Snapshot) error {
	err := each(ctx, tx, qDeliveries, func(rows *sql.Rows) error {
		var d DeliveryRow
		err := rows.Scan(&d.ID, &d.JobID, &d.Account, &d.Event, &d.OccurredAt, &d.Attempts, &d.DeliveredAt, &d.GaveUpAt, &d.ReplayOf,
			&d.LastError, &d.LastStatus, &d.NextAttemptAt, &d.Created)
		s.Deliveries = append(s.Deliveries, d)
		return err
	})
	if err != nil {
		return err
	}
	return each(ctx, tx, qWebhookAccounts, func(rows *sql.Rows) error {
		var a WebhookAccountRow
		err := rows.Scan(&a.Name, &a.Since)
		s.WebhookAccounts = append(s.WebhookAccounts, a)
		return err
	})
}
