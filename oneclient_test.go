package relock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// Goroutines that share an owner wait together for a lock another owner holds, one of
// them giving up on the way; when the holder releases it, each of the others gets a hold
// without waiting for its siblings to unlock (the later ones re-enter the hold the first
// got), well within the 30s lease that bounds a wait nobody woke: one hold each, counted
// in Redis, and the key gone after their Unlocks. The holder is of another client (the
// lock is freed and published) and of the waiters' own (the lock is handed on).
func TestOwnerSharedByWaitersGetsInOnce(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		for _, k := range []holdKind{kindRLock, kindSpin, fairKind(time.Minute), kindWrite} {
			for _, holder := range []struct {
				name string
				c    *relock.Client
			}{{"other client", other}, {"same client", c}} {
				t.Run(k.name+"/"+holder.name, func(t *testing.T) {
					name := "shared-waiters:" + k.name + ":" + strings.ReplaceAll(holder.name, " ", "-")
					ctx := redistest.Context(t, time.Minute)
					held, err := k.lock(holder.c, relock.NewOwner(ctx), name, 0)
					if err != nil {
						t.Fatal(err)
					}
					const waiters = 3
					owner := relock.NewOwner(ctx)
					quitter, quit := context.WithCancel(owner)
					defer quit()
					got := make(chan context.Context, waiters)
					for i := range waiters {
						go func() {
							wctx := owner
							if i == 0 {
								wctx = quitter
							}
							h, err := k.lock(c, wctx, name, 0)
							if i == 0 {
								if err == nil {
									t.Errorf("the waiter that gave up got the lock")
								}
								return
							}
							if err != nil {
								t.Errorf("a waiter: %v", err)
								got <- nil
								return
							}
							got <- h
						}()
					}
					time.Sleep(300 * time.Millisecond) // all three wait
					quit()
					time.Sleep(100 * time.Millisecond)
					if err := k.unlock(holder.c, held, name); err != nil {
						t.Fatal(err)
					}
					var hs []context.Context
					for range waiters - 1 {
						h := redistest.Recv(t, got, 10*time.Second, "a waiter of the shared owner, its sibling holding the lock")
						if h == nil {
							t.FailNow()
						}
						hs = append(hs, h)
					}
					if n, err := k.count(c, owner, name); n != waiters-1 || err != nil {
						t.Fatalf("hold count %d, %v; want %d, one per waiter that got in", n, err, waiters-1)
					}
					for _, h := range hs {
						if err := k.unlock(c, h, name); err != nil {
							t.Fatal(err)
						}
					}
					if n, err := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 || err != nil {
						t.Fatalf("EXISTS %s after the Unlocks = %d, %v; want 0", name, n, err)
					}
				})
			}
		}
	})
}
