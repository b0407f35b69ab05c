package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestChargeCapped: each capped answer counts once, and the micros it
// reported past its charge add up, by lane and model; a nil *Metrics
// counts nothing and does not panic.
func TestChargeCapped(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, nil)
	m.ChargeCapped("west", "gpt", 1_500_000, 10_000)
	m.ChargeCapped("west", "gpt", 20_000, 10_000)
	m.ChargeCapped("west", "claude", 7, 5)
	var none *Metrics
	none.ChargeCapped("west", "gpt", 2, 1)

	got := map[string]float64{}
	families, _ := reg.Gather() // the state collector's source is nil: its error is not this test's
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			key := f.GetName()
			for _, l := range metric.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			if c := metric.GetCounter(); c != nil {
				got[key] = c.GetValue()
			}
		}
	}
	for key, want := range map[string]float64{
		"inkwell_charges_capped_total,lane=west,model=gpt":           2,
		"inkwell_charges_capped_total,lane=west,model=claude":        1,
		"inkwell_charges_capped_micros_total,lane=west,model=gpt":    1_500_000, // 1,490,000 + 10,000
		"inkwell_charges_capped_micros_total,lane=west,model=claude": 2,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
}
