package script_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

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
		v, err := fairRelease(rc, n, "unlock", holder, "1")
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

// fairRelease runs the fair lock's release script in mode ("unlock", "leave" or "force")
// for owner, with the hold count it expects, publishing "0" to the next waiter.
func fairRelease(rc rueidis.Client, n keys.Names, mode, owner, count string) (int64, error) {
	return script.FairRelease().Exec(context.Background(), rc, []string{n.Lock, n.Queue, n.Deadlines},
		[]string{mode, owner, count, "publish", n.FairChannel, "0"}).AsInt64()
}

// fairAcquire runs the fair lock's acquire script for owner on n, queueing it when it
// cannot take the lock, with waiters' entries living 10s.
func fairAcquire(rc rueidis.Client, n keys.Names, owner string) ([]int64, error) {
	r := script.FairAcquire().Exec(context.Background(), rc, []string{n.Lock, n.Queue, n.Deadlines},
		[]string{"30000", owner, "10000", "1", "publish", n.FairChannel, "2"})
	if v, err := r.AsInt64(); err == nil {
		return []int64{1, v}, nil
	}
	return r.AsIntSlice()
}

// An attempt at a free fair lock that finds waiters at the head of the queue whose entries
// ran out passes over them, and tells the first live waiter that its turn came (it was
// sleeping until its own refresh: nobody else will tell it), not the dead ones; the
// caller then queues behind it.
func TestFairAcquirePassesOverDeadWaiters(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		n := keys.Of("fair-acquire-dead-head")
		const dead, live = second, "6f1c2a3b-0000-4000-8000-000000000004:1"
		redistest.MustDo(t, rc, "RPUSH", n.Queue, dead, live)
		redistest.MustDo(t, rc, "ZADD", n.Deadlines, "1", dead, "99999999999999", live)
		deadL, liveL := b.Listen(t, n.Waiter(dead)), b.Listen(t, n.Waiter(live))
		if v, err := fairAcquire(rc, n, holder); err != nil || v[0] != 0 {
			t.Fatalf("attempt behind a live waiter = %v, %v; want {0, ms}", v, err)
		}
		redistest.Eventually(t, 10*time.Second, "the live waiter never heard its turn", func() bool { return slices.Equal(liveL.Messages(), []string{"2"}) })
		if m := deadL.Messages(); len(m) != 0 {
			t.Errorf("the dead waiter was told %v; want nothing", m)
		}
		q, err := rc.Do(context.Background(), rc.B().Lrange().Key(n.Queue).Start(0).Stop(-1).Build()).AsStrSlice()
		if err != nil || !slices.Equal(q, []string{live, holder}) {
			t.Errorf("queue %v (%v); want the live waiter, then the caller", q, err)
		}
	})
}

// A waiter's queue entry lives no longer than its entry, in the queue and in the
// deadlines alike: were every waiter to die with nobody releasing, both keys run out
// rather than stay for ever (Redisson's #5019, keys left behind).
func TestFairQueueKeysExpireWithTheirEntries(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		n := keys.Of("fair-queue-life")
		redistest.MustDo(t, rc, "HSET", n.Lock, holder, "1")
		redistest.MustDo(t, rc, "PEXPIRE", n.Lock, "30000")
		if v, err := fairAcquire(rc, n, second); err != nil || v[0] != 0 {
			t.Fatalf("attempt at a held lock = %v, %v; want {0, ms}", v, err)
		}
		for _, k := range []string{n.Queue, n.Deadlines} {
			if pttl := redistest.PTTL(t, rc, k); pttl <= 0 || pttl > 10000 {
				t.Errorf("%s PTTL %dms with one waiter whose entry lives 10000ms; want (0, 10000]", k, pttl)
			}
		}
	})
}

// A release that leaves nobody in line deletes the deadlines too, when entries whose
// owners left the queue remain there (lua/fair_release.lua): no key of the queue outlives
// its last waiter.
func TestFairReleaseDropsDeadlinesOfNobody(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		n := keys.Of("fair-stray-deadline")
		redistest.MustDo(t, rc, "HSET", n.Lock, holder, "1")
		redistest.MustDo(t, rc, "PEXPIRE", n.Lock, "30000")
		redistest.MustDo(t, rc, "ZADD", n.Deadlines, "99999999999999", second) // not in the queue
		v, err := fairRelease(rc, n, "unlock", holder, "1")
		if err != nil || v != 1 {
			t.Fatalf("release: %v %v; want 1", v, err)
		}
		if m := redistest.Members(t, rc, n.Deadlines); len(m) != 0 {
			t.Errorf("deadlines %v after a release that left nobody in line; want the key gone", m)
		}
	})
}

// A waiter that takes its turn at a free fair lock tells the next live waiter, which now
// sleeps until the new hold's lease ends, and nobody behind it: an unlock or a turn wakes
// exactly one waiter, never the whole queue.
func TestFairTurnTakenTellsTheNextWaiterOnly(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		n := keys.Of("fair-turn-one")
		const third = "6f1c2a3b-0000-4000-8000-000000000004:1"
		redistest.MustDo(t, rc, "RPUSH", n.Queue, first, second, third)
		redistest.MustDo(t, rc, "ZADD", n.Deadlines, "99999999999999", first, "99999999999999", second, "99999999999999", third)
		secondL, thirdL := b.Listen(t, n.Waiter(second)), b.Listen(t, n.Waiter(third))
		if v, err := fairAcquire(rc, n, first); err != nil || v[0] != 1 {
			t.Fatalf("the first waiter's attempt at the free lock = %v, %v; want {1, ...}", v, err)
		}
		redistest.Eventually(t, 10*time.Second, "the next waiter never heard of the new hold", func() bool { return slices.Equal(secondL.Messages(), []string{"2"}) })
		// A message of our own after the script's: once it arrives, any the script sent
		// the third waiter has arrived too.
		redistest.MustDo(t, rc, "PUBLISH", n.Waiter(third), "end")
		redistest.Eventually(t, 10*time.Second, "the marker never reached the third waiter", func() bool { return slices.Contains(thirdL.Messages(), "end") })
		if m := thirdL.Messages(); !slices.Equal(m, []string{"end"}) {
			t.Errorf("the third waiter heard %v; want nothing but the marker: only the next waiter is told", m)
		}
	})
}

// A waiter behind another live waiter is told to come back by the sooner of the lock's
// PTTL and the end of the first waiter's entry: a hold that ends without an unlock (a
// crash, a fixed lease) publishes nothing, and neither does a first waiter that died, so a
// waiter that slept on past either would leave the lock free meanwhile.
func TestFairWaitIsBoundByTheSoonerEnd(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		for _, c := range []struct {
			what       string
			pttl, left int64 // the lock's PTTL and the first waiter's entry, in ms
		}{
			{"lock ends first", 2000, 600000},
			{"first waiter's entry ends first", 600000, 2000},
		} {
			n := keys.Of("fair-wait-bound:" + c.what)
			redistest.MustDo(t, rc, "HSET", n.Lock, holder, "1")
			redistest.MustDo(t, rc, "PEXPIRE", n.Lock, strconv.FormatInt(c.pttl, 10))
			redistest.MustDo(t, rc, "RPUSH", n.Queue, first)
			redistest.MustDo(t, rc, "ZADD", n.Deadlines, strconv.FormatInt(redistest.Millis(t, rc)+c.left, 10), first)
			v, err := fairAcquire(rc, n, second)
			if err != nil || len(v) != 2 || v[0] != 0 {
				t.Fatalf("%s: attempt behind a live waiter = %v, %v; want {0, ms}", c.what, v, err)
			}
			if bound := min(c.pttl, c.left) + 1; v[1] <= 0 || v[1] > bound {
				t.Errorf("%s: wait bound %dms; want (0, %d]: the lock's PTTL %dms or the first waiter's entry %dms, the sooner", c.what, v[1], bound, c.pttl, c.left)
			}
		}
	})
}

// A waiter that leaves the queue of a held lock as its last waiter deletes the deadlines
// too, when entries of owners no longer in line remain there (lua/fair_release.lua,
// "leave"): no key of the queue outlives its last waiter.
func TestFairLeaveDropsDeadlinesOfNobody(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		n := keys.Of("fair-leave-stray-deadline")
		redistest.MustDo(t, rc, "HSET", n.Lock, holder, "1")
		redistest.MustDo(t, rc, "PEXPIRE", n.Lock, "30000")
		redistest.MustDo(t, rc, "RPUSH", n.Queue, first)
		redistest.MustDo(t, rc, "ZADD", n.Deadlines, "99999999999999", first, "99999999999999", second) // second is not in line
		v, err := fairRelease(rc, n, "leave", first, "")
		if err != nil || v != 1 {
			t.Fatalf("leave: %v %v; want 1", v, err)
		}
		if m := redistest.Members(t, rc, n.Deadlines); len(m) != 0 {
			t.Errorf("deadlines %v after the last waiter left; want the key gone", m)
		}
		if got, err := redistest.Do(t, rc, "HGET", n.Lock, holder).ToString(); err != nil || got != "1" {
			t.Errorf("the holder's count after a waiter left: %q, %v; want 1 (the lock untouched)", got, err)
		}
	})
}

// A waiter behind a first waiter whose deadline lies beyond any wait (+inf, or 10^20 ms:
// no waiter writes one, another writer may) is told how long to wait as a whole number of
// milliseconds ahead, at a free lock too: {0, ms} is never a wait already over or none.
func TestFairAcquireBehindAFarDeadlineToldAWait(t *testing.T) {
	// A real server only: miniredis's Lua reads no infinite score.
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		for _, score := range []string{"+inf", "1e20"} {
			n := keys.Of("fair-far-head:" + score)
			redistest.MustDo(t, rc, "RPUSH", n.Queue, second)
			redistest.MustDo(t, rc, "ZADD", n.Deadlines, score, second)
			v, err := fairAcquire(rc, n, holder)
			if err != nil || len(v) != 2 || v[0] != 0 || v[1] <= 0 {
				t.Fatalf("attempt at a free lock behind a waiter with deadline %s = %v, %v; want {0, ms} with ms > 0", score, v, err)
			}
		}
	})
}
