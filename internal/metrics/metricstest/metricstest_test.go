package metricstest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/inkwell/inkwell/internal/metrics/metricstest"
)

func TestSample(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "# HELP a_total A.\n# TYPE a_total counter\na_total 3\na_total_more 9\nb{x=\"y\"} 5\nbad x\n")
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name string
		want float64
		ok   bool
	}{{"a_total", 3, true}, {"a_total_more", 9, true}, {"a", 0, false}, {"b", 0, false}, {"bad", 0, false}} {
		if v, ok := metricstest.Sample(srv.URL, tc.name); v != tc.want || ok != tc.ok {
			t.Errorf("Sample(%q) = %v, %t; want %v, %t", tc.name, v, ok, tc.want, tc.ok)
		}
	}
	if v := metricstest.Must(t, srv.URL, "absent"); v != -1 {
		t.Errorf("Must of an absent sample = %v, want -1", v)
	}
	if _, ok := metricstest.Sample("http://127.0.0.1:1", "a_total"); ok {
		t.Error("Sample of a server that is not there: ok")
	}
}
