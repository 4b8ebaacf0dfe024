package relock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// Waiters of every kind parked in a slot that moves to another master under sharded
// pub/sub: a fair lock's, a writer behind a read hold, a semaphore's Acquire and a
// latch's Await. The holds have a fixed lease of a minute, and the waiters' client polls
// nothing: once the channels are subscribed again on the new master, each release there
// (the fair unlock, the read unlock, the semaphore's release, the latch's count-down)
// wakes its waiter by its message, long before any lease or time bound would. Guards the
// resubscription of every kind's channel after a slot move (TestClusterSlotMove: the
// plain lock's).
func TestClusterSlotMoveWakesEveryKind(t *testing.T) {
	cl := redistest.StartCluster(t)
	opts := []relock.Option{relock.WithShardedPubSub(true), relock.WithTimeout(10 * time.Second)}
	holder := relocktest.New(t, cl, opts...)
	waiter := relocktest.New(t, cl, opts...)
	name := cl.NamesOnEveryMaster(t, "wmove-")[0]
	slot := cl.Slot(name)
	to := cl.Masters()[0]
	if to == cl.MasterOf(slot) {
		to = cl.Masters()[1]
	}
	ctx := redistest.Context(t, 3*time.Minute)
	tag := "{" + name + "}"
	sem, latch := tag+":sem", name // a latch name has no braces: the whole name is its slot's tag
	if ok, err := holder.Semaphore(sem).TrySetPermits(ctx, 1); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := holder.CountDownLatch(latch).TrySetCount(ctx, 1); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := holder.Semaphore(sem).Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	fair, err := holder.FairLock(tag+":fair").Lock(ctx, rlock.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	read, err := holder.RWLock(tag+":rw").RLock(ctx, rlock.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 4)
	wait := func(what string, f func(context.Context) error) {
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 50*time.Second)
			defer cancel()
			if err := f(wctx); err != nil {
				done <- fmt.Errorf("%s: %w", what, err)
				return
			}
			done <- nil
		}()
	}
	wait("fair waiter", func(ctx context.Context) error {
		h, err := waiter.FairLock(tag + ":fair").Lock(ctx)
		if err == nil {
			err = waiter.FairLock(tag + ":fair").Unlock(h)
		}
		return err
	})
	wait("writer", func(ctx context.Context) error {
		h, err := waiter.RWLock(tag + ":rw").Lock(ctx)
		if err == nil {
			err = waiter.RWLock(tag + ":rw").Unlock(h)
		}
		return err
	})
	wait("semaphore waiter", func(ctx context.Context) error {
		err := waiter.Semaphore(sem).Acquire(ctx, 1)
		if err == nil {
			err = waiter.Semaphore(sem).Release(ctx, 1)
		}
		return err
	})
	wait("latch waiter", waiter.CountDownLatch(latch).Await)
	redistest.Eventually(t, 20*time.Second, "the waiters are not all parked", func() bool {
		return waiter.PubSubStats().Waiting == 4
	})

	move := cl.StartSlotMove(t, slot, to)
	move.MigrateKeys(t)
	move.Finish(t)
	redistest.Eventually(t, 20*time.Second, "the waiters' channels were not subscribed again on the new master", func() bool {
		n, err := to.Do(t, "PUBSUB", "SHARDCHANNELS", "*"+name+"*").AsStrSlice()
		return err == nil && len(n) >= 4 && waiter.PubSubStats().Waiting == 4
	})
	st := waiter.PubSubStats()
	if err := holder.FairLock(tag + ":fair").Unlock(fair); err != nil {
		t.Fatal(err)
	}
	if err := holder.RWLock(tag + ":rw").RUnlock(read); err != nil {
		t.Fatal(err)
	}
	if err := holder.Semaphore(sem).Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := holder.CountDownLatch(latch).CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	// The holds' leases run for a minute: a waiter that missed its message would still
	// be waiting.
	for range 4 {
		if err := redistest.Recv(t, done, 40*time.Second, "a waiter after its release"); err != nil {
			t.Error(err)
		}
	}
	if now := waiter.PubSubStats(); now.TimedOut != st.TimedOut {
		t.Errorf("%d waits ended by their time bound after the move; want every waiter woken by its message", now.TimedOut-st.TimedOut)
	}
}
