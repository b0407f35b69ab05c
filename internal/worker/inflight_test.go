package worker_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// A call in flight holds nothing of its request (docs/architecture.md,
// "What a call in flight holds"): once the provider has what it sends,
// neither the lane nor the in-process sim keeps the job's payload, its
// parsed messages or its provider request, for a call that may last
// minutes. Retries read the request again from the database (a new
// attempt), so nothing needs it in memory. The test holds only a weak
// pointer to the messages' bytes as the provider received them; after a
// collection, with the call still in flight, they must be gone.

// weakWatch wraps a provider: each call records a weak pointer to the
// bytes of the messages it was given, then the wrapped provider runs it.
type weakWatch struct {
	inner   inkwell.Provider
	watched chan weak.Pointer[byte]
}

func (w *weakWatch) Generate(ctx context.Context, req inkwell.ProviderRequest) (inkwell.ProviderResponse, error) {
	w.watched <- messagesPointer(req)
	return w.inner.Generate(ctx, req)
}

// messagesPointer is a weak pointer to the first byte of req's messages as
// the lane parsed them (a slice of the payload it read).
//
//go:noinline
func messagesPointer(req inkwell.ProviderRequest) weak.Pointer[byte] {
	raw := req.Chat.Fields["messages"]
	if len(raw) == 0 {
		return weak.Pointer[byte]{}
	}
	return weak.Make(&raw[0])
}

func TestLane_CallInFlightHoldsNoneOfItsRequest(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		watch := &weakWatch{inner: provider.NewSim(time.Hour), watched: make(chan weak.Pointer[byte], 1)}
		startLane(t, st, worker.Config{Name: "lane-mem", Provider: watch, Concurrency: 1, Grace: time.Millisecond})
		user := strings.Repeat("a long message about fountain pen inks. ", 400) // 16 KiB
		acceptChat(t, st, "mem-1", "acme", `{"model":"`+provider.DefaultModel+`","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"`+user+`"}],"temperature":0.2}`, nil, 0)
		var wp weak.Pointer[byte]
		select {
		case wp = <-watch.watched:
		case <-time.After(waitLimit):
			t.Fatal("the provider was not called")
		}
		if wp == (weak.Pointer[byte]{}) {
			t.Fatal("the provider request carries no messages")
		}
		// The call is in flight (the sim waits an hour); its goroutine has
		// passed the request on. Two collections: a weak pointer reads nil
		// once its object is found unreachable.
		runtime.GC()
		runtime.GC()
		if wp.Value() != nil {
			t.Fatal("a call in flight still holds its request's messages: the lane or the provider kept the payload, the parsed request or the provider request past the call's start")
		}
	})
}
