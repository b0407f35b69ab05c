//go:build !race

package api_test

// raceDetector: see race_on_test.go.
const raceDetector = false
