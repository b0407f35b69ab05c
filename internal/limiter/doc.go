// Package limiter keeps one worker lane's provider calls within the
// provider's limits (docs/design.md §8): requests per minute, tokens per minute,
// and a lane-wide pause after a 429.
//
// A Limiter implements worker.Limiter structurally: every call of the lane
// asks Wait before it is sent and reports Done when it ends. Wait admits
// calls one at a time, first come first served, when both buckets hold
// enough and the lane is not paused. Done corrects the token bucket by the
// answer's usage (a refund when the call used less than its estimate, a
// debt when it used more), and a 429 among the errors pauses every call of
// the lane until its Retry-After, or for an exponential back-off with
// jitter (1 s doubling to 60 s) when the provider sent none.
//
// Each bucket holds a tenth of a second's allowance (at least one call):
// the lane spreads its calls evenly over the minute instead of spending a
// minute's allowance in one burst, which a provider that enforces its
// limit over shorter windows (most do) would refuse. A call larger than the
// bucket waits until the bucket is full and leaves a debt that later calls
// wait out, so the long-run rate holds whatever the sizes of the calls.
//
// Waiting costs no goroutine beyond the caller's own: the first waiter in
// line sleeps on one timer until the buckets and the pause let it go, the
// others sleep until they are first. Time is the time package's own clock,
// so that Now and the timers always agree; the tests run the limiter in a
// testing/synctest bubble, where that clock is fake, exact and instant.
//
// Window is a different limit on the same footing: the sliding minute of
// an account's rpm at admission (docs/design.md §10), per serve process, used
// by internal/api.
//
// It imports the standard library only: never worker (whose interface it
// satisfies), provider (whose 429 it recognises through errors.As by the
// RateLimited method), store or api.
package limiter
