//go:build race

package api_test

// raceDetector says the tests run under -race, where the heaviest
// (uploads of 90 MB, batches of 20,000 lines) take ten times as long:
// they run in the plain test run, and are skipped here.
const raceDetector = true
