package drill

import (
	"encoding/json"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// Invariants of webhooks (docs/design.md §11), as a violation names them.
const (
	InvWebhookRow       = "§11 every ended job of an account with a webhook has a delivery row for that end"
	InvWebhookDelivered = "§11 each delivery is delivered at least once once the receiver is up"
)

// webhooks checks, in any snapshot, that every job that ended (done or
// failed) while its account had a webhook has a delivery row for that end
// (its event, at its finished_at): the row is written in the transaction
// that ends the job, so no instant may show one without the other.
func (c *checker) webhooks() {
	s := c.snap
	since := map[string]string{}
	for _, a := range s.WebhookAccounts {
		since[a.Name] = a.Since.String
	}
	jobs := map[int64]bool{}
	for _, j := range s.Jobs {
		jobs[j.ID] = true
	}
	ends := map[int64][]DeliveryRow{}
	for _, d := range s.Deliveries {
		ends[d.JobID] = append(ends[d.JobID], d)
		if !jobs[d.JobID] {
			c.add(d.JobID, InvWebhookRow, "delivery %d names job %d, which does not exist", d.ID, d.JobID)
		}
	}
	for _, j := range s.Jobs {
		if j.Status != inkwell.StatusDone && j.Status != inkwell.StatusFailed {
			continue
		}
		from, ok := since[payloadAccount(j.Payload)]
		if !ok || !j.Finished.Valid || before(j.Finished.String, from) {
			continue
		}
		found := false
		for _, d := range ends[j.ID] {
			if d.Event == "job."+j.Status && sameInstant(d.OccurredAt, j.Finished.String) {
				found = true
			}
		}
		if !found {
			c.add(j.ID, InvWebhookRow, "the job is %s since %s and its account %q has a webhook, but no delivery says so (deliveries of the job: %d)",
				j.Status, j.Finished.String, payloadAccount(j.Payload), len(ends[j.ID]))
		}
	}
}

// webhooksFinal checks the end: the receiver was up all along, so every
// delivery is delivered, and each one marked delivered reached it (when
// the evidence has the receiver's log).
func (c *checker) webhooksFinal(e Evidence) {
	for _, d := range c.snap.Deliveries {
		if !d.DeliveredAt.Valid {
			state := "pending"
			if d.GaveUpAt.Valid {
				state = "given up"
			}
			c.add(d.JobID, InvWebhookDelivered, "delivery %d (%s) is %s after %d send(s) at the end (last error %q)", d.ID, d.Event, state, d.Attempts, d.LastError.String)
			continue
		}
		if e.WebhookIDs == nil {
			continue
		}
		id := store.WebhookDelivery{ID: d.ID, ReplayOf: d.ReplayOf.Int64}.MessageID(c.snap.Installation.ID)
		if e.WebhookIDs[id] == 0 {
			c.add(d.JobID, InvWebhookDelivered, "delivery %d is marked delivered, but the receiver never got webhook-id %s", d.ID, id)
		}
	}
}

// payloadAccount is the account a job's stored request names, as the
// delivery trigger reads it: "default" when it names none.
func payloadAccount(payload string) string {
	var r struct {
		Account *string `json:"account"`
	}
	if json.Unmarshal([]byte(payload), &r) != nil || r.Account == nil {
		return inkwell.DefaultAccount
	}
	return *r.Account
}

// drillTime reads a time as the drivers give it: Inkwell's SQLite text or
// PostgreSQL's RFC 3339.
func drillTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// before reports whether time a is before time b; "" or an unreadable b is
// the beginning of time.
func before(a, b string) bool {
	ta, okA := drillTime(a)
	tb, okB := drillTime(b)
	return okA && okB && ta.Before(tb)
}

func sameInstant(a, b string) bool {
	ta, okA := drillTime(a)
	tb, okB := drillTime(b)
	if !okA || !okB {
		return a == b
	}
	return ta.Equal(tb)
}
