package drill

import (
	"cmp"
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
	unkeyed      bool // billed by the Messages API, which honours no key
}

// ledgerKey is the job-scoped key an entry was sent under: the key the
// simulator honoured (a chat completion), or the one a message carried
// without its being honoured.
func ledgerKey(e providersim.LedgerEntry) string { return cmp.Or(e.Key, e.SentKey) }

// billings sums the ledger by the key each call was sent under, across
// simulators: the same key billed by two providers is billed twice, and
// a key whose calls honour no key has one entry per bill.
func (s Snapshot) billings() map[string]billing {
	out := map[string]billing{}
	for _, e := range s.Ledger {
		key := ledgerKey(e)
		if key == "" {
			continue
		}
		b := out[key]
		b.calls += e.Calls
		b.bills += e.Bills
		b.unkeyed = b.unkeyed || e.Kind == providersim.KindMessages
		if b.text == "" {
			b.text = e.Text
		}
		out[key] = b
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

// ledger checks invariant 6 for each job, by its provider's kind: a
// provider that honours keys billed it at most once; one that honours
// none billed it again only for answers lost (InvUnkeyedBills). Every
// charge names a request the provider knows, sent under the job's own key
// to the job's kind of provider, for the amount it billed (or, on a
// priced model, the answer's usage at the model's prices: check_models.go);
// and every stored text is the text that was billed.
func (c *checker) ledger() {
	s := c.snap
	bills := s.billings()
	for _, j := range s.Jobs {
		rt := c.route(j)
		key := s.Installation.ProviderKey(j.ID, j.Key)
		b := bills[key]
		switch {
		case rt.unkeyed:
			c.unkeyedBills(j, key, b)
		case b.bills > 1:
			c.add(j.ID, InvBilledOnce, "provider key %s was billed %d times (%d calls)", key, b.bills, b.calls)
		}
		text := b.text
		for _, ch := range s.chargesOf(j.ID) {
			if e, ok := c.charge(j, rt, key, ch); ok {
				text = e.Text
			}
		}
		for _, r := range s.resultsOf(j.ID) {
			if b.bills > 0 && r.Text != text && !(isPruned(j) && r.Text == "") {
				c.add(j.ID, InvBilledText, "stored text %q differs from the billed text %q", clip(r.Text), clip(text))
			}
		}
	}
	c.billsHaveJobs()
}

// charge checks one charge of job j against the ledger entry it names,
// which it returns when the ledger has it.
func (c *checker) charge(j JobRow, rt jobRoute, key string, ch ChargeRow) (providersim.LedgerEntry, bool) {
	e, ok := c.snap.ledgerRequest(ch.ProviderRequestID)
	switch {
	case !ok:
		c.add(j.ID, InvChargeKnown, "charge names provider request %q, which no provider ledger has", ch.ProviderRequestID)
		return e, false
	case ledgerKey(e) != key:
		c.add(j.ID, InvChargeKnown, "charge names provider request %s, sent under key %q, not this job's key %s", e.RequestID, ledgerKey(e), key)
	case rt.unkeyed != (e.Kind == providersim.KindMessages):
		c.add(j.ID, InvChargeKnown, "charge names provider request %s, billed as %q, but the job's model %s is served by a provider of kind %s",
			e.RequestID, cmp.Or(e.Kind, "chat completion"), rt.model.Name, rt.kind)
	case rt.model.Priced():
		c.pricedCharge(j, rt, ch, e) // check_models.go
	case e.AmountMicros != ch.AmountMicros:
		c.add(j.ID, InvChargeKnown, "charge is %d micros, the provider billed %d for request %s", ch.AmountMicros, e.AmountMicros, e.RequestID)
	}
	return e, true
}

// billsHaveJobs finds bills under this scenario's keys whose job the
// database does not hold, and calls billed without any key at all.
func (c *checker) billsHaveJobs() {
	for _, e := range c.snap.Ledger {
		if ledgerKey(e) == "" {
			c.add(0, InvBilledOnce, "provider request %s was sent without an Idempotency-Key and billed", e.RequestID)
			continue
		}
		id, key, ok := c.owner(ledgerKey(e))
		if !ok {
			continue // another scenario's key
		}
		if j, found := c.snap.job(id); !found || j.Key != key {
			c.add(id, InvBillHasJob, "the provider billed key %s (request %s) for job %d with key %q, which the database does not hold", ledgerKey(e), e.RequestID, id, key)
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
