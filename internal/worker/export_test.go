package worker

// RescueScans is how many looks for dead lanes l has completed, so tests
// can see a live lane left alone for several of them without sleeping.
func RescueScans(l *Lane) int64 { return l.rescueScans.Load() }

// AnswersPerSlot is answersPerSlot, for the test of how many answers a
// lane writes after their slots were freed.
const AnswersPerSlot = answersPerSlot
