package drill

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/inkwell/inkwell/internal/provider/providersim"
)

// sim is a provider simulator child: the real `inkwell provider-sim`.
type sim struct {
	proc   *child
	url    string
	ledger string
}

type simOptions struct {
	latency            time.Duration
	failRate, hangRate float64
	seed               int64
	ledger             string // the ledger file; "" for a new one named after the simulator
}

// startSim starts `inkwell provider-sim` on a free loopback port with a
// new ledger in the work dir, and waits until it listens.
func (d *drill) startSim(ctx context.Context, name string, o simOptions) (*sim, error) {
	ledger := o.ledger
	if ledger == "" {
		ledger = filepath.Join(d.work, name+".ledger.db")
	}
	args := []string{"provider-sim", "--addr", "127.0.0.1:0", "--ledger", ledger, "--log-format", "json",
		"--fail-rate", strconv.FormatFloat(o.failRate, 'f', -1, 64),
		"--hang-rate", strconv.FormatFloat(o.hangRate, 'f', -1, 64),
		"--seed", strconv.FormatInt(o.seed, 10), "--latency", o.latency.String()}
	c, err := startChild(name, d.cfg.Bin, args, childEnv(""), filepath.Join(d.work, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("drill: %w", err)
	}
	d.sims.add(c)
	addr, err := c.waitAddr(ctx, "listening", d.lim.start)
	if err != nil {
		c.kill()
		return nil, fmt.Errorf("drill: %w; last lines:\n%s", err, c.tailText())
	}
	d.log.Info("provider simulator listening", "name", name, "addr", addr, "pid", c.pid())
	return &sim{proc: c, url: "http://" + addr, ledger: ledger}, nil
}

// readLedgers reads the ledger files of the given simulators, alive or
// not, and returns their entries together.
func readLedgers(ctx context.Context, sims ...*sim) ([]providersim.LedgerEntry, error) {
	var out []providersim.LedgerEntry
	for _, s := range sims {
		if s == nil {
			continue
		}
		l, err := providersim.ReadLedger(ctx, s.ledger)
		if err != nil {
			return nil, fmt.Errorf("ledger of %s: %w", s.proc.name, err)
		}
		out = append(out, l.Entries...)
	}
	return out, nil
}
