package drill

import (
	"reflect"
	"testing"

	"github.com/inkwell/inkwell/internal/crashpoint"
)

// TestMakePlan_SeedReplays: the same seed draws the same schedule, and
// another seed another one.
func TestMakePlan_SeedReplays(t *testing.T) {
	t.Parallel()
	lim := Config{}.limits()
	a, b := makePlan(42, lim, crashpoint.Names), makePlan(42, lim, crashpoint.Names)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("seed 42 drew two schedules:\n%v\n%v", a.lines(), b.lines())
	}
	if c := makePlan(43, lim, crashpoint.Names); reflect.DeepEqual(a.Kills, c.Kills) {
		t.Errorf("seeds 42 and 43 drew the same kills: %v", c.lines())
	}
	if got, want := len(a.Kills), lim.kills; got != want {
		t.Errorf("kills = %d, want %d", got, want)
	}
}

func TestMakePlan_OnlyGivenPoints(t *testing.T) {
	t.Parallel()
	points := []string{crashpoint.RecoverBeforeCommit}
	for seed := range int64(50) {
		for _, k := range makePlan(seed, Config{}.limits(), points).Kills {
			if k.Point != "" && (k.Point != crashpoint.RecoverBeforeCommit || k.Hit != 1) {
				t.Fatalf("seed %d: kill %v, want only %s:1 (recovery runs once per process)", seed, k, points[0])
			}
		}
	}
}

func TestNextSeed(t *testing.T) {
	t.Parallel()
	seen := map[int64]bool{}
	s := int64(1)
	for range 100 {
		s = nextSeed(s)
		if s < 0 || seen[s] {
			t.Fatalf("nextSeed gave %d twice or negative", s)
		}
		seen[s] = true
	}
	if nextSeed(1) != nextSeed(1) {
		t.Error("nextSeed is not a function of its seed")
	}
}

// TestMakePlan_JobLife: the random runs mix in automatic retry (most runs)
// and cancels (about one request in ten), drawn from the seed, and the
// workloads carry the cancels.
func TestMakePlan_JobLife(t *testing.T) {
	t.Parallel()
	lim := Config{Short: true}.limits()
	var retrying, cancels int
	for seed := range int64(40) {
		p := makePlan(seed, lim, crashpoint.Names)
		if p.MaxAttempts != 1 && p.MaxAttempts != joblifeMaxAttempts {
			t.Fatalf("seed %d: --max-attempts %d", seed, p.MaxAttempts)
		}
		if p.MaxAttempts > 1 {
			retrying++
		}
		cancels += len(p.Cancels)
		marked := 0
		for _, items := range p.workloads("x") {
			for _, it := range items {
				if it.cancel == cancelRunning {
					marked++
				}
			}
		}
		if marked != len(p.Cancels) {
			t.Errorf("seed %d: %d cancels drawn, %d items marked", seed, len(p.Cancels), marked)
		}
	}
	if retrying < 20 || retrying == 40 {
		t.Errorf("%d of 40 plans retry automatically; want most, not all", retrying)
	}
	if total := 40 * lim.clients * lim.clientJobs; cancels == 0 || cancels > total/4 {
		t.Errorf("%d cancels over %d requests; want about one in ten", cancels, total)
	}
}
