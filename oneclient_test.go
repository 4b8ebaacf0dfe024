package relock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// Owners of one client take and release one lock of each kind in a loop while their
// contexts are cancelled without pause: before an attempt is sent, while it runs, while
// the owner waits, and as it is woken or handed the lock. A Lock that fails returns the
// context's error, naming the lock, and leaves its owner holding nothing; once the
// owners stop, the lock is free, its keys are gone, the watchdog knows no hold, and
// another owner takes it at once.
func TestCancelStormLeavesNoHoldEveryKind(t *testing.T) {
	t.Parallel()
	const (
		workers = 4
		storm   = 2 * time.Second
	)
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(2*time.Second))
		side := b.Client(t)
		for _, k := range []holdKind{kindRLock, kindSpin, fairKind(time.Second), kindWrite, kindRead} {
			t.Run(k.name, func(t *testing.T) {
				name := "cancel-storm:" + k.name
				var (
					stop               atomic.Bool
					cancels            [workers]atomic.Pointer[context.CancelFunc]
					taken, interrupted atomic.Int32
					wg                 sync.WaitGroup
				)
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						owner := relock.NewOwner(context.Background())
						for !stop.Load() {
							ctx, cancel := context.WithCancel(owner)
							cancels[w].Store(&cancel)
							held, err := k.lock(c, ctx, name, 0)
							cancel()
							switch {
							case err == nil:
								taken.Add(1)
								if err := k.unlock(c, held, name); err != nil {
									t.Errorf("Unlock of a hold Lock returned: %v", err)
								}
							case errors.Is(err, context.Canceled):
								interrupted.Add(1)
								var le *relock.Error
								if !errors.As(err, &le) || le.Name != name {
									t.Errorf("cancelled Lock's error %v does not name the lock %q", err, name)
								}
								if n, err := k.count(c, owner, name); n != 0 || err != nil {
									t.Errorf("a cancelled Lock left its owner holding %d (%v)", n, err)
								}
							default:
								t.Errorf("Lock: %v", err)
							}
						}
					}()
				}
				redistest.CancelStorm(storm, cancels[:])
				stop.Store(true)
				done := make(chan struct{})
				go func() { wg.Wait(); close(done) }()
				redistest.Recv(t, done, 30*time.Second, "the owners' end")
				t.Logf("%d holds taken, %d Locks cancelled", taken.Load(), interrupted.Load())
				if interrupted.Load() == 0 || taken.Load() == 0 {
					t.Fatal("no Lock was cancelled, or none took the lock: the run proved nothing")
				}
				if st := c.WatchdogStats(); st.Holds != 0 || st.Abandoned != 0 {
					t.Errorf("the watchdog knows %d holds and abandoned %d; want none", st.Holds, st.Abandoned)
				}
				// The lock, a fair lock's queue and deadlines, a writer's waiting entry.
				for _, key := range []string{name, "redisson_lock_queue:{" + name + "}", "redisson_lock_timeout:{" + name + "}",
					"relock_rwlock_writers:{" + name + "}"} {
					if n, err := redistest.Do(t, side, "EXISTS", key).AsInt64(); n != 0 || err != nil {
						t.Errorf("EXISTS %s after the storm = %d, %v; want 0", key, n, err)
					}
				}
				held, err := k.lock(c, redistest.Context(t, 10*time.Second), name, 0)
				if err != nil {
					t.Fatalf("a new owner's Lock after the storm: %v", err)
				}
				if err := k.unlock(c, held, name); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// Goroutines that share one owner lock and unlock one lock at once, each as many times as
// it likes, with Lock, TryLock and Unlock interleaved. Every call succeeds (the owner holds
// the lock or takes it), every Unlock finds the hold its Lock took, the hold count in
// Redis equals the Locks minus the Unlocks at each point where they all stop, every hold's
// context is live until the Unlock that balances it, and after the last Unlock the key is
// gone.
func TestOwnerSharedByGoroutinesLockingAndUnlocking(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		for _, k := range []holdKind{kindRLock, kindSpin, kindFair, kindWrite, kindRead} {
			t.Run(k.name, func(t *testing.T) {
				name := "shared-owner-cycles:" + k.name
				const goroutines = 6
				owner := relock.NewOwner(redistest.Context(t, time.Minute))
				for round := range 6 {
					var (
						wg    sync.WaitGroup
						mu    sync.Mutex
						kept  []context.Context // holds left for the round's end
						locks atomic.Int32
					)
					for g := range goroutines {
						wg.Add(1)
						go func() {
							defer wg.Done()
							r := rand.New(rand.NewPCG(uint64(round), uint64(g)))
							var mine []context.Context
							for range 12 {
								if len(mine) > 0 && r.IntN(2) == 0 {
									h := mine[len(mine)-1]
									mine = mine[:len(mine)-1]
									if h.Err() != nil {
										t.Errorf("a hold's context ended before its Unlock: %v", context.Cause(h))
									}
									if err := k.unlock(c, h, name); err != nil {
										t.Errorf("Unlock: %v", err)
									}
									continue
								}
								from := owner
								if len(mine) > 0 && r.IntN(2) == 0 {
									from = mine[r.IntN(len(mine))]
								}
								h, err := k.lock(c, from, name, 0)
								if err != nil {
									t.Errorf("Lock by the owner: %v", err)
									continue
								}
								locks.Add(1)
								mine = append(mine, h)
							}
							mu.Lock()
							kept = append(kept, mine...)
							mu.Unlock()
						}()
					}
					wg.Wait()
					if t.Failed() {
						t.FailNow()
					}
					if n, err := k.count(c, owner, name); n != len(kept) || err != nil {
						t.Fatalf("round %d: hold count %d, %v with %d holds kept (of %d Locks); want equal", round, n, err, len(kept), locks.Load())
					}
					// Released concurrently, from every goroutine at once.
					for _, h := range kept {
						wg.Add(1)
						go func() {
							defer wg.Done()
							if err := k.unlock(c, h, name); err != nil {
								t.Errorf("Unlock: %v", err)
							}
						}()
					}
					wg.Wait()
					if n, err := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 || err != nil {
						t.Fatalf("round %d: EXISTS %s after every Unlock = %d, %v; want 0", round, name, n, err)
					}
					if n, err := k.count(c, owner, name); n != 0 || err != nil {
						t.Fatalf("round %d: hold count after every Unlock %d, %v; want 0", round, n, err)
					}
				}
				if st := c.WatchdogStats(); st.Holds != 0 {
					t.Errorf("the watchdog knows %d holds after every Unlock; want none", st.Holds)
				}
			})
		}
	})
}

// A lock taken with another hold's context belongs to that hold's owner, and its hold goes
// on when the first is released: its context ends with the first's (it derives from it),
// but Redis keeps the hold, the watchdog renews it past several leases while its context
// is kept, with collections all along, and that context still unlocks it. Every kind, for
// the second lock, behind a plain first. The lease is 2s: a renewal that a loaded machine
// held up for a second (with the collections of every kind's subtest at once) lost a 1s
// lease.
func TestHoldTakenThroughAReleasedHoldGoesOn(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(lease))
		side := b.Client(t)
		for _, k := range []holdKind{kindRLock, kindSpin, kindFair, kindWrite, kindRead} {
			t.Run(k.name, func(t *testing.T) {
				t.Parallel()
				first, second := "through-released:first:"+k.name, "through-released:second:"+k.name
				outer, err := c.Lock(first).Lock(redistest.Context(t, time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				inner, err := k.lock(c, outer, second, 0)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Lock(first).Unlock(outer); err != nil {
					t.Fatal(err)
				}
				outer = nil
				if !errors.Is(inner.Err(), context.Canceled) {
					t.Fatalf("the second hold's context after the first's Unlock: %v; want context.Canceled, its parent's", inner.Err())
				}
				for end := time.Now().Add(3 * lease); time.Now().Before(end); {
					runtime.GC()
					time.Sleep(lease / 10)
				}
				if n, err := k.count(c, inner, second); n != 1 || err != nil {
					t.Fatalf("hold count of the second lock three leases later: %d, %v; want 1, renewed", n, err)
				}
				if st := c.WatchdogStats(); st.Abandoned != 0 {
					t.Fatalf("the watchdog abandoned %d holds; want none, the second's context names its owner", st.Abandoned)
				}
				if err := k.unlock(c, inner, second); err != nil {
					t.Fatalf("Unlock of the second through its context: %v", err)
				}
				if n, err := redistest.Do(t, side, "EXISTS", second).AsInt64(); n != 0 || err != nil {
					t.Fatalf("EXISTS %s after its Unlock = %d, %v; want 0", second, n, err)
				}
			})
		}
	})
}

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
					// The waiters report on channels, never through t: one that returns after
					// the subtest has ended (a wait that never ends, cut by ctx at cleanup)
					// must not fail a finished test.
					type result struct {
						h   context.Context
						err error
					}
					got := make(chan result, waiters-1)
					gaveUp := make(chan error, 1)
					for i := range waiters {
						go func() {
							if i == 0 {
								_, err := k.lock(c, quitter, name, 0)
								gaveUp <- err
								return
							}
							h, err := k.lock(c, owner, name, 0)
							got <- result{h, err}
						}()
					}
					time.Sleep(300 * time.Millisecond) // all three wait
					quit()
					if err := redistest.Recv(t, gaveUp, 10*time.Second, "the waiter that gave up"); err == nil {
						t.Fatal("the waiter that gave up got the lock")
					}
					if err := k.unlock(holder.c, held, name); err != nil {
						t.Fatal(err)
					}
					var hs []context.Context
					for range waiters - 1 {
						r := redistest.Recv(t, got, 10*time.Second, "a waiter of the shared owner, its sibling holding the lock")
						if r.err != nil {
							t.Fatalf("a waiter: %v", r.err)
						}
						hs = append(hs, r.h)
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
