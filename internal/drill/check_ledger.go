package drill

import (
	"strconv"
	"strings"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider/providersim"
)

// InvBillHasJob: a bill under a job's key names a job the database holds;
// otherwise an accepted job was lost after the provider was paid for it.
const InvBillHasJob = "6 every bill belongs to a job the database holds"

// billing is what all the drill's simulators together say about one key.
type billing struct {
	calls, bills int64
	text         string
}

// billings sums the ledger by idempotency key, across simulators: the
// same key billed by two providers is billed twice.
func (s Snapshot) billings() map[string]billing {
	out := map[string]billing{}
	for _, e := range s.Ledger {
		if e.Key == "" {
			continue
		}
		b := out[e.Key]
		b.calls += e.Calls
		b.bills += e.Bills
		if b.text == "" {
			b.text = e.Text
		}
		out[e.Key] = b
	}
	return out
}

func (s Snapshot) ledgerRequest(id string) (providersim.LedgerEntry, bool) {
	for _, e := range s.Ledger {
		if e.RequestID == id {
			return e, true
		}
	}
	return providersim.LedgerEntry{}, false
}

// ledger checks invariant 6: the provider billed each job at most once,
// every charge names a request the provider knows under the job's own key
// and amount, and every stored text is the text that was billed.
func (c *checker) ledger() {
	s := c.snap
	bills := s.billings()
	for _, j := range s.Jobs {
		key := s.Installation.ProviderKey(j.ID, j.Key)
		b := bills[key]
		if b.bills > 1 {
			c.add(j.ID, InvBilledOnce, "provider key %s was billed %d times (%d calls)", key, b.bills, b.calls)
		}
		for _, ch := range s.chargesOf(j.ID) {
			e, ok := s.ledgerRequest(ch.ProviderRequestID)
			switch {
			case !ok:
				c.add(j.ID, InvChargeKnown, "charge names provider request %q, which no provider ledger has", ch.ProviderRequestID)
			case e.Key != key:
				c.add(j.ID, InvChargeKnown, "charge names provider request %s, billed under key %q, not this job's key %s", e.RequestID, e.Key, key)
			case e.AmountMicros != ch.AmountMicros:
				c.add(j.ID, InvChargeKnown, "charge is %d micros, the provider billed %d for request %s", ch.AmountMicros, e.AmountMicros, e.RequestID)
			}
		}
		for _, r := range s.resultsOf(j.ID) {
			if b.bills > 0 && r.Text != b.text && !(isPruned(j) && r.Text == "") {
				c.add(j.ID, InvBilledText, "stored text %q differs from the billed text %q", clip(r.Text), clip(b.text))
			}
		}
	}
	c.billsHaveJobs()
}

// billsHaveJobs finds bills under this scenario's keys whose job the
// database does not hold, and calls billed without any key at all.
func (c *checker) billsHaveJobs() {
	for _, e := range c.snap.Ledger {
		if e.Key == "" {
			c.add(0, InvBilledOnce, "provider request %s was sent without an Idempotency-Key and billed", e.RequestID)
			continue
		}
		id, key, ok := c.owner(e.Key)
		if !ok {
			continue // another scenario's key
		}
		if j, found := c.snap.job(id); !found || j.Key != key {
			c.add(id, InvBillHasJob, "the provider billed key %s (request %s) for job %d with key %q, which the database does not hold", e.Key, e.RequestID, id, key)
		}
	}
}

// owner maps a provider key back to the job id and idempotency key it was
// made from (see inkwell.ProviderKey), when the key is one of this
// scenario's.
func (c *checker) owner(providerKey string) (int64, string, bool) {
	// inkwell-[<installation>-]job-<id>-<hash of the key>
	_, rest, ok := strings.Cut(strings.TrimPrefix(providerKey, "inkwell-"), "job-")
	if !ok || !strings.HasPrefix(providerKey, "inkwell-") {
		return 0, "", false
	}
	for _, k := range c.keys {
		suffix := strings.TrimPrefix(inkwell.ProviderKey(0, k), "inkwell-job-0")
		if !strings.HasSuffix(rest, suffix) {
			continue
		}
		id, err := strconv.ParseInt(strings.TrimSuffix(rest, suffix), 10, 64)
		if err == nil {
			return id, k, true
		}
	}
	return 0, "", false
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
