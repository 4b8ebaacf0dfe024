package countdown_test

import (
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// While the server refuses commands unrun until it is ready (LOADING after a restart,
// CLUSTERDOWN or TRYAGAIN in a failover), CountDown tries again within the client's timeout
// instead of failing, as an Unlock does: the refusal says the script never ran, so the
// count goes down once.
func TestCountDownWhileServerNotReady(t *testing.T) {
	redistest.EachRefusal(t, func(t *testing.T, b *redistest.Backend, refuse func()) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		l := c.CountDownLatch("not-ready")
		ctx := redistest.Context(t, time.Minute)
		if ok, err := l.TrySetCount(ctx, 3); !ok || err != nil {
			t.Fatalf("TrySetCount(3) = %v, %v", ok, err)
		}
		refuse()
		if err := l.CountDown(ctx); err != nil {
			t.Fatalf("CountDown while the server refused commands: %v", err)
		}
		if n, err := redistest.Do(t, side, "GET", "not-ready").AsInt64(); n != 2 || err != nil {
			t.Fatalf("count %d (%v) after one CountDown from 3; want 2", n, err)
		}
	})
}

// A CountDown whose reply is lost may have counted down, and is not sent again: a second
// send would count down twice, and open the latch one count early. Here the request runs
// and only its reply is lost: the count goes from 3 to 2, not to 1, whatever the call
// returns.
//
// Guards against a CountDown that sends again a call whose reply was lost.
func TestCountDownLostReplyCountsOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "countdown-lost"
		side := b.Client(t)
		proxy := redistest.StartProxy(t, b.Addr)
		c := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()})
		l := c.CountDownLatch(name)
		ctx := redistest.Context(t, time.Minute)
		if ok, err := l.TrySetCount(ctx, 4); !ok || err != nil {
			t.Fatalf("TrySetCount(4) = %v, %v", ok, err)
		}
		// The script loaded first, so that the fault hits the call itself.
		if err := l.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		proxy.LoseReplyTo(name)
		_ = l.CountDown(ctx) // its error, or nil were it to learn that it ran: the count is the point
		if proxy.Armed() != 0 {
			t.Fatal("the fault never fired: the test proved nothing")
		}
		if n, err := redistest.Do(t, side, "GET", name).AsInt64(); n != 2 || err != nil {
			t.Fatalf("count %d (%v) after one CountDown from 3 whose reply was lost; want 2", n, err)
		}
	})
}
