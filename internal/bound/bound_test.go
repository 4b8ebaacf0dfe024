package bound

import (
	"context"
	"testing"
	"time"
)

// Wait gives f's answer when f returns first, and gives up, with false, when ctx ends
// while f is held up; f, left behind, finishes on its own.
func TestWait(t *testing.T) {
	if v, ok := Wait(context.Background(), func() int { return 7 }); v != 7 || !ok {
		t.Errorf("Wait of a call that returns 7: %d, %v", v, ok)
	}

	release := make(chan struct{})
	finished := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	gave := make(chan bool, 1)
	go func() {
		v, ok := Wait(ctx, func() int {
			defer close(finished)
			<-release // held up, whatever ctx says
			return 7
		})
		gave <- ok || v != 0
	}()
	select {
	case answered := <-gave:
		if answered {
			t.Error("Wait of a call held up past its context answered")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Wait of a call held up past its context did not return within 30s of its context's end")
	}
	close(release)
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("the call left behind did not finish once released")
	}
}
