package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
)

// Ctrl-C ends watch quietly even while a look waits on a server that stopped answering:
// the interrupted look is no view, and watch ends with no error and no "could not be
// read" view, at once rather than when the look's bound of 5s runs out (about 4s after the
// interrupt here). Guards against an interrupted look shown as a failed one, and against a
// stalled read that Ctrl-C does not cut short.
func TestWatchInterruptedWhileLooking(t *testing.T) {
	s := redistest.StartServer(t)
	out := interruptWatch(t, s, "100ms", func(time.Time) {
		s.Pause(t)
		// The next look starts 100ms after the first and waits up to 5s for the stopped
		// server: a second into the pause, one is under way.
		time.Sleep(time.Second)
	})
	if strings.Contains(out, "could not be read") {
		t.Errorf("the interrupted look was shown as a failed one:\n%s", out)
	}
}

// Ctrl-C ends watch at once also while a look is connecting again: the server dropped
// watch's connection and then stopped answering, so the next look dials a server that
// accepts the connection and never answers its handshake. Guards against a look that
// waits inside the client where the interrupt does not reach it (the handshake waits on
// the connection's deadline alone), until the look's bound of 5s runs out.
func TestWatchInterruptedWhileReconnecting(t *testing.T) {
	s := redistest.StartServer(t)
	interruptWatch(t, s, "2s", func(seen time.Time) {
		// The next look starts 2s after the first: by then its connection is gone and
		// the server stopped, so it connects again and waits for the handshake's answer.
		redistest.MustDo(t, s.Client(t), "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
		s.Pause(t)
		time.Sleep(time.Until(seen.Add(3 * time.Second)))
	})
}

// interruptWatch runs watch on a key of s every interval, and once the first view is
// out, runs stall (given when it was seen), which leaves a look waiting on s and returns
// while it waits. Then it interrupts watch, checks that watch ended with no error within
// 2s (the look's own bound would end it about 4s later), and returns watch's output. The
// server is resumed at the test's end.
func interruptWatch(t *testing.T, s *redistest.Server, interval string, stall func(seen time.Time)) string {
	t.Helper()
	redistest.MustDo(t, s.Client(t), "HSET", "nightly", "someone:1", "1")
	var buf syncBuffer
	ctx, interrupt := context.WithCancelCause(context.Background())
	defer interrupt(nil)
	done := async(func() error {
		return run(ctx, []string{"watch", "--redis", s.Addr(), "--interval", interval, "nightly"},
			func(string) string { return "" }, strings.NewReader(""), &buf, &buf)
	})
	redistest.Eventually(t, 20*time.Second, "no first view", func() bool { return strings.Contains(buf.String(), "someone:1") })
	t.Cleanup(func() { s.Resume(t) })
	stall(time.Now())
	interrupt(signalled{os.Interrupt})
	interrupted := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("watch interrupted: %v; want it ended quietly:\n%s", err, buf.String())
		}
		// 2s leaves a loaded machine room.
		if took := time.Since(interrupted); took > 2*time.Second {
			t.Errorf("watch ended %v after its interrupt; want at once, not when the stalled look's bound of 5s runs out:\n%s", took.Round(time.Millisecond), buf.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("watch did not end within 30s of its interrupt:\n%s", buf.String())
	}
	return buf.String()
}
