package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/inkwell/inkwell/internal/worker"
)

// jobLifeFlags are serve's flags for a job's life without a human
// (docs/design.md §9): automatic retry, retention and admission.
type jobLifeFlags struct {
	maxAttempts         *int
	maxRateLimited      *int
	retryBase, retryCap *time.Duration
	honoursKeys         *string
	retention           *time.Duration
	maxQueued           *int
}

func addJobLifeFlags(fs *flag.FlagSet) jobLifeFlags {
	return jobLifeFlags{
		maxAttempts: fs.Int("max-attempts", 5, "automatic retry: attempts a job may have since its last retry by hand, 429 answers aside; after the last, the job fails and says it gave up (1: never retry automatically, 429s included). "+
			"Only failures that cannot spend money twice are retried: not_sent, rate_limited, provider_error (and timeout, shutdown with --provider-honours-keys)"),
		maxRateLimited: fs.Int("max-rate-limited", 50, "automatic retry: 429 answers a job may meet since its last retry by hand before it fails and says it gave up. They do not count toward --max-attempts: "+
			"a 429 is the provider's limit, which pauses the whole lane, not the job's failure (50 lasts about 17 minutes of 429s asking for 20 s each, or 1.7 to 3.5 hours without Retry-After)"),
		retryBase: fs.Duration("retry-base", time.Second, "automatic retry: back-off after the first failed attempt; it doubles per attempt, with jitter (a 429's Retry-After wins)"),
		retryCap:  fs.Duration("retry-cap", 5*time.Minute, "automatic retry: the longest back-off"),
		honoursKeys: fs.String("provider-honours-keys", "auto", "on: the provider answers a second call under the same idempotency key from its record without billing again, so a timeout or a shutdown is retried automatically too; "+
			"off: never; auto: on for --provider sim, off for openai (say on for Inkwell's provider-sim)"),
		retention: ageFlag(fs, "retention", 720*time.Hour, "remove the prompt and text of jobs finished longer ago than this `age`: a duration (720h) or whole days (30d), as prune --older-than takes (their key, attempts and charge stay); 0 keeps everything"),
		maxQueued: fs.Int("max-queued", 100000, "admission: past this many queued jobs a new request gets 429 with Retry-After and nothing is written (re-sends are still answered); 0: no limit"),
	}
}

func (f jobLifeFlags) check() error {
	switch {
	case *f.maxAttempts < 1:
		return fmt.Errorf("--max-attempts must be at least 1, not %d", *f.maxAttempts)
	case *f.maxRateLimited < 1:
		return fmt.Errorf("--max-rate-limited must be at least 1, not %d", *f.maxRateLimited)
	case *f.retryBase <= 0 || *f.retryCap <= 0:
		return fmt.Errorf("--retry-base and --retry-cap must be positive (got %s and %s)", *f.retryBase, *f.retryCap)
	case *f.retryCap < *f.retryBase:
		return fmt.Errorf("--retry-cap (%s) must not be shorter than --retry-base (%s)", *f.retryCap, *f.retryBase)
	case *f.retention < 0:
		return fmt.Errorf("--retention must be 0 (keep everything) or positive, not %s", *f.retention)
	case *f.maxQueued < 0:
		return fmt.Errorf("--max-queued must be 0 (no limit) or positive, not %d", *f.maxQueued)
	}
	if _, err := honoursKeys(*f.honoursKeys, "sim"); err != nil {
		return err
	}
	return nil
}

// policy is the retry policy for the provider kind (sim, openai).
func (f jobLifeFlags) policy(providerKind string) worker.RetryPolicy {
	hk, _ := honoursKeys(*f.honoursKeys, providerKind)
	return worker.RetryPolicy{MaxAttempts: *f.maxAttempts, MaxRateLimited: *f.maxRateLimited, Base: *f.retryBase, Cap: *f.retryCap, ProviderHonoursKeys: hk}
}

// honoursKeys reads --provider-honours-keys: auto is on for the in-process
// sim (it answers a key's second call from its record) and off for an
// OpenAI-compatible API, whose keys Inkwell cannot vouch for.
func honoursKeys(v, providerKind string) (bool, error) {
	switch v {
	case "on", "true", "yes":
		return true, nil
	case "off", "false", "no":
		return false, nil
	case "auto", "":
		return providerKind == "sim", nil
	}
	return false, fmt.Errorf("--provider-honours-keys %q: want on, off or auto", v)
}
