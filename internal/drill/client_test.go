package drill

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"testing"
)

// TestClassify: a request that never reached a server is refused; one
// whose connection broke after it was sent is unknown.
func TestClassify(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := closed.Addr().String()
	closed.Close()

	// A server that reads the request and dies without answering.
	dying, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dying.Close() })
	go func() {
		for {
			conn, err := dying.Accept()
			if err != nil {
				return
			}
			http.ReadRequest(bufio.NewReader(conn))
			conn.Close()
		}
	}()

	c := &client{name: "test", http: newHTTPClient()}
	for _, tt := range []struct {
		name, addr string
		want       Outcome
	}{
		{"NothingListens", deadAddr, OutcomeRefused},
		{"ConnectionBroke", dying.Addr().String(), OutcomeUnknown},
	} {
		s := c.post(context.Background(), "http://"+tt.addr, pathJobs, "k", []byte(`{}`), new(any))
		if s.Outcome != tt.want {
			t.Errorf("%s: outcome %s (%s), want %s", tt.name, s.Outcome, s.Detail, tt.want)
		}
	}
}
