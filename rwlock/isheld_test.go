package rwlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// IsHeld answers for the write lock, as Redisson's writeLock().isHeldByCurrentThread():
// true for the owner that writes, also while it holds read holds beside (downgrade); false
// for an owner that only reads, for another owner, for a context without an owner, and
// once the write hold is released.
func TestIsHeld(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		rw := c.RWLock("isheld")
		ctx := redistest.Context(t, time.Minute)
		isHeld := func(what string, ctx context.Context, want bool) {
			t.Helper()
			got, err := rw.IsHeld(ctx)
			if err != nil || got != want {
				t.Fatalf("IsHeld of %s = %v, %v; want %v", what, got, err, want)
			}
		}
		isHeld("a context without an owner", ctx, false)

		reader, err := rw.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		isHeld("an owner with a read hold only", reader, false)
		if err := rw.RUnlock(reader); err != nil {
			t.Fatal(err)
		}

		writer, err := rw.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		isHeld("the writer", writer, true)
		isHeld("another owner", relock.NewOwner(writer), false)
		downgraded, err := rw.RLock(writer)
		if err != nil {
			t.Fatal(err)
		}
		isHeld("the writer with a read hold beside", downgraded, true)
		if err := rw.Unlock(writer); err != nil {
			t.Fatal(err)
		}
		isHeld("the former writer that still reads", downgraded, false)
		if err := rw.RUnlock(downgraded); err != nil {
			t.Fatal(err)
		}
	})
}
