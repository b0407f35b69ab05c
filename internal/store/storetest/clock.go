package storetest

import (
	"sync"
	"time"
)

// WallClock is a store clock (store.Options.NowFunc = c.Now) set at an
// offset from the wall clock. The operator views compare stored times with
// the database's own clock, so tests place rows in time relative to now.
type WallClock struct {
	mu sync.Mutex
	t  time.Time
}

// Now is the clock's current setting.
func (c *WallClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// At sets the clock to the wall clock plus offset.
func (c *WallClock) At(offset time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = time.Now().Add(offset).UTC()
}
