package hub_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/redistest"
)

// subscribeAs subscribes n subscribers to channel, read as r, and waits for the channel's
// confirmation.
func subscribeAs(t *testing.T, h *hub.Hub, channel string, r hub.Reading, n int) []*hub.Sub {
	t.Helper()
	subs := make([]*hub.Sub, n)
	for i := range subs {
		s, err := h.Subscribe(channel, r, nil, hub.Registry{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Release)
		subs[i] = s
	}
	if err := subs[0].Ready(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return subs
}

// woken parks every subscriber with a long bound, publishes msg and then marker (a message
// the reading ignores), and returns how many waiters msg woke: once the marker has been
// heard, msg has been handled in full, since a connection's messages are handled in order.
func woken(t *testing.T, h *hub.Hub, subs []*hub.Sub, publish func(msg string), msg, marker string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, len(subs))
	for _, s := range subs {
		go func() { _ = s.WaitOwn(ctx, time.Minute); done <- struct{}{} }()
	}
	defer func() {
		cancel()
		for range subs {
			<-done
		}
	}()
	eventually(t, "subscribers parked", func() bool { return h.Stats().Waiting == len(subs) })
	before := h.Stats().Messages
	publish(msg)
	publish(marker)
	eventually(t, "both messages heard", func() bool { return h.Stats().Messages >= before+2 })
	return len(subs) - h.Stats().Waiting
}

// A semaphore's channel carries the permits available: a release of k wakes k of the
// client's waiters (fewer if fewer wait), as Redisson's SemaphorePubSub does, and a count
// with four digits or more is a count, not a lock's wake code. A count of zero or less
// wakes nobody. A latch's channel opens on "0", which wakes every waiter; its new count
// message "1", and any other message, wakes nobody. Guards against a semaphore channel
// read as a lock's (one waiter per release, so permits go unused; "1000" taken for
// another client's code and waking nobody), and against a latch's "1" waking a waiter as
// a lock's read-unlock would.
func TestReadings(t *testing.T) {
	cases := []struct {
		reading       hub.Reading
		msg, marker   string
		waiters, want int
	}{
		{hub.CountMessages, "2", "0", 4, 2},
		{hub.CountMessages, "7", "0", 3, 3},
		{hub.CountMessages, "1000", "0", 3, 3},
		{hub.CountMessages, "0", "0", 2, 0},
		{hub.CountMessages, "-3", "0", 2, 0},
		{hub.LatchMessages, "0", "1", 3, 3},
		{hub.LatchMessages, "1", "1", 3, 0},
		{hub.LatchMessages, "2", "1", 3, 0},
		{hub.LatchMessages, "-300", "1", 3, 0},
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		for i, c := range cases {
			name := fmt.Sprintf("reading-%d", i)
			subs := subscribeAs(t, h, name, c.reading, c.waiters)
			got := woken(t, h, subs, func(msg string) { publish(t, rc, name, msg) }, c.msg, c.marker)
			if got != c.want {
				t.Errorf("case %d: %q on a channel of %d waiters woke %d; want %d", i, c.msg, c.waiters, got, c.want)
			}
			for _, s := range subs {
				s.Release()
			}
		}
	})
}

// A semaphore's release of k permits lets k of the client's waiters try (package pubsub:
// wake-ups are counted per channel, and one that comes while a subscriber is between its
// attempt and its wait is kept for it): with one waiter parked and one between attempts,
// a release of two wakes the parked one and leaves the other a permit. It is a wake-up,
// so a subscriber joining after it is not quiet since a mark before it; a latch's "0" is
// one too.
func TestCountKeepsPermits(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		subs := subscribeAs(t, h, "counted-permits", hub.CountMessages, 2)
		parked := wait(subs[0], time.Hour)
		eventually(t, "the waiter not parked", func() bool { return h.Stats().Waiting == 1 })
		m := h.Mark()
		publish(t, rc, "counted-permits", "2")
		if err := redistest.Recv(t, parked, 10*time.Second, "the parked waiter's wake-up"); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, wait(subs[1], time.Hour), 10*time.Second, "the wait of the subscriber that was between attempts"); err != nil {
			t.Fatal(err)
		}
		if subscribeAs(t, h, "counted-permits", hub.CountMessages, 1)[0].QuietSince(m) {
			t.Error("QuietSince a mark taken before a semaphore's release")
		}

		latch := subscribeAs(t, h, "opened", hub.LatchMessages, 1)[0]
		m = h.Mark()
		publish(t, rc, "opened", "0")
		if err := latch.Wait(context.Background(), time.Hour); err != nil {
			t.Fatal(err)
		}
		if subscribeAs(t, h, "opened", hub.LatchMessages, 1)[0].QuietSince(m) {
			t.Error("QuietSince a mark taken before a latch opened")
		}
	})
}
