package script_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/script"
)

// A fair lock's release tells the first live waiter that its turn came, passing over the
// waiters at the head whose entries ran out (killed processes), and drops those from the
// queue: were the message sent to a dead head, nobody would hear it and the live waiter
// behind it would sleep on.
func TestFairReleasePassesOverDeadWaiters(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		n := keys.Of("fair-dead-head")
		const dead, live = second, "6f1c2a3b-0000-4000-8000-000000000004:1"
		redistest.MustDo(t, rc, "HSET", n.Lock, holder, "1")
		redistest.MustDo(t, rc, "PEXPIRE", n.Lock, "30000")
		redistest.MustDo(t, rc, "RPUSH", n.Queue, dead, live)
		redistest.MustDo(t, rc, "ZADD", n.Deadlines, "1", dead, "99999999999999", live) // dead ran out long ago
		deadL, liveL := b.Listen(t, n.Waiter(dead)), b.Listen(t, n.Waiter(live))
		v, err := script.FairRelease().Exec(context.Background(), rc, []string{n.Lock, n.Queue, n.Deadlines},
			[]string{"unlock", holder, "1", "publish", n.FairChannel, "0"}).AsInt64()
		if err != nil || v != 1 {
			t.Fatalf("release: %v %v; want 1", v, err)
		}
		redistest.Eventually(t, 10*time.Second, "the live waiter never heard its turn", func() bool { return slices.Equal(liveL.Messages(), []string{"0"}) })
		if m := deadL.Messages(); len(m) != 0 {
			t.Errorf("the dead waiter was told %v; want nothing", m)
		}
		q, err := rc.Do(context.Background(), rc.B().Lrange().Key(n.Queue).Start(0).Stop(-1).Build()).AsStrSlice()
		if err != nil || strings.Join(q, " ") != live {
			t.Errorf("queue %v (%v) after the release; want the live waiter alone", q, err)
		}
	})
}
