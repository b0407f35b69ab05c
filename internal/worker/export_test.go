package worker

// RescueScans is how many looks for dead lanes l has completed, so tests
// can see a live lane left alone for several of them without sleeping.
func RescueScans(l *Lane) int64 { return l.rescueScans.Load() }
