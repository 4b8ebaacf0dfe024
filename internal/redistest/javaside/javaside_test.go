package javaside_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/javaside"
)

// heard waits until l has heard want, in order, and fails t if it heard anything else.
func heard(t *testing.T, l *redistest.Listener, what string, want ...string) {
	t.Helper()
	redistest.Eventually(t, 10*time.Second, what, func() bool { return len(l.Messages()) >= len(want) })
	if got := l.Messages(); !slices.Equal(got, want) {
		t.Fatalf("%s: heard %q; want %q", what, got, want)
	}
}

// Each operation writes the layout and sends the messages the package doc states.
func TestLayout(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		j := javaside.New(rc, false)
		ctx := context.Background()
		const a, o = "5df8512c-e096-4359-bc82-07efb0bc9d8e:1", "5df8512c-e096-4359-bc82-07efb0bc9d8e:2"

		t.Run("RLock", func(t *testing.T) {
			l := b.Listen(t, "redisson_lock__channel:{m}")
			for range 2 {
				if ok, _, err := j.Lock(ctx, "m", a, time.Minute); !ok || err != nil {
					t.Fatalf("Lock = %v, %v", ok, err)
				}
			}
			m, _ := redistest.Do(t, rc, "HGETALL", "m").AsStrMap()
			p, _ := redistest.Do(t, rc, "PTTL", "m").AsInt64()
			if len(m) != 1 || m[a] != "2" || p <= 0 || p > 60000 {
				t.Fatalf("after two holds: %v, PTTL %d", m, p)
			}
			if ok, pttl, err := j.Lock(ctx, "m", o, time.Minute); ok || pttl <= 0 || err != nil {
				t.Fatalf("Lock by another owner = %v, %v, %v; want refused with the PTTL", ok, pttl, err)
			}
			for _, want := range []javaside.Unlocked{javaside.StillHeld, javaside.Released, javaside.NotHeld} {
				if u, err := j.Unlock(ctx, "m", a); u != want || err != nil {
					t.Fatalf("Unlock = %v, %v; want %v", u, err, want)
				}
			}
			heard(t, l, "the last unlock's message", "0")
		})

		t.Run("RFairLock", func(t *testing.T) {
			const w = 5 * time.Second // the thread wait time
			l := b.Listen(t, javaside.FairChannel("f", o))
			now := time.Now()
			if ok, _, err := j.FairLock(ctx, "f", a, time.Minute, w, now); !ok || err != nil {
				t.Fatalf("FairLock = %v, %v", ok, err)
			}
			if m, _ := redistest.Do(t, rc, "HGETALL", "f").AsStrMap(); len(m) != 1 || m[a] != "1" {
				t.Fatalf("hash after the hold: %v", m)
			}
			// The waiter is queued with the lock's PTTL plus the thread wait time, on the
			// client's clock, and told to wait the PTTL; asking again does not queue it twice.
			for range 2 {
				if ok, wait, err := j.FairLock(ctx, "f", o, time.Minute, w, now); ok || wait <= 50*time.Second || wait > time.Minute || err != nil {
					t.Fatalf("FairLock by another owner = %v, %v, %v; want queued, to wait about a minute", ok, wait, err)
				}
			}
			if q, _ := redistest.Do(t, rc, "LRANGE", javaside.FairQueue("f"), "0", "-1").AsStrSlice(); len(q) != 1 || q[0] != o {
				t.Fatalf("queue %v; want [%s]", q, o)
			}
			if d, _ := redistest.Do(t, rc, "ZSCORE", javaside.FairTimeouts("f"), o).AsInt64(); d <= now.UnixMilli()+50000+w.Milliseconds() || d > now.UnixMilli()+60000+w.Milliseconds() {
				t.Fatalf("deadline %d; want about now %d + a minute + %v", d, now.UnixMilli(), w)
			}
			if u, err := j.FairUnlock(ctx, "f", a, now); u != javaside.Released || err != nil {
				t.Fatalf("FairUnlock = %v, %v; want released", u, err)
			}
			heard(t, l, "the unlock's message to the head of the queue", "0")
			if ok, _, err := j.FairLock(ctx, "f", o, time.Minute, w, now); !ok || err != nil {
				t.Fatalf("FairLock by the head = %v, %v; want acquired", ok, err)
			}
			if n, _ := redistest.Do(t, rc, "EXISTS", javaside.FairQueue("f"), javaside.FairTimeouts("f")).AsInt64(); n != 0 {
				t.Fatalf("%d of the queue's keys left once the only waiter took the lock", n)
			}
			// A waiter whose deadline passed is dropped from the head by the next attempt.
			if ok, _, err := j.FairLock(ctx, "f", a, time.Minute, w, now); ok || err != nil {
				t.Fatalf("FairLock while held = %v, %v; want queued", ok, err)
			}
			if ok, _, err := j.FairLock(ctx, "f", "c:1", time.Minute, w, now.Add(2*time.Minute)); ok || err != nil {
				t.Fatalf("FairLock of a third owner = %v, %v; want queued", ok, err)
			}
			if q, _ := redistest.Do(t, rc, "LRANGE", javaside.FairQueue("f"), "0", "-1").AsStrSlice(); len(q) != 1 || q[0] != "c:1" {
				t.Fatalf("queue %v; want the stale head dropped: [c:1]", q)
			}
			// An unlock of the lock once it is free answers as a release, whoever unlocks.
			if u, err := j.FairUnlock(ctx, "f", o, now.Add(2*time.Minute)); u != javaside.Released || err != nil {
				t.Fatalf("FairUnlock of the holder = %v, %v", u, err)
			}
			if u, err := j.FairUnlock(ctx, "f", a, now.Add(2*time.Minute)); u != javaside.Released || err != nil {
				t.Fatalf("FairUnlock of a free lock = %v, %v; want released, as Redisson answers", u, err)
			}
		})

		t.Run("RReadWriteLock", func(t *testing.T) {
			l := b.Listen(t, "redisson_rwlock:{rw}")
			if ok, _, err := j.ReadLock(ctx, "rw", a, time.Minute); !ok || err != nil {
				t.Fatalf("ReadLock = %v, %v", ok, err)
			}
			m, _ := redistest.Do(t, rc, "HGETALL", "rw").AsStrMap()
			if len(m) != 2 || m["mode"] != "read" || m[a] != "1" {
				t.Fatalf("hash after a read hold: %v", m)
			}
			if p, _ := redistest.Do(t, rc, "PTTL", "{rw}:"+a+":rwlock_timeout:1").AsInt64(); p <= 0 {
				t.Fatalf("read hold key PTTL %d", p)
			}
			if ok, _, err := j.WriteLock(ctx, "rw", o, time.Minute); ok || err != nil {
				t.Fatalf("WriteLock beside a reader = %v, %v; want refused", ok, err)
			}
			// A second reader, then the first leaves: the hash lives on with the second's
			// hold, and nothing is published until the last reader leaves.
			if ok, _, err := j.ReadLock(ctx, "rw", o, 2*time.Minute); !ok || err != nil {
				t.Fatalf("second ReadLock = %v, %v", ok, err)
			}
			if u, err := j.ReadUnlock(ctx, "rw", a); u != javaside.Released || err != nil {
				t.Fatalf("ReadUnlock beside another reader = %v, %v", u, err)
			}
			m, _ = redistest.Do(t, rc, "HGETALL", "rw").AsStrMap()
			if p, _ := redistest.Do(t, rc, "PTTL", "rw").AsInt64(); len(m) != 2 || m[o] != "1" || p <= 60000 {
				t.Fatalf("after the first reader left: %v, PTTL %d; want the second reader's hold, for its 2m", m, p)
			}
			if n, _ := redistest.Do(t, rc, "EXISTS", "{rw}:"+a+":rwlock_timeout:1").AsInt64(); n != 0 {
				t.Fatal("the first reader's hold key outlived its unlock")
			}
			if u, err := j.ReadUnlock(ctx, "rw", o); u != javaside.Released || err != nil {
				t.Fatalf("ReadUnlock of the last reader = %v, %v", u, err)
			}
			if n, _ := redistest.Do(t, rc, "EXISTS", "rw").AsInt64(); n != 0 {
				t.Fatal("the last reader's unlock left the hash")
			}
			// Unlocks of a lock that is gone publish their messages all the same.
			if u, err := j.ReadUnlock(ctx, "rw", a); u != javaside.NotHeld || err != nil {
				t.Fatalf("ReadUnlock of a gone lock = %v, %v; want not held", u, err)
			}
			if u, err := j.WriteUnlock(ctx, "rw", o); u != javaside.NotHeld || err != nil {
				t.Fatalf("WriteUnlock of a gone lock = %v, %v; want not held", u, err)
			}
			if ok, _, err := j.WriteLock(ctx, "rw", o, time.Minute); !ok || err != nil {
				t.Fatalf("WriteLock = %v, %v", ok, err)
			}
			if m, _ = redistest.Do(t, rc, "HGETALL", "rw").AsStrMap(); len(m) != 2 || m["mode"] != "write" || m[o+":write"] != "1" {
				t.Fatalf("hash after a write hold: %v", m)
			}
			if u, err := j.WriteUnlock(ctx, "rw", o); u != javaside.Released || err != nil {
				t.Fatalf("WriteUnlock = %v, %v", u, err)
			}
			heard(t, l, "the last read unlock's, the gone lock's unlocks' and the write unlock's messages", "0", "0", "1", "1")
		})

		t.Run("RCountDownLatch", func(t *testing.T) {
			l := b.Listen(t, "redisson_countdownlatch__channel__{c}")
			for i, want := range []bool{true, false} {
				if ok, err := j.TrySetCount(ctx, "c", 2); ok != want || err != nil {
					t.Fatalf("TrySetCount #%d = %v, %v; want %v", i+1, ok, err, want)
				}
			}
			for _, want := range []int64{1, 0, -1} {
				if left, err := j.CountDown(ctx, "c"); left != want || err != nil {
					t.Fatalf("CountDown = %d, %v; want %d", left, err, want)
				}
			}
			if s := redistest.Snapshot(t, rc, "c"); s[:4] != "none" {
				t.Fatalf("latch after count downs: %s", s)
			}
			heard(t, l, "the new count's and the zero's messages", "1", "0")
		})

		t.Run("RSemaphore and RPermitExpirableSemaphore", func(t *testing.T) {
			l := b.Listen(t, "redisson_sc:{s}")
			redistest.MustDo(t, rc, "SET", "s", "2")
			if ok, err := j.TryAcquire(ctx, "s", 3); ok || err != nil {
				t.Fatalf("TryAcquire(3) of 2 = %v, %v", ok, err)
			}
			if ok, err := j.TryAcquire(ctx, "s", 1); !ok || err != nil {
				t.Fatalf("TryAcquire(1) of 2 = %v, %v", ok, err)
			}
			id, err := j.LeaseAcquire(ctx, "s", 0)
			if len(id) != 32 || err != nil {
				t.Fatalf("LeaseAcquire = %q, %v", id, err)
			}
			if more, err := j.LeaseAcquire(ctx, "s", time.Minute); more != "" || err != nil {
				t.Fatalf("LeaseAcquire of none = %q, %v", more, err)
			}
			if zs, _ := rc.Do(ctx, rc.B().Zrange().Key("{s}:timeout").Min("0").Max("-1").Withscores().Build()).AsZScores(); len(zs) != 1 || int64(zs[0].Score) != javaside.Forever {
				t.Fatalf("leases %v; want one scored Forever", zs)
			}
			if ok, err := j.LeaseRelease(ctx, "s", id); !ok || err != nil {
				t.Fatalf("LeaseRelease = %v, %v", ok, err)
			}
			if n, err := j.Release(ctx, "s", 1); n != 2 || err != nil {
				t.Fatalf("Release(1) = %d, %v; want 2", n, err)
			}
			heard(t, l, "the releases' counts", "1", "2")
		})
	})
}
