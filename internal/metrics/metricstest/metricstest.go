// Package metricstest reads samples off a running server's GET /metrics,
// for tests and benchmarks that run Inkwell as a real process.
package metricstest

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Sample is the value of the unlabelled sample name on url's /metrics; ok
// is false when /metrics cannot be read or holds no such sample.
func Sample(url, name string) (v float64, ok bool) {
	v, found, err := read(url, name)
	return v, found && err == nil
}

// Must is Sample for a test: it fails t when /metrics cannot be read or
// the sample is no number, and is -1 when the sample is absent.
func Must(t testing.TB, url, name string) float64 {
	t.Helper()
	v, found, err := read(url, name)
	switch {
	case err != nil:
		t.Fatalf("%s on %s/metrics: %v", name, url, err)
	case !found:
		return -1
	}
	return v
}

func read(url, name string) (float64, bool, error) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, true, err
		}
	}
	return 0, false, sc.Err()
}
