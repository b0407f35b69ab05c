package drill

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/inkwell/inkwell/internal/crashpoint"
)

// Mode is what the drill runs.
type Mode string

const (
	// ModePoints crashes serve once at each named point, one job each.
	ModePoints Mode = "points"
	// ModeSweep crashes serve at the N-th hit of each point, N = 1..5,
	// over a workload of five jobs.
	ModeSweep Mode = "sweep"
	// ModeRandom kills serve at random instants, with a seeded schedule,
	// under several concurrent clients.
	ModeRandom Mode = "random"
)

// Config configures a drill.
type Config struct {
	// Bin is the inkwell binary that every child process runs. Required.
	Bin string
	// DB is where scenario databases go: "" for SQLite files in the work
	// dir, a directory for SQLite files there, or a postgres:// URL.
	DB string
	// WorkDir holds logs, ledgers and SQLite files; "" makes a new one
	// under os.TempDir(), removed at the end unless Keep.
	WorkDir string
	Keep    bool
	Mode    Mode
	// Points restricts the crash points; nil means all of them.
	Points []string
	// Runs and Seed drive random mode; Seed 0 picks one (and reports it).
	Runs int
	Seed int64
	// Short bounds everything for CI: fewer hits, fewer kills, less waiting.
	Short bool
	// InFlight, in points mode, runs only the in-flight family (each point
	// with calls in flight, inflight.go), not the one-job scenarios; without
	// it points mode runs both.
	InFlight bool
	// Out receives each scenario's table as soon as it ends; nil discards.
	Out io.Writer
	// Logger receives progress lines; nil discards.
	Logger *slog.Logger
	// Command is how the drill was started, for the report's header.
	Command string
}

// limits are the drill's bounded waits and sizes, tighter with Short.
type limits struct {
	start      time.Duration // a child logs its address and becomes ready
	crash      time.Duration // an armed serve reaches its point and dies
	settle     time.Duration // clients see every job done after the last restart
	stop       time.Duration // serve stops after SIGTERM
	scenario   time.Duration // one whole scenario
	latency    time.Duration // the simulator's latency per completion
	sweepHits  int           // N = 1..sweepHits
	sweepJobs  int           // jobs per sweep scenario
	clients    int           // random mode: concurrent clients
	clientJobs int           // random mode: requests per client
	kills      int           // random mode: kills per run
	pause      time.Duration // random mode: longest think time before a request
	randomLat  time.Duration // random mode: the simulator's latency
	// The in-flight family (inflight.go): the simulator's latency while
	// calls must stay in flight until the crash (held: they end only with
	// the kill), and while the first call must come back after every slot
	// is filled (slow).
	heldLatency, slowLatency time.Duration
}

func (c Config) limits() limits {
	l := limits{
		start: 15 * time.Second, crash: 20 * time.Second, settle: 45 * time.Second,
		stop: 15 * time.Second, scenario: 2 * time.Minute, latency: 100 * time.Millisecond,
		sweepHits: 5, sweepJobs: 5, clients: 4, clientJobs: 6, kills: 6,
		pause: 300 * time.Millisecond, randomLat: 600 * time.Millisecond,
		heldLatency: 10 * time.Minute, slowLatency: 3 * time.Second,
	}
	if c.Short {
		l.scenario, l.latency = time.Minute, 50*time.Millisecond
		l.sweepHits, l.clients, l.clientJobs, l.kills = 2, 4, 4, 4
		l.pause, l.randomLat, l.slowLatency = 200*time.Millisecond, 400*time.Millisecond, 1500*time.Millisecond
	}
	return l
}

// validate checks c and fills in its defaults.
func (c *Config) validate() error {
	if c.Bin == "" {
		return fmt.Errorf("drill: no inkwell binary given")
	}
	fi, err := os.Stat(c.Bin)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("drill: inkwell binary %s is not an executable file", c.Bin)
	}
	switch c.Mode {
	case "":
		c.Mode = ModePoints
	case ModePoints, ModeSweep, ModeRandom:
	default:
		return fmt.Errorf("drill: mode %q: want points, sweep or random", c.Mode)
	}
	if c.InFlight && c.Mode != ModePoints {
		return fmt.Errorf("drill: the in-flight family runs in points mode, not %s", c.Mode)
	}
	if len(c.Points) == 0 {
		c.Points = slices.Clone(crashpoint.Names)
	}
	for _, p := range c.Points {
		if !slices.Contains(crashpoint.Names, p) {
			return fmt.Errorf("drill: unknown crash point %q; known: %s", p, strings.Join(crashpoint.Names, ", "))
		}
	}
	if c.Runs < 1 {
		c.Runs = 1
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
