package providersim_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
)

// call is one answered call as the billing tests see it.
type call struct {
	key, id string
	kind    string // "" or providersim.KindMessages
}

// postCall sends one chat completion, or one message when kind is
// KindMessages, under key, and returns the answer's id. It reports
// instead of failing, to be called from any goroutine.
func postCall(client *http.Client, baseURL, kind, key, prompt string) (string, error) {
	path, body := "/v1/chat/completions", chatBody(prompt, 4)
	if kind == providersim.KindMessages {
		path = "/v1/messages"
		body = fmt.Sprintf(`{"model":"claude-x","max_tokens":4,"messages":[{"role":"user","content":%q}]}`, prompt)
	}
	req, err := http.NewRequest(http.MethodPost, baseURL+path, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("Idempotency-Key", key)
	res, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: HTTP %d: %s", path, key, res.StatusCode, raw)
	}
	var a struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &a); err != nil || a.ID == "" {
		return "", fmt.Errorf("%s %s: answer %s: %v", path, key, raw, err)
	}
	return a.ID, nil
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// kindOf alternates chat completions and messages, so groups mix both.
func kindOf(i int) string {
	if i%2 == 1 {
		return providersim.KindMessages
	}
	return ""
}

// TestServer_ConcurrentCallsBilledOnceEach: 64 clients × 10 calls, each
// under its own key, chat completions and messages mixed. Bills that
// arrive together share a transaction; each call must still be billed
// exactly once, and the ledger must hold exactly the calls answered.
func TestServer_ConcurrentCallsBilledOnceEach(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{Logger: discard()})
	const clients, perClient = 64, 10
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	calls := make([][]call, clients)
	errs := make(chan error, clients)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range clients {
		wg.Go(func() {
			<-start
			for i := range perClient {
				c := call{key: fmt.Sprintf("g%02d-c%d", g, i), kind: kindOf(i)}
				id, err := postCall(client, sim.URL, c.kind, c.key, "p "+c.key)
				if err != nil {
					errs <- err
					return
				}
				c.id = id
				calls[g] = append(calls[g], c)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	l := sim.MustLedger(t)
	if len(l.Entries) != clients*perClient || l.TotalBills != clients*perClient {
		t.Errorf("ledger has %d entries, %d bills; want %d of each", len(l.Entries), l.TotalBills, clients*perClient)
	}
	ids := make(map[string]bool, len(l.Entries))
	for _, e := range l.Entries {
		if ids[e.RequestID] {
			t.Errorf("request %s is in the ledger twice", e.RequestID)
		}
		ids[e.RequestID] = true
	}
	for _, cs := range calls {
		for _, c := range cs {
			sent := l.Sent(c.key)
			if len(sent) != 1 || sent[0].RequestID != c.id || sent[0].Bills != 1 || sent[0].Calls != 1 || sent[0].Kind != c.kind {
				t.Errorf("key %s answered as %s (kind %q): ledger has %+v, want it billed once", c.key, c.id, c.kind, sent)
			}
			delete(ids, c.id)
		}
	}
	for id := range ids {
		t.Errorf("ledger bills %s, which no call was answered as", id)
	}
}

// TestServer_BilledBeforeAnswered: the bill is committed before its answer
// is written, in a group or alone. Right after each answer, the test reads
// the ledger file through a connection of its own and must find the bill.
func TestServer_BilledBeforeAnswered(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{Logger: discard()})
	db, err := sql.Open("sqlite", "file:"+sim.LedgerPath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const clients, perClient = 16, 20
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for g := range clients {
		wg.Go(func() {
			for i := range perClient {
				key := fmt.Sprintf("g%02d-c%d", g, i)
				id, err := postCall(client, sim.URL, kindOf(i), key, "p")
				if err != nil {
					errs <- err
					return
				}
				var bills int64
				if err := db.QueryRow(`SELECT bills FROM ledger WHERE request_id = ?`, id).Scan(&bills); err != nil || bills != 1 {
					errs <- fmt.Errorf("%s answered as %s: ledger read right after gives bills %d, %v; want the bill committed", key, id, bills, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
