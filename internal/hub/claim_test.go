package hub_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/redistest"
)

// parked subscribes to channel with class and an offer (none when offer is nil), and parks
// it in the background; its wait's result and what it was handed come on the returned
// channel once the wait ends.
func parked(t *testing.T, h *hub.Hub, ctx context.Context, channel string, class, offer any) (*hub.Sub, <-chan waited) {
	t.Helper()
	s := subscribeClass(t, h, channel, class)
	s.Offer(offer)
	before := h.Stats().Waiting
	done := make(chan waited, 1)
	go func() {
		err := s.Wait(ctx, time.Minute)
		done <- waited{err, s.Handed()}
	}()
	eventually(t, "the subscriber never parked", func() bool { return h.Stats().Waiting == before+1 })
	return s, done
}

type waited struct {
	err    error
	handed any
}

// A claim takes the longest-parked waiter of its class that made an offer, and no other:
// not one without an offer, not one of another class. Settled with a value, that waiter's
// wait returns nil and it was handed the value; the others stay parked.
func TestClaimTakesLongestParkedOffer(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		ctx := context.Background()
		_, none := parked(t, h, ctx, "line", "lock", nil)
		_, other := parked(t, h, ctx, "line", "reader", "reader's")
		_, first := parked(t, h, ctx, "line", "lock", "first's")
		_, second := parked(t, h, ctx, "line", "lock", "second's")

		cl := h.Claim("line", "lock")
		if cl == nil {
			t.Fatal("no claim with two waiters of the class that offer")
		}
		if got := cl.Offer(); got != "first's" {
			t.Fatalf("claimed the waiter that offered %v; want the longest parked that offers, first's", got)
		}
		if st := h.Stats(); st.Waiting != 3 {
			t.Errorf("%d waiters parked after the claim; want 3: the claimed one is out of the line", st.Waiting)
		}
		cl.Settle("the lock", time.Minute)
		got := redistest.Recv(t, first, 10*time.Second, "the claimed waiter's wait")
		if got.err != nil || got.handed != "the lock" {
			t.Fatalf("claimed waiter: %v, handed %v; want nil, handed the lock", got.err, got.handed)
		}
		for _, w := range []<-chan waited{none, other, second} {
			select {
			case got := <-w:
				t.Fatalf("a waiter that was not claimed returned: %v, handed %v", got.err, got.handed)
			default:
			}
		}
		if h.Claim("line", "none") != nil {
			t.Error("a claim of a class nobody waits in took a waiter")
		}
	})
}

// A channel's waiters are handed the lock at most HandRun times in a row: the claim after
// that finds none, so that the release frees the lock for every client; then a run starts
// again. A waiter that gets the lock by its own attempt (Took) starts a run too.
func TestClaimRunIsBounded(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, rc := newHub(t, b)
		ctx := context.Background()
		claimOne := func() bool {
			_, done := parked(t, h, ctx, "run", "lock", "offer")
			cl := h.Claim("run", "lock")
			if cl == nil {
				// Woken by a message instead, as a release that frees the lock would.
				publish(t, rc, "run", hub.WakeOne)
				redistest.Recv(t, done, 10*time.Second, "the unclaimed waiter's wake-up")
				return false
			}
			cl.Settle("lock", time.Minute)
			redistest.Recv(t, done, 10*time.Second, "the claimed waiter's wait")
			return true
		}
		for i := range hub.HandRun {
			if !claimOne() {
				t.Fatalf("claim %d of a run found no waiter", i+1)
			}
		}
		if claimOne() {
			t.Fatalf("claim %d in a row took a waiter; want none after %d", hub.HandRun+1, hub.HandRun)
		}
		if !claimOne() {
			t.Fatal("the claim after a run's end found no waiter; want a new run")
		}
		s, err := h.Subscribe("run", hub.LockMessages, "lock", hub.Registry{})
		if err != nil {
			t.Fatal(err)
		}
		s.Took(time.Minute, false)
		s.Release()
		for i := range hub.HandRun {
			if !claimOne() {
				t.Fatalf("claim %d after Took found no waiter: Took starts a run", i+1)
			}
		}
	})
}

// A claimed waiter whose context ends waits for the claim to settle, since the release in
// flight may hand it the lock: handed, its wait returns nil whatever ended meanwhile; not
// handed, it returns its context's error and passes the wake-up the claim settled with to
// the next parked waiter, so that the release it stood for is not lost.
func TestClaimedWaiterWaitsForTheClaim(t *testing.T) {
	for _, handed := range []bool{true, false} {
		name := map[bool]string{true: "handed", false: "not handed"}[handed]
		t.Run(name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				h, _ := newHub(t, b)
				ctx, cancel := context.WithCancel(context.Background())
				_, claimed := parked(t, h, ctx, "settle", "lock", "offer")
				_, next := parked(t, h, context.Background(), "settle", "lock", nil)
				cl := h.Claim("settle", "lock")
				if cl == nil {
					t.Fatal("no claim")
				}
				cancel()
				time.Sleep(50 * time.Millisecond)
				select {
				case got := <-claimed:
					t.Fatalf("the claimed waiter returned before the claim settled: %v", got.err)
				default:
				}
				if handed {
					cl.Settle("lock", time.Minute)
					got := redistest.Recv(t, claimed, 10*time.Second, "the claimed waiter")
					if got.err != nil || got.handed != "lock" {
						t.Fatalf("claimed waiter: %v, handed %v; want nil and the lock", got.err, got.handed)
					}
					select {
					case got := <-next:
						t.Fatalf("the next waiter was woken (%v) by a release that handed the lock on", got.err)
					case <-time.After(100 * time.Millisecond):
					}
					return
				}
				cl.Settle(nil, 0)
				got := redistest.Recv(t, claimed, 10*time.Second, "the claimed waiter")
				if !errors.Is(got.err, context.Canceled) || got.handed != nil {
					t.Fatalf("claimed waiter: %v, handed %v; want its context's error and nothing", got.err, got.handed)
				}
				if got := redistest.Recv(t, next, 10*time.Second, "the next waiter: the wake-up was dropped with the claimed one"); got.err != nil {
					t.Fatalf("next waiter: %v", got.err)
				}
			})
		})
	}
}

// A claim settled with nothing wakes its waiter to try, as a message would: the waiter owes
// the channel an attempt, and one that leaves instead passes the wake-up on to the next
// parked waiter, so that the release the claim stood for is not lost.
func TestUnhandedClaimIsOwed(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		ctx := context.Background()
		claimed, woken := parked(t, h, ctx, "owed", "lock", "offer")
		_, next := parked(t, h, ctx, "owed", "lock", nil)
		cl := h.Claim("owed", "lock")
		if cl == nil {
			t.Fatal("no claim")
		}
		cl.Settle(nil, 0)
		if got := redistest.Recv(t, woken, 10*time.Second, "the claimed waiter"); got.err != nil || got.handed != nil {
			t.Fatalf("claimed waiter: %v, handed %v; want nil and nothing", got.err, got.handed)
		}
		claimed.Release()
		if got := redistest.Recv(t, next, 10*time.Second, "the wake-up passed on by the claimed waiter that left"); got.err != nil {
			t.Fatalf("next waiter: %v", got.err)
		}
	})
}

// A waiter handed the lock holds it with the lease it offered: the waiters still parked,
// told to sleep by attempts made while the previous holder held the lock, look when that
// new hold's lease runs out, woken by the channel's timer.
func TestHandoffSetsTheTimer(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		ctx := context.Background()
		_, handed := parked(t, h, ctx, "handed", "lock", "offer")
		next, woken := parked(t, h, ctx, "handed", "lock", nil)
		cl := h.Claim("handed", "lock")
		if cl == nil {
			t.Fatal("no claim")
		}
		cl.Settle("the lock", 200*time.Millisecond)
		if got := redistest.Recv(t, handed, 10*time.Second, "the handed waiter"); got.err != nil {
			t.Fatalf("handed waiter: %v", got.err)
		}
		if got := redistest.Recv(t, woken, 10*time.Second, "the parked waiter's look at the end of the new hold's lease"); got.err != nil {
			t.Fatalf("parked waiter: %v", got.err)
		}
		if !next.Timed() {
			t.Errorf("stats %+v: the parked waiter was woken as by an unlock; want by the channel's timer", h.Stats())
		}
	})
}

// Lined tells whether the client has subscribers on a channel: a channel that lingers after
// its last subscriber left has none, and a new waiter must try rather than join a line
// that is not there, even while the client waits on other locks.
func TestLinedCountsSubscribers(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		h.SetLinger(time.Minute)
		subscribe(t, h, "elsewhere") // the client waits on another lock meanwhile
		if h.Lined("queue") {
			t.Error("Lined on a channel never subscribed")
		}
		s := subscribe(t, h, "queue")
		if !h.Lined("queue") {
			t.Error("not Lined with a subscriber")
		}
		s.Release()
		if h.Lined("queue") {
			t.Error("Lined on a channel that lingers with no subscriber")
		}
	})
}

// Others tells a subscriber whether other subscribers of its client share the channel, not
// counting itself.
func TestOthers(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, _ := newHub(t, b)
		first := subscribe(t, h, "others")
		if first.Others() {
			t.Error("Others with the subscriber alone on the channel")
		}
		second := subscribe(t, h, "others")
		if !first.Others() || !second.Others() {
			t.Error("not Others with two subscribers on the channel")
		}
		second.Release()
		if first.Others() {
			t.Error("Others after the other subscriber left")
		}
	})
}
