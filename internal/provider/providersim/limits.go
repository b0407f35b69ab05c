package providersim

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// limits enforces the simulator's requests and tokens per minute, as a
// hosted provider does: a call past either is refused with 429 and a
// Retry-After, takes nothing from the allowance, and is not billed.
//
// Each limit is a token bucket refilled continuously that holds one
// second's allowance (and admits a call larger than that when full, leaving
// a debt): like hosted APIs, the simulator enforces its minute over short
// windows, so a client that spends a minute's allowance in a burst is
// refused. A zero limit is no limit.
type limits struct {
	mu         sync.Mutex
	reqs, toks limitBucket
}

func newLimits(rpm, tpm int, now time.Time) *limits {
	return &limits{reqs: newLimitBucket(rpm, now), toks: newLimitBucket(tpm, now)}
}

// refusal is a call the limits refused: which limit, and when to try again.
type refusal struct {
	limit      string // "requests" or "tokens"
	perMinute  int
	retryAfter time.Duration
}

// admit takes one request and tokens from the allowance at now, or takes
// nothing and says why not.
func (l *limits) admit(now time.Time, tokens int) (refusal, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rw, tw := l.reqs.wait(1, now), l.toks.wait(float64(tokens), now)
	if rw > 0 || tw > 0 {
		if rw >= tw {
			return refusal{"requests", l.reqs.perMinute, rw}, false
		}
		return refusal{"tokens", l.toks.perMinute, tw}, false
	}
	l.reqs.take(1)
	l.toks.take(float64(tokens))
	return refusal{}, true
}

// retryAfterHeader is the Retry-After of a refusal: whole seconds, rounded
// up (from the millisecond, so that float dust does not add a second), at
// least 1.
func (r refusal) retryAfterHeader() string {
	return strconv.FormatInt(max(1, int64(math.Ceil(r.retryAfter.Round(time.Millisecond).Seconds()))), 10)
}

// write answers a refused call the way OpenAI does: 429, Retry-After, and
// an error of code rate_limit_exceeded.
func (r refusal) write(w http.ResponseWriter) {
	w.Header().Set("Retry-After", r.retryAfterHeader())
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]string{
		"message": fmt.Sprintf("Rate limit reached for %s per minute (limit %d): try again in %s; nothing was billed",
			r.limit, r.perMinute, r.retryAfter.Round(time.Millisecond)),
		"type": r.limit,
		"code": "rate_limit_exceeded",
	}})
}

// limitBucket is one limit's token bucket.
type limitBucket struct {
	perMinute int
	perSec    float64 // 0: no limit
	size      float64
	level     float64
	at        time.Time
}

func newLimitBucket(perMinute int, now time.Time) limitBucket {
	if perMinute <= 0 {
		return limitBucket{}
	}
	perSec := float64(perMinute) / 60
	size := max(1, perSec) // one second's allowance
	return limitBucket{perMinute: perMinute, perSec: perSec, size: size, level: size, at: now}
}

// wait is how long until the bucket holds n (or is full, when n is more
// than it holds); 0 when it does now.
func (b *limitBucket) wait(n float64, now time.Time) time.Duration {
	if b.perSec == 0 {
		return 0
	}
	if now.After(b.at) {
		b.level = min(b.size, b.level+now.Sub(b.at).Seconds()*b.perSec)
		b.at = now
	}
	short := min(n, b.size) - b.level
	if short <= 1e-9 {
		return 0
	}
	return time.Duration(math.Ceil(short / b.perSec * float64(time.Second)))
}

func (b *limitBucket) take(n float64) {
	if b.perSec != 0 {
		b.level -= n
	}
}
