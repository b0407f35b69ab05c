package limiter

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestWindow: at most rpm requests in any sliding minute per key, each key
// on its own; a refusal says when the oldest leaves the minute; a place
// given back is free again; rpm 0 limits nothing.
func TestWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWindow()
		var tickets []time.Time
		for i := range 3 {
			ticket, _, ok := w.Take("a", 3)
			if !ok {
				t.Fatalf("request %d of 3 refused", i+1)
			}
			tickets = append(tickets, ticket)
			time.Sleep(10 * time.Second)
		}
		if _, wait, ok := w.Take("a", 3); ok || wait != 30*time.Second {
			t.Fatalf("fourth request: ok %t, wait %s; want refused for 30s (the first leaves the minute at 60s)", ok, wait)
		}
		if _, _, ok := w.Take("b", 3); !ok {
			t.Error("another key is refused")
		}
		w.GiveBack("a", tickets[2])
		if _, _, ok := w.Take("a", 3); !ok {
			t.Error("a place given back is not free")
		}
		time.Sleep(30 * time.Second) // the first request leaves the minute
		if _, _, ok := w.Take("a", 3); !ok {
			t.Error("refused after the oldest request left the minute")
		}
		if _, _, ok := w.Take("a", 3); ok {
			t.Error("admitted a fourth request within one minute")
		}
		for range 1000 {
			if _, _, ok := w.Take("c", 0); !ok {
				t.Fatal("rpm 0 refused a request")
			}
		}
	})
}
