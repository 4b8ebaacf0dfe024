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
