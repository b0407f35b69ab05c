package drill

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
)

// The random simulator fails some calls the ordinary ways, so that the
// random runs also cover failed attempts, provider timeouts and retries.
const (
	randomFailRate  = 0.05
	randomHangRate  = 0.03
	randomCallLimit = time.Second // serve's --provider-timeout, which ends a hang
)

// plan is one random run's schedule. It is drawn entirely from its seed
// before anything starts, so the same seed replays the same schedule
// (the instants are the same; what the processes were doing at them may
// differ a little, as with any real crash).
type plan struct {
	Seed        int64
	SimSeed     int64
	Clients     int
	Jobs        int             // per client
	MaxWords    []int           // per request, client-major
	Pauses      []time.Duration // think time before each request, client-major
	Kills       []kill
	Concurrency int           // serve's --concurrency: calls in flight at once
	Latency     time.Duration // the simulator's latency per call
	// MaxAttempts is serve's --max-attempts: 1, or with automatic retry
	// (docs/design.md §9) the job-life families' 3 and short back-off, so the
	// simulator's 500s reschedule their jobs while serve is being killed.
	MaxAttempts int
	// Cancels are the requests (client-major indexes) whose client cancels
	// the job once it reads it running; a completion may win (409).
	Cancels []int
}

// randomChatEvery: every third request of each client is the chat form
// on drill-claude, whose provider honours no idempotency key (models.go).
// It is no draw, so that a seed's schedule is what it was before.
const randomChatEvery = 3

// randomCancelPercent is the chance that a random run's client cancels a
// request once its job is running.
const randomCancelPercent = 10

// The random runs' serve runs several calls at once, so that a kill lands
// with calls in flight: --concurrency is drawn between these.
const (
	randomMinConcurrency = 4
	randomMaxConcurrency = 8
)

// kill is one death of serve: SIGKILL from the drill After serve became
// ready, or an armed crash point (and SIGKILL from the drill After plus
// armedSlack when the point is not reached by then).
type kill struct {
	Point string // "" for a kill by the drill alone
	Hit   int
	After time.Duration
}

const armedSlack = time.Second

func (k kill) spec() string {
	if k.Point == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d", k.Point, k.Hit)
}

func (k kill) String() string {
	if k.Point == "" {
		return fmt.Sprintf("SIGKILL by the drill %s after serve is ready", k.After)
	}
	return fmt.Sprintf("INKWELL_CRASH_AT=%s (SIGKILL by the drill if not reached %s after ready)", k.spec(), k.After+armedSlack)
}

// makePlan draws a run's schedule from seed, using only the given points.
func makePlan(seed int64, lim limits, points []string) plan {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6472696c6c)) // "drill"
	p := plan{Seed: seed, SimSeed: int64(rng.Uint64() >> 1), Clients: lim.clients, Jobs: lim.clientJobs, Latency: lim.randomLat}
	for range p.Clients * p.Jobs {
		p.MaxWords = append(p.MaxWords, 5+rng.IntN(20))
		p.Pauses = append(p.Pauses, time.Duration(rng.Int64N(int64(lim.pause/time.Millisecond)+1))*time.Millisecond)
	}
	for range lim.kills {
		k := kill{After: time.Duration(50+rng.IntN(700)) * time.Millisecond}
		if rng.IntN(100) < 40 {
			k.Point = points[rng.IntN(len(points))]
			k.Hit = 1 + rng.IntN(3)
			if k.Point == crashpoint.RecoverBeforeCommit {
				k.Hit = 1 // recovery runs once per process
			}
		}
		p.Kills = append(p.Kills, k)
	}
	p.Concurrency = randomMinConcurrency + rng.IntN(randomMaxConcurrency-randomMinConcurrency+1)
	// Drawn after everything above, so that a seed's kills and requests are
	// the same as before automatic retry and cancels joined the runs.
	p.MaxAttempts = 1
	if rng.IntN(4) != 0 {
		p.MaxAttempts = joblifeMaxAttempts
	}
	for i := range p.Clients * p.Jobs {
		if rng.IntN(100) < randomCancelPercent {
			p.Cancels = append(p.Cancels, i)
		}
	}
	return p
}

// nextSeed derives the next run's seed (splitmix64), so that --seed S
// --runs N replays N runs and each run's own seed replays it alone.
func nextSeed(s int64) int64 {
	z := uint64(s) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return int64((z ^ (z >> 31)) >> 1)
}

func (p plan) lines() []string {
	var longest time.Duration
	for _, d := range p.Pauses {
		longest = max(longest, d)
	}
	out := []string{
		fmt.Sprintf("%d clients x %d requests, up to %s apart; serve runs up to %d calls at once (--concurrency %d)",
			p.Clients, p.Jobs, longest, p.Concurrency, p.Concurrency),
		fmt.Sprintf("the provider answers after %s, fails %.0f%% of calls with 500 and hangs %.0f%% (serve gives up after %s)",
			p.Latency, randomFailRate*100, randomHangRate*100, randomCallLimit),
	}
	out = append(out, fmt.Sprintf("every %s request of each client is a chat request on `%s` (provider `%s`, kind anthropic: no idempotency key, every answered call billed); the others the short form on `%s` (provider `%s`, kind openai, honours_keys = true)",
		ordinal(randomChatEvery), modelClaude, providerAnthropic, modelDrill, providerOpenAI))
	if p.MaxAttempts > 1 {
		out = append(out, fmt.Sprintf("automatic retry: serve runs with --max-attempts %d --retry-base %s --retry-cap %s, so a 500 puts its job back to queued; so does a hang (a timeout) on `%s`, whose provider honours keys, but not on `%s`",
			p.MaxAttempts, joblifeRetryBase, joblifeRetryCap, modelDrill, modelClaude))
	} else {
		out = append(out, "no automatic retry: serve runs with --max-attempts 1, and the clients retry every failed job by hand")
	}
	if len(p.Cancels) > 0 {
		names := make([]string, len(p.Cancels))
		for i, n := range p.Cancels {
			names[i] = fmt.Sprintf("c%d-%d", n/p.Jobs+1, n%p.Jobs+1)
		}
		out = append(out, fmt.Sprintf("the clients cancel request(s) %s once they read the job running (a completion that commits first wins: 409)", strings.Join(names, ", ")))
	}
	for i, k := range p.Kills {
		out = append(out, fmt.Sprintf("kill %d: %s", i+1, k))
	}
	return out
}

func (p plan) workloads(slug string) [][]item {
	var out [][]item
	for c := range p.Clients {
		var items []item
		for j := range p.Jobs {
			items = append(items, item{
				key: fmt.Sprintf("drill-%s-c%d-%d", slug, c+1, j+1),
				req: inkwell.Request{
					Prompt:   fmt.Sprintf("random drill, client %d, request %d", c+1, j+1),
					Account:  fmt.Sprintf("client%d", c+1),
					MaxWords: p.MaxWords[c*p.Jobs+j],
				},
				pause: p.Pauses[c*p.Jobs+j],
				model: modelOf(j, randomChatEvery),
			})
			if slices.Contains(p.Cancels, c*p.Jobs+j) {
				items[len(items)-1].cancel = cancelRunning
			}
		}
		out = append(out, items)
	}
	return out
}

// runRandom plays cfg.Runs random runs, the first with cfg.Seed (or a new
// seed, reported) and each next with nextSeed of the one before.
func (d *drill) runRandom(ctx context.Context, rep *Report) error {
	seed := d.cfg.Seed
	if seed == 0 {
		seed = newSeed()
	}
	rep.Seed = seed
	fmt.Fprintf(d.cfg.Out, "random mode: seed %d (replay with: inkwell drill --random --seed %d --runs %d%s)\n\n",
		seed, seed, d.cfg.Runs, map[bool]string{true: " --short"}[d.cfg.Short])
	for i := range d.cfg.Runs {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		tl := d.runRandomPlan(ctx, i+1, makePlan(seed, d.lim, d.cfg.Points))
		rep.Timelines = append(rep.Timelines, tl)
		tl.writeText(d.cfg.Out, false)
		seed = nextSeed(seed)
	}
	return nil
}

func (d *drill) runRandomPlan(ctx context.Context, n int, pl plan) *Timeline {
	slug := fmt.Sprintf("random-%d", n)
	p := d.newPlay(fmt.Sprintf("random run %d (seed %d)", n, pl.Seed), slug)
	p.tl.Seed, p.tl.Plan = pl.Seed, pl.lines()
	p.tl.About = fmt.Sprintf("Concurrent clients re-send on broken connections and retry failed jobs while serve, running up to %d calls at once, is killed %d times; replay this run alone with --random --seed %d --runs 1.", pl.Concurrency, len(pl.Kills), pl.Seed)
	p.failing, p.providerTimeout = nil, randomCallLimit
	p.serveArgs = []string{"--concurrency", fmt.Sprint(pl.Concurrency)}
	p.maxAttempts = pl.MaxAttempts
	p.webhookAccounts = []string{"client1", "client2"} // the other clients' accounts have none
	d.log.Info("random run", "run", n, "seed", pl.Seed)
	start := time.Now()
	sim, err := d.startSim(ctx, "provider-sim-"+slug, simOptions{
		latency: pl.Latency, failRate: randomFailRate, hangRate: randomHangRate, seed: pl.SimSeed,
	})
	if err != nil {
		p.tl.Err = err
		p.finish(start)
		return p.tl
	}
	p.good = sim
	p.tl.Err = p.playRandom(ctx, pl)
	p.finish(start)
	if err := sim.proc.stop(10 * time.Second); err != nil {
		d.log.Warn("stop provider simulator", "err", err)
	}
	return p.tl
}

func (p *play) playRandom(ctx context.Context, pl plan) error {
	ctx, cancel := context.WithTimeoutCause(ctx, p.d.lim.scenario, fmt.Errorf("%s exceeded its %s bound", p.tl.Name, p.d.lim.scenario))
	defer cancel()
	defer p.ps.killAll()
	if err := p.open(ctx); err != nil {
		return err
	}
	p.retry.Store(true)
	p.retryAfterReady = true
	p.startClients(ctx, pl.workloads(p.slug))
	defer p.stopClients()
	for i, k := range pl.Kills {
		sv, err := p.startServe(ctx, k.spec(), false)
		if err != nil {
			return err
		}
		ready, err := p.awaitReady(ctx, sv, k.Point != "")
		if err != nil {
			return err
		}
		if ready {
			if err := p.snapRecovered(ctx, sv); err != nil {
				return err
			}
		}
		if err := p.killAt(ctx, sv, k); err != nil {
			return err
		}
		if p.tl.Crash, err = p.snap(ctx, KindCrash, fmt.Sprintf("after kill %d", i+1)); err != nil {
			return err
		}
		p.noteRunning(p.tl.Crash)
	}
	sv, err := p.startServe(ctx, "", false)
	if err != nil {
		return err
	}
	return p.cleanRun(ctx, sv, untilAllDone, true)
}

// killAt ends serve as k says: the drill's SIGKILL at k.After, or the
// armed point (with the drill's SIGKILL as a fallback when it is not
// reached in time).
func (p *play) killAt(ctx context.Context, sv *child, k kill) error {
	wait := k.After
	if k.Point != "" {
		wait += armedSlack
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-sv.exited:
	case <-t.C:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if sv.alive() {
		sv.kill()
		p.died(sv)
		what := fmt.Sprintf("%s killed by the drill (SIGKILL) %s after ready", sv.name, wait)
		if k.Point != "" {
			what = fmt.Sprintf("%s did not reach %s in time; killed by the drill (SIGKILL)", sv.name, k.spec())
		}
		p.event(what, fmt.Sprintf("pid %d", sv.pid()))
		return nil
	}
	if k.Point == "" {
		p.died(sv)
		return fmt.Errorf("%s died on its own (%s) before the drill killed it; last lines:\n%s", sv.name, sv.exitText(), sv.tailText())
	}
	return p.awaitCrash(ctx, sv, k.spec())
}
