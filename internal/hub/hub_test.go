package hub_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newHub(t *testing.T, b *redistest.Backend) (*hub.Hub, rueidis.Client) {
	t.Helper()
	rc := b.Client(t)
	h := hub.New(rc, hub.Config{})
	t.Cleanup(h.Close)
	return h, rc
}

func publish(t *testing.T, rc rueidis.Client, channel, msg string) {
	t.Helper()
	if err := rc.Do(context.Background(), rc.B().Publish().Channel(channel).Message(msg).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

func subscribe(t *testing.T, h *hub.Hub, channel string) *hub.Sub {
	t.Helper()
	return subscribeClass(t, h, channel, nil)
}

// subscribeClass is subscribe for a subscriber of class.
func subscribeClass(t *testing.T, h *hub.Hub, channel string, class any) *hub.Sub {
	t.Helper()
	s, err := h.Subscribe(channel, hub.LockMessages, class, hub.Registry{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Release)
	if err := s.Ready(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return s
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	redistest.Eventually(t, 10*time.Second, what, cond)
}

// wait runs s.Wait in the background and reports its result.
func wait(s *hub.Sub, bound time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.Wait(context.Background(), bound) }()
	return done
}

// wakeParked parks a wait of s, a subscriber of h on channel, bounded by an hour; once h
// counts one waiter parked, publishes msg on the channel, and fails t unless the wait ends
// without error within 10 s.
func wakeParked(t *testing.T, h *hub.Hub, rc rueidis.Client, s *hub.Sub, channel, msg string) {
	t.Helper()
	done := wait(s, time.Hour)
	eventually(t, "the waiter not parked", func() bool { return h.Stats().Waiting == 1 })
	publish(t, rc, channel, msg)
	if err := redistest.Recv(t, done, 10*time.Second, "the parked waiter's wake-up by "+strconv.Quote(msg)); err != nil {
		t.Fatal(err)
	}
}

// A message that arrives before the subscriber parks is kept as a permit, not lost.
func TestPermitBeforeWait(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		s := subscribe(t, h, "early")
		publish(t, rc, "early", hub.WakeOne)
		eventually(t, "message not received", func() bool { return h.Stats().Messages == 1 })
		if err := s.Wait(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if st := h.Stats(); st.Woken != 1 || st.TimedOut != 0 {
			t.Errorf("stats %+v: want one wake-up from the kept permit", st)
		}
	})
}

// Permits never exceed the subscribers: five messages for one subscriber wake it once.
func TestPermitsCapped(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		s := subscribe(t, h, "flood")
		for i := 0; i < 5; i++ {
			publish(t, rc, "flood", hub.WakeOne)
		}
		eventually(t, "messages not received", func() bool { return h.Stats().Messages == 5 })
		if err := s.Wait(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(context.Background(), 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if st := h.Stats(); st.Woken != 1 || st.TimedOut != 1 {
			t.Errorf("stats %+v: want one wake-up and then a timeout", st)
		}
	})
}

func TestWakeOneAndWakeAll(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		var done []<-chan error
		for i := 0; i < 3; i++ {
			done = append(done, wait(subscribe(t, h, "herd"), time.Minute))
		}
		eventually(t, "waiters not parked", func() bool { return h.Stats().Waiting == 3 })

		publish(t, rc, "herd", hub.WakeOne)
		eventually(t, "nobody woken by WakeOne", func() bool { return h.Stats().Woken == 1 })
		// Give a wrongly woken second waiter time to show up before counting.
		time.Sleep(50 * time.Millisecond)
		if st := h.Stats(); st.Woken != 1 || st.Waiting != 2 {
			t.Fatalf("after WakeOne: %+v; want exactly one woken, two parked", st)
		}

		publish(t, rc, "herd", hub.WakeAll)
		eventually(t, "not all woken by WakeAll", func() bool { return h.Stats().Woken == 3 })
		for _, d := range done {
			if err := redistest.Recv(t, d, 10*time.Second, "a woken Wait's return"); err != nil {
				t.Error(err)
			}
		}
	})
}

// Subscriptions are counted: one server subscription however many subscribers, dropped
// after the last one leaves.
func TestReferenceCounting(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		numsub := func() int64 {
			v, err := rc.Do(context.Background(), rc.B().PubsubNumsub().Channel("counted").Build()).ToArray()
			if err != nil || len(v) != 2 {
				t.Fatalf("PUBSUB NUMSUB: %v, %v", v, err)
			}
			n, _ := v[1].AsInt64()
			return n
		}
		s1, err := h.Subscribe("counted", hub.LockMessages, nil, hub.Registry{})
		if err != nil {
			t.Fatal(err)
		}
		s2, err := h.Subscribe("counted", hub.LockMessages, nil, hub.Registry{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []*hub.Sub{s1, s2} {
			if err := s.Ready(context.Background(), 10*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		if n := numsub(); n != 1 {
			t.Fatalf("server subscriptions = %d; want 1 for two subscribers", n)
		}
		s1.Release()
		s1.Release() // idempotent: must not drop s2's reference
		time.Sleep(50 * time.Millisecond)
		if n := numsub(); n != 1 {
			t.Fatalf("server subscriptions = %d after one release; want 1", n)
		}
		s2.Release()
		eventually(t, "channel still subscribed after the last release", func() bool {
			return numsub() == 0 && h.Stats().Channels == 0
		})
	})
}

// Subscribing again right after the last release must end up subscribed, whatever order
// the UNSUBSCRIBE and SUBSCRIBE confirmations come in.
func TestResubscribeAfterRelease(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		for i := 0; i < 20; i++ {
			s, err := h.Subscribe("churn", hub.LockMessages, nil, hub.Registry{})
			if err != nil {
				t.Fatal(err)
			}
			s.Release()
		}
		s := subscribe(t, h, "churn")
		publish(t, rc, "churn", hub.WakeOne)
		if err := s.Wait(context.Background(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if st := h.Stats(); st.Woken != 1 {
			t.Errorf("stats %+v: the message after churn was not delivered", st)
		}
	})
}

func TestWaitHonoursContext(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		s := subscribe(t, h, "impatient")
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := s.Wait(ctx, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait: %v; want context.DeadlineExceeded", err)
		}
		if st := h.Stats(); st.Waiting != 0 {
			t.Errorf("stats %+v: the cancelled waiter is still parked", st)
		}
	})
}

// After the subscriber connection is killed the hub reconnects, subscribes again and wakes
// every waiter once, since a message may have been missed meanwhile.
func TestReconnectWakesEveryone(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		first := wait(subscribe(t, h, "fragile"), time.Minute)
		second := wait(subscribe(t, h, "fragile"), time.Minute)
		eventually(t, "waiters not parked", func() bool { return h.Stats().Waiting == 2 })
		if err := rc.Do(context.Background(), rc.B().ClientKill().TypePubsub().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		for _, d := range []<-chan error{first, second} {
			select {
			case err := <-d:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("waiter not woken after the reconnect")
			}
		}
		st := h.Stats()
		if st.Reconnects == 0 || st.Woken != 2 || st.TimedOut != 0 {
			t.Errorf("stats %+v: want a reconnect that woke both waiters", st)
		}
		// And the channel works again.
		s := subscribe(t, h, "fragile")
		publish(t, rc, "fragile", hub.WakeOne)
		if err := s.Wait(context.Background(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := h.Stats().Woken; got != 3 {
			t.Errorf("woken = %d after a message on the resubscribed channel; want 3", got)
		}
	})
}

func TestClose(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		s := subscribe(t, h, "closing")
		done := wait(s, time.Minute)
		eventually(t, "waiter not parked", func() bool { return h.Stats().Waiting == 1 })
		h.Close()
		if err := redistest.Recv(t, done, 10*time.Second, "the parked Wait's return at Close"); !errors.Is(err, lockerr.ErrClosed) {
			t.Errorf("parked Wait at Close: %v; want ErrClosed", err)
		}
		if _, err := h.Subscribe("closing", hub.LockMessages, nil, hub.Registry{}); !errors.Is(err, lockerr.ErrClosed) {
			t.Errorf("Subscribe after Close: %v; want ErrClosed", err)
		}
		if err := s.Wait(context.Background(), time.Minute); !errors.Is(err, lockerr.ErrClosed) {
			t.Errorf("Wait after Close: %v; want ErrClosed", err)
		}
		h.Close() // idempotent
	})
}

// A subscriber that took a kept permit (the wake-up came between its attempt and its wait)
// owes the channel an attempt: one that leaves instead passes the wake-up on to a waiter
// of the same client parked meanwhile (package pubsub), or the release it stands for is
// lost for that waiter.
func TestPermitTakerPassesOn(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		first := subscribe(t, h, "kept")
		publish(t, rc, "kept", hub.WakeOne)
		eventually(t, "message not received", func() bool { return h.Stats().Messages == 1 })
		if err := first.Wait(context.Background(), time.Hour); err != nil {
			t.Fatal(err)
		}
		second := wait(subscribe(t, h, "kept"), time.Hour)
		eventually(t, "the second waiter not parked", func() bool { return h.Stats().Waiting == 1 })
		first.Release()
		if err := redistest.Recv(t, second, 10*time.Second, "the wake-up passed on by the subscriber that took the permit"); err != nil {
			t.Fatal(err)
		}
	})
}

// A read unlock ("1") lets every waiter try, a subscriber between its attempt and its wait
// too: it keeps a permit, and its next Wait returns at once.
func TestWakeAllKeepsPermits(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		parked := wait(subscribe(t, h, "readers"), time.Hour)
		between := subscribe(t, h, "readers")
		eventually(t, "the waiter not parked", func() bool { return h.Stats().Waiting == 1 })
		publish(t, rc, "readers", hub.WakeAll)
		if err := redistest.Recv(t, parked, 10*time.Second, "the parked waiter's wake-up"); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, wait(between, time.Hour), 10*time.Second, "the wait of the subscriber that was between attempts"); err != nil {
			t.Fatal(err)
		}
		if st := h.Stats(); st.Woken != 2 || st.TimedOut != 0 {
			t.Errorf("stats %+v: want both subscribers woken by the read unlock", st)
		}
	})
}

// Sharded pub/sub (SSUBSCRIBE) keeps the promise of the classic subscriber: a
// subscription that ends while wanted (here the server restarts) is made again, and
// its waiters are woken once then, since an unlock may have been published meanwhile.
// Redis 7 serves SSUBSCRIBE outside a cluster too.
func TestShardedReconnectWakesEveryone(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		h := hub.New(rc, hub.Config{Sharded: true})
		t.Cleanup(h.Close)
		done := wait(subscribe(t, h, "sharded"), time.Hour)
		eventually(t, "waiter not parked", func() bool { return h.Stats().Waiting == 1 })
		// CLIENT KILL TYPE pubsub spares RESP3 connections such as the one SSUBSCRIBE
		// uses: a restart drops it.
		b.Server.Restart(t)
		if err := redistest.Recv(t, done, 10*time.Second, "the waiter's wake-up once the channel is subscribed again"); err != nil {
			t.Fatal(err)
		}
		if st := h.Stats(); st.Reconnects == 0 || st.Woken != 1 || st.TimedOut != 0 {
			t.Errorf("stats %+v: want a reconnect that woke the waiter", st)
		}
	})
}

// Permits never exceed the subscribers (package pubsub), even when one leaves: two kept
// wake-ups for two subscribers, one of which leaves, wake the one left once.
func TestPermitsCappedWhenOneLeaves(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		stays, leaves := subscribe(t, h, "shrinking"), subscribe(t, h, "shrinking")
		publish(t, rc, "shrinking", hub.WakeOne)
		publish(t, rc, "shrinking", hub.WakeOne)
		eventually(t, "messages not received", func() bool { return h.Stats().Messages == 2 })
		leaves.Release()
		if err := stays.Wait(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := stays.Wait(context.Background(), 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if st := h.Stats(); st.Woken != 1 || st.TimedOut != 1 {
			t.Errorf("stats %+v: want one wake-up and then a timeout", st)
		}
	})
}

// A subscription not yet confirmed (the server does not answer) is not quiet since any
// mark, and Ready gives up on it at its bound with nil (the caller then falls back on its
// lease bound), returns the context's error when the context ends first, and ErrClosed
// when the hub is closed meanwhile.
func TestReadyUnconfirmed(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		subscribe(t, h, "answered") // the connection is made and Redis answered on it
		b.Server.Pause(t)
		paused := true
		resume := func() {
			if paused {
				paused = false
				b.Server.Resume(t)
			}
		}
		t.Cleanup(resume) // before the hub's Close and the server's stop
		s, err := h.Subscribe("unanswered", hub.LockMessages, nil, hub.Registry{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Release)
		if s.QuietSince(h.Mark()) {
			t.Error("QuietSince on a channel whose subscription was never confirmed")
		}
		if err := s.Ready(context.Background(), 100*time.Millisecond); err != nil {
			t.Errorf("Ready on an unconfirmed channel at its bound: %v; want nil", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.Ready(ctx, time.Hour); !errors.Is(err, context.Canceled) {
			t.Errorf("Ready with an ended context: %v; want context.Canceled", err)
		}
		ready := make(chan error, 1)
		go func() { ready <- s.Ready(context.Background(), time.Hour) }()
		closed := make(chan struct{})
		go func() { h.Close(); close(closed) }()
		if err := redistest.Recv(t, ready, 10*time.Second, "Ready's return at Close"); !errors.Is(err, lockerr.ErrClosed) {
			t.Errorf("Ready at Close: %v; want ErrClosed", err)
		}
		resume()
		redistest.Recv(t, closed, 10*time.Second, "Close's return")
	})
}

// The hub tells its owner (Config.OnReconnect) when its subscriber connection is made
// again after it was lost and Redis answers: a Redis that restarted may have lost every
// lock. Classic, with no channel wanted: the connection itself is how the client learns
// that Redis went away. Sharded: when a channel's subscription is made again.
func TestReconnectTold(t *testing.T) {
	for _, mode := range []struct {
		name    string
		sharded bool
	}{{"classic", false}, {"sharded", true}} {
		t.Run(mode.name, func(t *testing.T) {
			redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
				var told atomic.Int64
				h := hub.New(b.Client(t), hub.Config{Sharded: mode.sharded, Name: "told", OnReconnect: func() { told.Add(1) }})
				t.Cleanup(h.Close)
				if mode.sharded {
					subscribe(t, h, "told")
				} else {
					// Redis answered on the subscriber connection (it took its name): a
					// restart is a loss.
					eventually(t, "the subscriber connection not made", func() bool {
						list, err := b.Server.Do(t, "CLIENT", "LIST").ToString()
						return err == nil && strings.Contains(list, "name=told ")
					})
				}
				b.Server.Restart(t)
				eventually(t, "the owner never told of the reconnect", func() bool { return told.Load() > 0 })
			})
		})
	}
}

// A read unlock ("1") lets every waiter try once: a parked waiter it woke that tries and
// fails parks again until the next wake-up or its bound, with no permit left over from
// that message.
func TestWakeAllWakesOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		s := subscribe(t, h, "read-once")
		wakeParked(t, h, rc, s, "read-once", hub.WakeAll)
		if err := s.Wait(context.Background(), 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if st := h.Stats(); st.Woken != 1 || st.TimedOut != 1 {
			t.Errorf("stats %+v: want one wake-up by the read unlock, then a wait to the bound", st)
		}
	})
}
