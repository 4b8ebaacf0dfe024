package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// A Redisson hold is "<client uuid>:<thread id>", and a thread id is any Java long: the
// reactive and async APIs take one from the caller, which may be negative or zero. Such a
// hold is a lock like any other to relock: another owner is refused (ErrLocked) or waits,
// the lock reads as locked, and ForceUnlock deletes it; for a read-write lock's writer
// ("<uuid>:<id>:write" with mode write) and reader (mode read) as well. Guards against a
// hash of such a hold taken for other data (ErrWrongType), which a Go service would then
// neither wait for nor free.
func TestRedissonThreadIDsOfAnyLong(t *testing.T) {
	t.Parallel()
	const uuid = "5df8512c-e096-4359-bc82-07efb0bc9d8e"
	for _, id := range []string{"-42", "0", "-9223372036854775808", "9223372036854775807"} {
		t.Run(id, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				c := relocktest.New(t, b)
				side := b.Client(t)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				owner := uuid + ":" + id

				redistest.MustDo(t, side, "HSET", "java-held", owner, "2")
				redistest.MustDo(t, side, "PEXPIRE", "java-held", "30000")
				mu := c.Lock("java-held")
				if _, err := mu.TryLock(ctx); !errors.Is(err, relock.ErrLocked) {
					t.Errorf("TryLock of a lock Redisson's thread %s holds: %v; want ErrLocked", id, err)
				}
				if locked, err := mu.IsLocked(ctx); !locked || err != nil {
					t.Errorf("IsLocked: %v, %v; want true", locked, err)
				}
				wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				if _, err := mu.Lock(wctx); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Lock bounded by 200ms: %v; want to wait and then DeadlineExceeded", err)
				}
				wcancel()
				if ok, err := mu.ForceUnlock(ctx); !ok || err != nil {
					t.Errorf("ForceUnlock: %v, %v; want true", ok, err)
				}

				rw := c.RWLock("java-rw")
				redistest.MustDo(t, side, "HSET", "java-rw", "mode", "write", owner+":write", "1")
				redistest.MustDo(t, side, "PEXPIRE", "java-rw", "30000")
				if _, err := rw.TryRLock(ctx); !errors.Is(err, relock.ErrLocked) {
					t.Errorf("TryRLock of a read-write lock Redisson's thread %s writes: %v; want ErrLocked", id, err)
				}
				redistest.MustDo(t, side, "HSET", "java-rw", "mode", "read", owner, "1")
				redistest.MustDo(t, side, "HDEL", "java-rw", owner+":write")
				if _, err := rw.TryLock(ctx); !errors.Is(err, relock.ErrLocked) {
					t.Errorf("TryLock of a read-write lock Redisson's thread %s reads: %v; want ErrLocked", id, err)
				}
				if ok, err := rw.ForceUnlock(ctx); !ok || err != nil {
					t.Errorf("read-write ForceUnlock: %v, %v; want true", ok, err)
				}
			})
		})
	}
}
