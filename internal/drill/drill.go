package drill

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/inkwell/inkwell/internal/crashpoint"
)

// drill is one run of `inkwell drill`: its configuration, work dir,
// databases and the provider simulators its scenarios share.
type drill struct {
	cfg  Config
	lim  limits
	work string
	dbs  databases
	log  *slog.Logger
	// good answers every call; failing answers every call with 500 and
	// bills nothing, to fail jobs the ordinary way (a provider outage).
	good, failing *sim
	sims          procs
	hooks         *hooks // the webhook receiver (webhooks.go)
}

// Run runs the drill cfg describes and returns its report. The error is
// for a drill that could not run at all; a scenario that could not finish
// is recorded in its timeline, and Report.Failed says whether anything
// failed.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &drill{cfg: cfg, lim: cfg.limits(), log: cfg.Logger}
	cleanup, err := d.makeWorkDir()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if d.dbs, err = openDatabases(ctx, cfg.DB, d.work, cfg.Keep); err != nil {
		return nil, fmt.Errorf("drill: %w", err)
	}
	defer func() {
		// Not cut by ctx (a drill that timed out still drops what it made);
		// each drop is bounded on its own (databases.go).
		if err := d.dbs.close(context.WithoutCancel(ctx)); err != nil {
			d.log.Warn("drop drill databases", "err", err)
		}
	}()
	defer d.stopSims()
	if d.hooks, err = startHooks(); err != nil {
		return nil, err
	}
	defer d.hooks.stop()

	rep := &Report{Mode: cfg.Mode, Command: cfg.Command, DB: d.dbs.kind(), Short: cfg.Short, Started: time.Now(), WorkDir: d.work}
	switch cfg.Mode {
	case ModePoints, ModeSweep:
		err = d.runPoints(ctx, rep)
	case ModeRandom:
		err = d.runRandom(ctx, rep)
	}
	rep.Took = time.Since(rep.Started)
	return rep, err
}

func (d *drill) makeWorkDir() (cleanup func(), err error) {
	d.work = d.cfg.WorkDir
	if d.work == "" {
		if d.work, err = os.MkdirTemp("", "inkwell-drill-"); err != nil {
			return nil, fmt.Errorf("drill: work dir: %w", err)
		}
	} else if err := os.MkdirAll(d.work, 0o755); err != nil {
		return nil, fmt.Errorf("drill: work dir: %w", err)
	}
	if d.work, err = filepath.Abs(d.work); err != nil {
		return nil, fmt.Errorf("drill: work dir: %w", err)
	}
	d.log.Info("drill work dir", "dir", d.work, "keep", d.cfg.Keep)
	return func() {
		if d.cfg.Keep || d.cfg.WorkDir != "" {
			return
		}
		if err := os.RemoveAll(d.work); err != nil {
			d.log.Warn("remove work dir", "dir", d.work, "err", err)
		}
	}, nil
}

// runPoints runs one scenario per point (ModePoints) or per point and
// hit (ModeSweep), sharing one good and one failing simulator.
func (d *drill) runPoints(ctx context.Context, rep *Report) error {
	var err error
	if d.good, err = d.startSim(ctx, "provider-sim", simOptions{latency: d.lim.latency}); err != nil {
		return err
	}
	if d.failing, err = d.startSim(ctx, "provider-sim-failing", simOptions{failRate: 1}); err != nil {
		return err
	}
	for _, sc := range d.scenarios() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		tl := d.runScenario(ctx, sc)
		rep.Timelines = append(rep.Timelines, tl)
		tl.writeText(d.cfg.Out, d.cfg.Mode == ModeSweep)
	}
	return nil
}

// scenarios lists what the drill plays: in points mode one scenario per
// point, then the in-flight family, one per point and the budget-full
// scenario (with InFlight the family alone); in a sweep each point at
// hits 1..sweepHits.
func (d *drill) scenarios() []scenario {
	var out []scenario
	for _, p := range d.cfg.Points {
		switch {
		case d.cfg.Mode == ModeSweep:
			for n := 1; n <= d.lim.sweepHits; n++ {
				out = append(out, pointScenario(p, n, d.lim.sweepJobs))
			}
		case !d.cfg.InFlight:
			out = append(out, pointScenario(p, 1, 1))
		}
	}
	if d.cfg.Mode != ModePoints {
		return out
	}
	if !d.cfg.InFlight {
		out = append(out, joblifeScenarios(d.cfg.Points)...)
	}
	for _, p := range d.cfg.Points {
		out = append(out, inFlightScenario(p, inFlightCalls, d.lim))
		if p == crashpoint.ProviderAfterCall {
			// Once more with a budget that binds (inflight_budget.go): a
			// billed answer not stored, under a full budget.
			out = append(out, budgetScenario(p, inFlightCalls, d.lim))
		}
	}
	return out
}

func (d *drill) stopSims() {
	d.sims.mu.Lock()
	list := append([]*child(nil), d.sims.list...)
	d.sims.mu.Unlock()
	for _, c := range list {
		if c.alive() {
			if err := c.stop(10 * time.Second); err != nil {
				d.log.Warn("stop provider simulator", "err", err)
			}
		}
	}
}

// childEnv is the drill's environment minus anything that would change a
// child's behaviour behind the drill's back, plus the crash spec, if any.
func childEnv(crashAt string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "INKWELL_CRASH_AT", "INKWELL_DB", "INKWELL_PROVIDER_KEY", "INKWELL_CONFIG":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "INKWELL_PROVIDER_KEY=drill-not-a-secret")
	if crashAt != "" {
		env = append(env, "INKWELL_CRASH_AT="+crashAt)
	}
	return env
}

// newSeed picks a random seed when the user gave none.
func newSeed() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.LittleEndian.Uint64(b[:]) >> 1)
}
