package hub_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/redistest"
)

// settle gives a hub that wrongly wakes, subscribes or unsubscribes time to show it
// before a test counts: the behaviour checked is that nothing happens.
const settle = 300 * time.Millisecond

// A channel whose last subscriber left stays subscribed for the linger: a subscriber that
// comes back meanwhile finds it confirmed, and no UNSUBSCRIBE or second SUBSCRIBE is sent.
func TestLingerKeepsSubscription(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		h.SetLinger(time.Minute)
		stats := b.Commands(t)
		before := stats.Calls(t)
		for i := 0; i < 5; i++ {
			subscribe(t, h, "bursty").Release()
		}
		time.Sleep(settle)
		after := stats.Calls(t)
		if n := after["subscribe"] - before["subscribe"]; n != 1 {
			t.Errorf("%d SUBSCRIBE for five subscribers in a row within the linger; want 1", n)
		}
		if n := after["unsubscribe"] - before["unsubscribe"]; n != 0 {
			t.Errorf("%d UNSUBSCRIBE within the linger; want 0", n)
		}
		if n := b.Server.Subscribers(t, "NUMSUB", "bursty"); n != 1 {
			t.Errorf("server counts %d subscribers on the lingering channel; want 1", n)
		}
	})
}

// After the linger the hub's loop unsubscribes the channel and forgets it.
func TestLingerEnds(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		h.SetLinger(100 * time.Millisecond)
		subscribe(t, h, "passing").Release()
		eventually(t, "the lingering channel was never unsubscribed", func() bool {
			return h.Stats().Channels == 0 && b.Server.Subscribers(t, "NUMSUB", "passing") == 0
		})
		// And it can be subscribed again afterwards.
		s := subscribe(t, h, "passing")
		publish(t, b.Client(t), "passing", hub.WakeOne)
		if err := s.Wait(context.Background(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if st := h.Stats(); st.Woken != 1 {
			t.Errorf("stats %+v: the message on the channel subscribed again was not delivered", st)
		}
	})
}

// A mark tells a subscriber whether it may wait without another attempt: only when the
// channel was confirmed at the mark and nothing arrived on it since, not even while it
// lingered with nobody subscribed.
func TestQuietSince(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		h.SetLinger(time.Minute)
		var subs []*hub.Sub
		join := func(m hub.Mark) bool {
			s := subscribe(t, h, "marked")
			subs = append(subs, s)
			return s.QuietSince(m)
		}

		if join(h.Mark()) {
			t.Error("QuietSince a mark taken before the channel was subscribed")
		}
		if !join(h.Mark()) {
			t.Error("not QuietSince a mark taken on a confirmed channel with no message since")
		}

		// Another channel's message does not count.
		m := h.Mark()
		subscribe(t, h, "other").Release()
		publish(t, rc, "other", hub.WakeOne)
		eventually(t, "the other channel's message", func() bool { return h.Stats().Messages == 1 })
		if !join(m) {
			t.Error("a message on another channel counted against this one")
		}

		// Everyone leaves; a message arrives while the channel lingers.
		m = h.Mark()
		for _, s := range subs {
			s.Release()
		}
		publish(t, rc, "marked", hub.WakeOne)
		eventually(t, "the message to the lingering channel", func() bool { return h.Stats().Messages == 2 })
		if join(m) {
			t.Error("QuietSince a mark before a message that arrived while the channel lingered")
		}
		if !join(h.Mark()) {
			t.Error("not QuietSince a mark taken after the message")
		}
	})
}

// A release that woke another client by its code, and a new hold's lease, are not wake-ups
// for this client: a waiter that joins after them may still wait without another attempt
// (its attempt registered its client, which such a release passed over by design). Its
// own code, or a message with no code before it, is one.
func TestQuietSinceOtherClientsWakeUp(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		h := hub.New(rc, hub.Config{Code: "5555"})
		t.Cleanup(h.Close)
		first := subscribe(t, h, "codes")
		t.Cleanup(first.Release)
		heard := uint64(0)
		send := func(msgs ...string) {
			t.Helper()
			for _, msg := range msgs {
				publish(t, rc, "codes", msg)
			}
			heard += uint64(len(msgs))
			eventually(t, "the messages", func() bool { return h.Stats().Messages == heard })
		}
		join := func(m hub.Mark) bool {
			s := subscribe(t, h, "codes")
			defer s.Release()
			return s.QuietSince(m)
		}

		m := h.Mark()
		send("7777", hub.WakeOne, "-300")
		if !join(m) {
			t.Error("another client's wake-up, or a new hold's lease, counted as a wake-up for this client")
		}
		m = h.Mark()
		send("5555", hub.WakeOne)
		if join(m) {
			t.Error("QuietSince a mark before this client's own wake code")
		}
		m = h.Mark()
		send(hub.WakeOne)
		if join(m) {
			t.Error("QuietSince a mark before a message with no code, which wakes every client")
		}
	})
}

// A reconnect after the mark means messages may have been missed: not quiet.
func TestQuietSinceReconnect(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		s := subscribe(t, h, "dropped")
		m := h.Mark()
		if err := rc.Do(context.Background(), rc.B().ClientKill().TypePubsub().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "no reconnect", func() bool { return h.Stats().Reconnects > 0 })
		if err := s.Ready(context.Background(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if subscribe(t, h, "dropped").QuietSince(m) {
			t.Error("QuietSince a mark taken before the connection dropped")
		}
		m = h.Mark()
		if !subscribe(t, h, "dropped").QuietSince(m) {
			t.Error("not QuietSince a mark taken after the reconnect")
		}
	})
}

// When the waiters' bounds run out, the channel's timer wakes one of them, not all: the
// holder's lease is checked once per process.
func TestChannelTimerWakesOne(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		var done []<-chan error
		for i := 0; i < 3; i++ {
			done = append(done, wait(subscribe(t, h, "timed"), 100*time.Millisecond))
		}
		eventually(t, "nobody woken at the bound", func() bool { return h.Stats().TimedOut >= 1 })
		time.Sleep(settle)
		if st := h.Stats(); st.TimedOut != 1 || st.Waiting != 2 {
			t.Fatalf("stats %+v: want one waiter woken at the bound, two still parked", st)
		}
		publish(t, rc, "timed", hub.WakeAll)
		for _, d := range done {
			if err := redistest.Recv(t, d, 10*time.Second, "a Wait's return"); err != nil {
				t.Error(err)
			}
		}
	})
}

// A waiter woken by the channel's timer that waits again sets the timer anew, so that the
// others, whose own bounds the timer dropped, are woken in their turn.
func TestChannelTimerRearmed(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		first, second := subscribe(t, h, "rearmed"), subscribe(t, h, "rearmed")
		woken := wait(first, 100*time.Millisecond)
		eventually(t, "first not parked", func() bool { return h.Stats().Waiting == 1 })
		secondWoken := wait(second, time.Hour)
		if err := redistest.Recv(t, woken, 10*time.Second, "the first waiter's wake-up at its bound"); err != nil {
			t.Fatal(err)
		}
		// The first waiter tried and failed: it parks again with a new bound, behind the
		// second, which the timer wakes next.
		woken = wait(first, 100*time.Millisecond)
		if err := redistest.Recv(t, secondWoken, 10*time.Second, "the second waiter's wake-up by the re-armed timer"); err != nil {
			t.Fatal(err)
		}
		// And the second, failing too, parks again with what it learnt: the first is woken
		// in its turn.
		secondWoken = wait(second, 100*time.Millisecond)
		if err := redistest.Recv(t, woken, 10*time.Second, "the first waiter's second wake-up"); err != nil {
			t.Fatal(err)
		}
		publish(t, b.Client(t), "rearmed", hub.WakeAll)
		if err := redistest.Recv(t, secondWoken, 10*time.Second, "the second waiter's wake-up by a message"); err != nil {
			t.Fatal(err)
		}
	})
}

// A waiter woken by the timer that leaves without waiting again (it got an error, or gave
// up) passes the wake-up on rather than leaving the others without a timer.
func TestWokenWaiterPassesOn(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		first := subscribe(t, h, "leaving")
		woken := wait(first, 100*time.Millisecond)
		eventually(t, "first not parked", func() bool { return h.Stats().Waiting == 1 })
		second := wait(subscribe(t, h, "leaving"), time.Hour)
		if err := redistest.Recv(t, woken, 10*time.Second, "the first waiter's wake-up at its bound"); err != nil {
			t.Fatal(err)
		}
		first.Release()
		if err := redistest.Recv(t, second, 10*time.Second, "the wake-up passed on by the leaving waiter"); err != nil {
			t.Fatal(err)
		}
	})
}

// A waiter with its own schedule (WaitOwn) comes back at its bound whatever the channel's
// timer does, and neither sets that timer nor is woken by it.
func TestOwnTimer(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		queued := subscribe(t, h, "own")
		parked := make(chan error, 1)
		go func() { parked <- queued.WaitOwn(context.Background(), time.Hour) }()
		eventually(t, "the queued waiter not parked", func() bool { return h.Stats().Waiting == 1 })
		shared := wait(subscribe(t, h, "own"), 100*time.Millisecond)
		if err := redistest.Recv(t, shared, 10*time.Second, "the shared waiter's wake-up at its bound"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(settle)
		if st := h.Stats(); st.Waiting != 1 || st.TimedOut != 1 {
			t.Fatalf("stats %+v: the channel's timer woke the waiter with its own schedule", st)
		}

		other := subscribe(t, h, "own")
		own := make(chan error, 1)
		go func() { own <- other.WaitOwn(context.Background(), 100*time.Millisecond) }()
		if err := redistest.Recv(t, own, 10*time.Second, "the own timer's wake-up"); err != nil {
			t.Fatal(err)
		}
		publish(t, rc, "own", hub.WakeAll)
		if err := redistest.Recv(t, parked, 10*time.Second, "the queued waiter's wake-up"); err != nil {
			t.Fatal(err)
		}
	})
}

// Waiters of different classes (a read-write lock's readers and writers) are not
// interchangeable: the channel's timer wakes one of each class, so that a writer that
// fails does not leave a reader that would get in asleep; a reader that gets the lock wakes
// the next reader at once (Took with share), and sets the timer for the others.
func TestOnePerClass(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		join := func(class string) *hub.Sub {
			s, err := h.Subscribe("classes", hub.LockMessages, class, hub.Registry{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Release)
			if err := s.Ready(context.Background(), 10*time.Second); err != nil {
				t.Fatal(err)
			}
			return s
		}
		// Parked in this order: writer, reader, writer, reader.
		var subs []*hub.Sub
		var done []<-chan error
		for i, class := range []string{"write", "read", "write", "read"} {
			s := join(class)
			subs = append(subs, s)
			done = append(done, wait(s, 100*time.Millisecond))
			eventually(t, "waiter not parked", func() bool { return h.Stats().Waiting == i+1 })
		}
		for _, i := range []int{0, 1} {
			if err := redistest.Recv(t, done[i], 10*time.Second, "the first waiter of each class woken by the timer"); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(settle)
		if st := h.Stats(); st.TimedOut != 2 || st.Waiting != 2 {
			t.Fatalf("stats %+v: want the first writer and the first reader woken at the bound, two parked", st)
		}
		// The first reader got the lock with a 300ms lease: the next reader may get in
		// beside it and is woken now; the writer looks when that lease runs out.
		subs[1].Took(300*time.Millisecond, true)
		if err := redistest.Recv(t, done[3], 10*time.Second, "the next reader woken by Took"); err != nil {
			t.Fatal(err)
		}
		if st := h.Stats(); st.TimedOut != 2 || st.Waiting != 1 {
			t.Fatalf("stats %+v: want the reader woken by Took, not by the timer, and the writer parked", st)
		}
		if err := redistest.Recv(t, done[2], 10*time.Second, "the writer woken by the timer Took set"); err != nil {
			t.Fatal(err)
		}
		if st := h.Stats(); st.TimedOut != 3 {
			t.Fatalf("stats %+v: want the writer woken by the channel's timer", st)
		}
	})
}

// The channel's timer wakes a waiter a little after the bound it was given (the holder's
// lease as its attempt saw it), a sixty-fourth of it: a live holder renews at that moment,
// and a look after the renewal finds a whole lease left rather than two thirds. Timers
// never fire early, so this holds on a loaded machine.
func TestTimerLooksAfterTheRenewal(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		s := subscribe(t, h, "renewed")
		t.Cleanup(s.Release)
		const bound = 640 * time.Millisecond
		start := time.Now()
		if err := redistest.Recv(t, wait(s, bound), 10*time.Second, "the timer's wake-up"); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < bound+bound/64 {
			t.Errorf("woken after %v; want at least %v, the bound and a sixty-fourth of it", took, bound+bound/64)
		}
	})
}

// The timer's margin is a sixty-fourth of the bound, in whole milliseconds, and at most a
// quarter second (package pubsub): a holder that died with a long lease is looked at
// within 250ms of its lease's end, not a sixty-fourth of that lease later (a minute's
// lease would otherwise cost almost a second more). The margin is read rather than
// timed: a wait of a long bound would make the test as long.
func TestTimerMarginIsCapped(t *testing.T) {
	for _, c := range []struct{ bound, want time.Duration }{
		{100 * time.Millisecond, time.Millisecond}, // 1.5625ms, in whole milliseconds
		{640 * time.Millisecond, 10 * time.Millisecond},
		{16 * time.Second, 250 * time.Millisecond},
		{time.Minute, 250 * time.Millisecond},
		{time.Hour, 250 * time.Millisecond},
	} {
		if got := hub.RenewalGrace(c.bound); got != c.want {
			t.Errorf("the timer's margin after a bound of %v = %v; want %v", c.bound, got, c.want)
		}
	}
}

// A process woken with no waiter left passes the wake-up on (package pubsub): the last
// subscriber of a channel whose waiters register, leaving with a wake-up it never acted
// on (a permit: the wake-up came between its attempt and its wait), has another process's
// waiter woken.
func TestLastSubscriberPassesItsWakeUpOn(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		leaving, rc := newHub(t, b)
		other, _ := newHub(t, b)
		s, err := leaving.Subscribe("passing", hub.LockMessages, nil, hub.Registry{Wake: "wake:{passing}"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Release)
		if err := s.Ready(context.Background(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		publish(t, rc, "passing", hub.WakeOne)
		eventually(t, "message not received", func() bool { return leaving.Stats().Messages == 1 })
		// Subscribed after that wake-up, the other process's waiter did not hear it.
		woken := wait(subscribe(t, other, "passing"), time.Hour)
		eventually(t, "the other process's waiter not parked", func() bool { return other.Stats().Waiting == 1 })
		s.Release()
		if err := redistest.Recv(t, woken, 10*time.Second, "the wake-up passed on by the process that left"); err != nil {
			t.Fatal(err)
		}
	})
}

// A new hold's lease ("-<ms>") sets the channel's timer to that hold's end when it is
// sooner than the parked waiters' bounds (package pubsub): a waiter parked for an hour
// looks when the announced lease runs out, by the timer, not as woken by an unlock.
func TestLeaseMessageSetsTheTimer(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		s := subscribe(t, h, "leased")
		wakeParked(t, h, rc, s, "leased", "-200")
		if !s.Timed() {
			t.Errorf("stats %+v: the waiter was woken as by an unlock; want by the lease's timer", h.Stats())
		}
	})
}

// A wake code's lock message that was lost with a dropped connection must not make the
// hub ignore the first message after the reconnect: that one is an unlock of its own.
func TestReconnectForgetsACodesMessage(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		h := hub.New(rc, hub.Config{Code: "5555"})
		t.Cleanup(h.Close)
		s := subscribe(t, h, "cut")
		publish(t, rc, "cut", "7777") // another client's code; its "0" never comes
		eventually(t, "the code not heard", func() bool { return h.Stats().Messages == 1 })
		if err := rc.Do(context.Background(), rc.B().ClientKill().TypePubsub().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "no reconnect", func() bool { return h.Stats().Reconnects > 0 })
		if err := s.Ready(context.Background(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		// The reconnect's own wake-up, kept as a permit: the subscriber was not parked.
		if err := s.Wait(context.Background(), time.Hour); err != nil {
			t.Fatal(err)
		}
		wakeParked(t, h, rc, s, "cut", hub.WakeOne)
	})
}

// A release that picked a client by its wake code wakes one of that client's waiters, and
// the lock message after the code wakes nobody more, in that client or another (package
// pubsub).
func TestWakeCodeWakesItsClientOnly(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		picked := hub.New(rc, hub.Config{Code: "5555"})
		t.Cleanup(picked.Close)
		other := hub.New(rc, hub.Config{Code: "7777"})
		t.Cleanup(other.Close)
		var done []<-chan error
		for i, h := range []*hub.Hub{picked, picked, other} {
			done = append(done, wait(subscribe(t, h, "coded"), time.Hour))
			eventually(t, "waiter not parked", func() bool {
				return picked.Stats().Waiting+other.Stats().Waiting == i+1
			})
		}
		publish(t, rc, "coded", "5555")
		publish(t, rc, "coded", hub.WakeOne)
		if err := redistest.Recv(t, done[0], 10*time.Second, "the picked client's longest-parked waiter"); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the lock message not heard", func() bool {
			return picked.Stats().Messages == 2 && other.Stats().Messages == 2
		})
		time.Sleep(settle)
		if p, o := picked.Stats(), other.Stats(); p.Woken != 1 || p.Waiting != 1 || o.Woken != 0 || o.Waiting != 1 {
			t.Errorf("picked %+v, other %+v: want one waiter of the picked client woken, nobody else", p, o)
		}
	})
}

// A client whose wake code comes when it has no waiter left (the channel lingers) passes
// the wake-up on (package pubsub): with no other client registered, every client's waiter
// is woken once, rather than the release being lost. Once: the pass-on publishes the
// unlock message ("0"), which wakes one waiter of each client (and of each Redisson
// client), not the read-unlock message, which would wake them all.
func TestCodeForALingeringChannelIsPassedOn(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		left := hub.New(rc, hub.Config{Code: "5555"})
		t.Cleanup(left.Close)
		left.SetLinger(time.Minute)
		other := hub.New(rc, hub.Config{Code: "7777"})
		t.Cleanup(other.Close)
		s, err := left.Subscribe("lingering", hub.LockMessages, nil, hub.Registry{Wake: "wake:{lingering}"})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Ready(context.Background(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		s.Release()
		woken := wait(subscribe(t, other, "lingering"), time.Hour)
		eventually(t, "the other client's waiter not parked", func() bool { return other.Stats().Waiting == 1 })
		wait(subscribe(t, other, "lingering"), time.Hour) // a second waiter, parked behind it
		eventually(t, "the other client's second waiter not parked", func() bool { return other.Stats().Waiting == 2 })
		publish(t, rc, "lingering", "5555")
		publish(t, rc, "lingering", hub.WakeOne)
		if err := redistest.Recv(t, woken, 10*time.Second, "the wake-up passed on by the client with no waiter left"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(settle)
		if o := other.Stats(); o.Woken != 1 || o.Waiting != 1 {
			t.Errorf("other %+v after the pass-on: want one waiter woken and the other still parked", o)
		}
	})
}

// A waiter with its own schedule (WaitOwn) does not set the channel's timer: a shared
// waiter parked beside it is not woken at the other's bound, which it was never told of.
func TestOwnBoundLeavesTheTimer(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		shared := subscribe(t, h, "apart")
		sharedDone := wait(shared, time.Hour)
		eventually(t, "the shared waiter not parked", func() bool { return h.Stats().Waiting == 1 })
		own := subscribe(t, h, "apart")
		if err := own.WaitOwn(context.Background(), 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(settle)
		select {
		case err := <-sharedDone:
			t.Fatalf("the shared waiter woke (%v) at the bound of a waiter with its own schedule", err)
		default:
		}
		if st := h.Stats(); st.Waiting != 1 || st.TimedOut != 1 {
			t.Errorf("stats %+v: want the own waiter back at its bound, the shared one parked", st)
		}
	})
}

// A client that lets go of a channel leaves the lock's wake registries before it
// unsubscribes, so that no unlock picks it once it no longer hears the channel.
func TestUnsubscribeLeavesTheRegistries(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		h := hub.New(rc, hub.Config{Code: "5555"})
		t.Cleanup(h.Close)
		h.SetLinger(100 * time.Millisecond)
		reg := hub.Registry{Wake: "wake:{left}", Readers: "readers:{left}"}
		ctx := context.Background()
		for _, key := range []string{reg.Wake, reg.Readers} {
			// As a waiter's attempt registers its client.
			if err := rc.Do(ctx, rc.B().Zadd().Key(key).ScoreMember().ScoreMember(1, "5555").ScoreMember(2, "7777").Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		s, err := h.Subscribe("left", hub.LockMessages, nil, reg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Ready(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		s.Release()
		eventually(t, "the channel never unsubscribed", func() bool { return h.Stats().Channels == 0 })
		for _, key := range []string{reg.Wake, reg.Readers} {
			members, err := rc.Do(ctx, rc.B().Zrange().Key(key).Min("0").Max("-1").Build()).AsStrSlice()
			if err != nil {
				t.Fatal(err)
			}
			if len(members) != 1 || members[0] != "7777" {
				t.Errorf("%s holds %v after the client let go of the channel; want only the other client, 7777", key, members)
			}
		}
	})
}

// A waiter woken by the channel's timer that leaves passes the timer's check on to a
// waiter of its own class (package pubsub: the timer wakes one waiter per class): a
// reader's check goes to the next reader, not to a writer parked before it, or the readers
// would sleep past the lease they were told of.
func TestTimersCheckPassedOnWithinItsClass(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		first := subscribeClass(t, h, "kinds", "read")
		if err := redistest.Recv(t, wait(first, 100*time.Millisecond), 10*time.Second, "the first reader's wake-up at its bound"); err != nil {
			t.Fatal(err)
		}
		writer := wait(subscribeClass(t, h, "kinds", "write"), time.Hour)
		eventually(t, "the writer not parked", func() bool { return h.Stats().Waiting == 1 })
		reader := wait(subscribeClass(t, h, "kinds", "read"), time.Hour)
		eventually(t, "the reader not parked", func() bool { return h.Stats().Waiting == 2 })
		first.Release()
		if err := redistest.Recv(t, reader, 10*time.Second, "the next reader, given the check the first one left with"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-writer:
			t.Fatalf("the writer was woken (%v) with a reader's check", err)
		default:
		}
	})
}

// The message that follows another client's wake code is that release's, and is ignored
// once (package pubsub), a read unlock ("1") as much as an unlock ("0"): the next unlock
// message with no code before it is one of its own, and wakes a waiter.
func TestCodesMessageIgnoredOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		h := hub.New(rc, hub.Config{Code: "5555"})
		t.Cleanup(h.Close)
		done := wait(subscribe(t, h, "followed"), time.Hour)
		eventually(t, "waiter not parked", func() bool { return h.Stats().Waiting == 1 })
		publish(t, rc, "followed", "7777")
		publish(t, rc, "followed", hub.WakeAll)
		eventually(t, "the code and its message not heard", func() bool { return h.Stats().Messages == 2 })
		time.Sleep(settle)
		if st := h.Stats(); st.Woken != 0 || st.Waiting != 1 {
			t.Fatalf("stats %+v: the read unlock that woke another client by its code woke a waiter here", st)
		}
		publish(t, rc, "followed", hub.WakeOne)
		if err := redistest.Recv(t, done, 10*time.Second, "the wake-up by the unlock after the code's message"); err != nil {
			t.Fatal(err)
		}
	})
}

// A read unlock ("1") is a wake-up for every client: a subscriber that joins after it is
// not quiet since a mark taken before it (package pubsub, step 2).
func TestQuietSinceReadUnlock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		subscribe(t, h, "read-unlocked")
		m := h.Mark()
		publish(t, rc, "read-unlocked", hub.WakeAll)
		eventually(t, "the message not heard", func() bool { return h.Stats().Messages == 1 })
		if subscribe(t, h, "read-unlocked").QuietSince(m) {
			t.Error("QuietSince a mark taken before a read unlock")
		}
	})
}

// A waiter woken by a read unlock ("1") owes the channel an attempt like any woken waiter:
// one that leaves instead passes the wake-up on to a waiter parked after the message.
func TestWokenByReadUnlockPassesOn(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		first := subscribe(t, h, "read-passed")
		wakeParked(t, h, rc, first, "read-passed", hub.WakeAll)
		second := wait(subscribe(t, h, "read-passed"), time.Hour)
		eventually(t, "the second waiter not parked", func() bool { return h.Stats().Waiting == 1 })
		first.Release()
		if err := redistest.Recv(t, second, 10*time.Second, "the wake-up passed on by the waiter that left"); err != nil {
			t.Fatal(err)
		}
	})
}

// A waiter that parks again has acted on the wake-up it held, by the attempt it made
// since: when it then gives up (its context ends) and leaves, it has nothing to pass on,
// and a waiter parked beside it is not woken.
func TestParkedAgainOwesNothing(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		first := subscribe(t, h, "settled")
		publish(t, rc, "settled", hub.WakeOne)
		eventually(t, "message not received", func() bool { return h.Stats().Messages == 1 })
		if err := first.Wait(context.Background(), time.Hour); err != nil { // the kept permit
			t.Fatal(err)
		}
		other := wait(subscribe(t, h, "settled"), time.Hour)
		eventually(t, "the other waiter not parked", func() bool { return h.Stats().Waiting == 1 })
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := first.Wait(ctx, time.Hour); err == nil {
			t.Fatal("Wait with a context that ends returned nil; want the context's error")
		}
		first.Release()
		time.Sleep(settle)
		select {
		case err := <-other:
			t.Fatalf("the other waiter was woken (%v) by a subscriber that had acted on its wake-up", err)
		default:
		}
		if st := h.Stats(); st.Woken != 1 || st.Waiting != 1 {
			t.Errorf("stats %+v: want only the permit's wake-up, the other waiter still parked", st)
		}
	})
}

// The last waiter of a process, woken by an unlock, that leaves without acting on it has
// another process's waiter woken (package pubsub: a process woken with no waiter left
// passes the wake-up on), as one leaving with a kept permit does.
func TestLastWokenWaiterPassesItsWakeUpOn(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		leaving, rc := newHub(t, b)
		other, _ := newHub(t, b)
		s, err := leaving.Subscribe("handed-over", hub.LockMessages, nil, hub.Registry{Wake: "wake:{handed-over}"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Release)
		if err := s.Ready(context.Background(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		wakeParked(t, leaving, rc, s, "handed-over", hub.WakeOne)
		// Subscribed after that wake-up, the other process's waiter did not hear it.
		woken := wait(subscribe(t, other, "handed-over"), time.Hour)
		eventually(t, "the other process's waiter not parked", func() bool { return other.Stats().Waiting == 1 })
		s.Release()
		if err := redistest.Recv(t, woken, 10*time.Second, "the wake-up passed on by the process that left"); err != nil {
			t.Fatal(err)
		}
	})
}

// A waiter with its own schedule (WaitOwn) that comes back at its bound reports it
// (Timed): nothing woke it, its attempt is a look at the lease. A wait that a wake-up
// ends is not Timed.
func TestOwnBoundIsTimed(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		s := subscribe(t, h, "own-timed")
		if err := s.WaitOwn(context.Background(), 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if !s.Timed() {
			t.Errorf("stats %+v: WaitOwn back at its own bound is not Timed", h.Stats())
		}
		// And a wait that then takes a kept wake-up was woken, not timed.
		publish(t, rc, "own-timed", hub.WakeOne)
		eventually(t, "message not received", func() bool { return h.Stats().Messages == 1 })
		if err := s.Wait(context.Background(), time.Hour); err != nil {
			t.Fatal(err)
		}
		if s.Timed() {
			t.Errorf("stats %+v: a Wait that took a kept wake-up is Timed", h.Stats())
		}
	})
}

// Took settles the wake-up its subscriber held: a waiter that got the lock and then lets
// go of the channel has no wake-up to pass on, and a waiter parked beside it sleeps on.
func TestTookSettlesTheWakeUp(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		first := subscribe(t, h, "taken")
		wakeParked(t, h, rc, first, "taken", hub.WakeOne)
		other := wait(subscribe(t, h, "taken"), time.Hour)
		eventually(t, "the other waiter not parked", func() bool { return h.Stats().Waiting == 1 })
		first.Took(time.Hour, false)
		first.Release()
		time.Sleep(settle)
		select {
		case err := <-other:
			t.Fatalf("the other waiter was woken (%v) by a subscriber that got the lock", err)
		default:
		}
	})
}

// A channel whose only subscriber leaves before the hub got to subscribe it is forgotten
// (package pubsub: Stats.Channels counts channels subscribed, lingering, or being
// subscribed or unsubscribed), as one unsubscribed after its linger is.
func TestChannelLeftBeforeItsSubscriptionIsForgotten(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		h.SetLinger(50 * time.Millisecond)
		for i := 0; i < 20; i++ {
			s, err := h.Subscribe(fmt.Sprintf("brief-%d", i), hub.LockMessages, nil, hub.Registry{})
			if err != nil {
				t.Fatal(err)
			}
			s.Release()
		}
		eventually(t, "channels left before they were subscribed still counted", func() bool { return h.Stats().Channels == 0 })
	})
}

// A channel whose linger ended is being unsubscribed: a message published then may not be
// heard, so a subscriber that comes back meanwhile is not quiet since a mark taken while
// the channel was subscribed, neither before the new subscription is confirmed nor after
// (package pubsub, step 2: the channel must have stayed subscribed since the mark). The
// server is paused to hold the UNSUBSCRIBE's confirmation back.
func TestQuietSinceUnsubscribed(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		h.SetLinger(50 * time.Millisecond)
		first := subscribe(t, h, "gap")
		m := h.Mark()
		b.Server.Pause(t)
		paused := true
		resume := func() {
			if paused {
				paused = false
				b.Server.Resume(t)
			}
		}
		t.Cleanup(resume)
		first.Release()
		time.Sleep(settle) // the linger ends and the hub sends UNSUBSCRIBE
		back, err := h.Subscribe("gap", hub.LockMessages, nil, hub.Registry{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(back.Release)
		if back.QuietSince(m) {
			t.Error("QuietSince a mark taken before the channel was unsubscribed, with the subscription not yet made again")
		}
		resume()
		if err := back.Ready(context.Background(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the subscription not made again", func() bool { return b.Server.Subscribers(t, "NUMSUB", "gap") == 1 })
		if back.QuietSince(m) {
			t.Error("QuietSince a mark taken before the channel was unsubscribed and subscribed again")
		}
		if !back.QuietSince(h.Mark()) {
			t.Error("not QuietSince a mark taken once subscribed again")
		}
	})
}

// The channel's timer wakes the longest-parked waiter sharing it, past a waiter with its
// own schedule parked before: the waiters parked after the woken one stay parked, and a
// message wakes them.
func TestTimerWakesPastAnOwnWaiter(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		own := make(chan error, 1)
		queued := subscribe(t, h, "past")
		go func() { own <- queued.WaitOwn(context.Background(), time.Hour) }()
		eventually(t, "the waiter with its own schedule not parked", func() bool { return h.Stats().Waiting == 1 })
		first := wait(subscribe(t, h, "past"), 100*time.Millisecond)
		eventually(t, "the first shared waiter not parked", func() bool { return h.Stats().Waiting == 2 })
		second := wait(subscribe(t, h, "past"), time.Hour)
		eventually(t, "the second shared waiter not parked", func() bool { return h.Stats().Waiting == 3 })
		if err := redistest.Recv(t, first, 10*time.Second, "the first shared waiter's wake-up by the timer"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(settle)
		if st := h.Stats(); st.Waiting != 2 || st.TimedOut != 1 {
			t.Fatalf("stats %+v: want the first shared waiter woken by the timer, the two others parked", st)
		}
		publish(t, rc, "past", hub.WakeAll)
		for _, d := range []<-chan error{own, second} {
			if err := redistest.Recv(t, d, 10*time.Second, "a parked waiter's wake-up by the read unlock"); err != nil {
				t.Fatal(err)
			}
		}
	})
}
