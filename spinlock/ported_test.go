package spinlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// RedissonSpinLockTest's testTryLockWait: behind a holder of another client whose hold
// the watchdog renews, a spin Lock bounded by WithWaitTimeout (Redisson's tryLock(wait,
// unit)) fails once the bound runs out with context.DeadlineExceeded naming the lock,
// holds nothing, and leaves the holder's hold as it was. Once the lock is free, a Lock
// with a bound takes it, and its hold outlives the bound (the bound is the wait's, not the
// hold's: docs/migration-from-redisson.md). ctx allows a minute, so only the bound can
// end the first wait within the 15s the test gives it.
//
// Guards against a spin waiter that ignores the bound (it spins until ctx ends), and a
// bound that passes to the hold's context.
func TestSpinWaitTimeout(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "spin:wait"
		ctx := redistest.Context(t, time.Minute)
		holder, waiter := relocktest.New(t, b), relocktest.New(t, b)
		held, err := holder.SpinLock(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			_, err := waiter.SpinLock(name).Lock(ctx, rlock.WithWaitTimeout(500*time.Millisecond))
			got <- err
		}()
		err = redistest.Recv(t, got, 15*time.Second, "the spin Lock past its wait bound of 500ms (ctx allows a minute)")
		var e *relock.Error
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) || e.Name != name {
			t.Fatalf("Lock behind a holder, bounded = %v; want context.DeadlineExceeded naming %s", err, name)
		}
		if n, err := holder.SpinLock(name).HoldCount(held); n != 1 || err != nil {
			t.Fatalf("the holder's HoldCount after the bounded wait = %d, %v; want 1", n, err)
		}
		if err := holder.SpinLock(name).Unlock(held); err != nil {
			t.Fatal(err)
		}

		mine, err := waiter.SpinLock(name).Lock(ctx, rlock.WithWaitTimeout(300*time.Millisecond))
		if err != nil {
			t.Fatalf("bounded Lock of a free lock: %v", err)
		}
		select {
		case <-mine.Done():
			t.Fatalf("the hold's context ended after the wait bound: %v", context.Cause(mine))
		case <-time.After(time.Second):
		}
		if ok, err := waiter.SpinLock(name).IsHeld(mine); !ok || err != nil {
			t.Fatalf("IsHeld after the bound = %v, %v; want true", ok, err)
		}
		if err := waiter.SpinLock(name).Unlock(mine); err != nil {
			t.Fatal(err)
		}
	})
}
