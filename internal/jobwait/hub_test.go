package jobwait_test

import (
	"testing"

	"github.com/inkwell/inkwell/internal/jobwait"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestHub(t *testing.T) {
	t.Parallel()
	t.Run("WakeWakesThatJobOnly", func(t *testing.T) {
		h := jobwait.New()
		a1, r1 := h.Subscribe(1)
		a2, r2 := h.Subscribe(1)
		b, rb := h.Subscribe(2)
		h.Wake(1, 3)
		if !closed(a1) || !closed(a2) || closed(b) {
			t.Fatalf("after Wake(1): job 1 woken %v %v, job 2 woken %v; want true true false", closed(a1), closed(a2), closed(b))
		}
		r1()
		r2()
		r2() // twice is harmless
		if got := h.IDs(); len(got) != 1 || got[0] != 2 {
			t.Errorf("IDs = %v, want [2]", got)
		}
		if n := h.Waiters(); n != 1 {
			t.Errorf("Waiters = %d with one left, want 1", n)
		}
		rb()
		if h.Len() != 0 || h.Waiters() != 0 {
			t.Errorf("Len = %d, Waiters = %d after every waiter left, want 0, 0", h.Len(), h.Waiters())
		}
	})
	t.Run("ReleaseFreesTheEntry", func(t *testing.T) {
		h := jobwait.New()
		_, r1 := h.Subscribe(7)
		_, r2 := h.Subscribe(7)
		r1()
		if h.Len() != 1 {
			t.Fatalf("Len = %d with one waiter left, want 1", h.Len())
		}
		r2()
		if h.Len() != 0 {
			t.Fatalf("Len = %d with none left, want 0", h.Len())
		}
	})
	t.Run("WakeAllThenResubscribe", func(t *testing.T) {
		h := jobwait.New()
		a, ra := h.Subscribe(1)
		h.WakeAll()
		ra()
		b, rb := h.Subscribe(1)
		defer rb()
		if !closed(a) || closed(b) {
			t.Fatalf("woken before WakeAll %v (want true), subscribed after %v (want false)", closed(a), closed(b))
		}
	})
	t.Run("CloseWakesNowAndLater", func(t *testing.T) {
		h := jobwait.New()
		a, ra := h.Subscribe(1)
		defer ra()
		h.Close()
		b, rb := h.Subscribe(2)
		defer rb()
		if !closed(a) || !closed(b) {
			t.Fatalf("after Close: waiter woken %v, new waiter woken %v; want both", closed(a), closed(b))
		}
	})
}

// TestHub_Stop: Stop wakes every waiter and says the server is stopping,
// but, unlike Close, a later Subscribe still waits (a waiter on a running
// job waits on for its answer) until a Wake or the Close.
func TestHub_Stop(t *testing.T) {
	h := jobwait.New()
	before, release := h.Subscribe(1)
	defer release()
	if h.Stopping() {
		t.Fatal("Stopping before Stop")
	}
	h.Stop()
	if !closed(before) || !h.Stopping() || h.Closed() {
		t.Fatalf("after Stop: woken %t, Stopping %t, Closed %t; want true, true, false", closed(before), h.Stopping(), h.Closed())
	}
	after, release2 := h.Subscribe(1)
	defer release2()
	if closed(after) {
		t.Fatal("a Subscribe after Stop woke at once; it must wait for the job's end or Close")
	}
	h.Close()
	if !closed(after) || !h.Stopping() {
		t.Fatalf("after Close: woken %t, Stopping %t; want both", closed(after), h.Stopping())
	}
}
