package limiter

import (
	"math"
	"time"
)

// burst is how much of the allowance a bucket holds: a tenth of a second's.
const burst = 100 * time.Millisecond

// bucket is one token bucket: it fills at perSec up to size, and each call
// takes from it. It may go below zero: a call larger than the bucket, or an
// answer that used more than its estimate, leaves a debt that the calls
// after it wait out.
type bucket struct {
	perSec float64 // 0: unlimited
	size   float64
	level  float64
	at     time.Time // when level was last brought up to date
}

// newBucket returns a full bucket for perMinute (0: unlimited).
func newBucket(perMinute int, now time.Time) bucket {
	if perMinute <= 0 {
		return bucket{}
	}
	perSec := float64(perMinute) / 60
	size := max(1, perSec*burst.Seconds())
	return bucket{perSec: perSec, size: size, level: size, at: now}
}

// wait is how long until a call of n may take from the bucket: until the
// bucket holds n, or is full when n is more than it holds.
func (b *bucket) wait(n float64, now time.Time) time.Duration {
	if b.perSec == 0 {
		return 0
	}
	b.fill(now)
	short := min(n, b.size) - b.level
	if short <= 1e-9 { // float rounding must not cost a second timer
		return 0
	}
	return time.Duration(math.Ceil(short / b.perSec * float64(time.Second)))
}

// take spends n; wait said it may.
func (b *bucket) take(n float64) {
	if b.perSec != 0 {
		b.level -= n
	}
}

// give returns n (a refund), or takes -n more (a debt), at now.
func (b *bucket) give(n float64, now time.Time) {
	if b.perSec == 0 {
		return
	}
	b.fill(now)
	b.level = min(b.size, b.level+n)
}

// fill brings level up to now.
func (b *bucket) fill(now time.Time) {
	if now.After(b.at) {
		b.level = min(b.size, b.level+now.Sub(b.at).Seconds()*b.perSec)
		b.at = now
	}
}

// after is how long from t until n more can have been taken from the
// bucket, one call after another: what it will hold at t, then its pace
// (unlike wait, n may be many calls' worth, more than the bucket ever
// holds). It changes nothing: t may be in the future (a pause's end).
func (b bucket) after(n float64, t time.Time) time.Duration {
	if b.perSec == 0 {
		return 0
	}
	level := b.level
	if t.After(b.at) {
		level = min(b.size, level+t.Sub(b.at).Seconds()*b.perSec)
	}
	short := n - level
	if short <= 1e-9 {
		return 0
	}
	return time.Duration(math.Ceil(short / b.perSec * float64(time.Second)))
}
