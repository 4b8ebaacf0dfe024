package relock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// outageKinds are the waiting kinds the outage tests hold to the promise (kinds_test.go),
// each held with a fixed lease by another client while a waiter makes attempts: the fair
// waiter refreshes its queue entry every 200ms, and the spin waiter, which subscribes to
// nothing, tries again after its back-off.
var outageKinds = []holdKind{kindRLock, fairKind(200 * time.Millisecond), kindWrite, kindSpin}

// A waiter rides out a stall of Redis shorter than a lease: Redis stops running writes
// (CLIENT PAUSE WRITE) for 2.5s, five times the waiter's client timeout. The holder's
// Unlock, sent in the stall, runs when it ends, and so does the attempt the waiter made in
// the stall (the fair waiter's refresh, or the others' when the holder's lease of 1.5s
// ran out), which then takes the lock. The waiter never got that attempt's answer; it
// keeps waiting, and holds the lock once Redis runs again, with a hold count of one: its
// next attempt asked whether the lost one had run before sending again. Guards against a
// waiter that gives up, with an error that reads as its own deadline, while its context
// lives, and against one that sends blindly after a lost request, which counts a hold its
// owner never asked for (a second Unlock would then be needed).
func TestWaiterRidesOutAStall(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		for _, k := range outageKinds {
			t.Run(k.name, func(t *testing.T) {
				name := "stall:" + k.name
				ctx := redistest.Context(t, 30*time.Second)
				holder := relocktest.New(t, b, relock.WithTimeout(10*time.Second))
				waiter := relocktest.New(t, pipelined(t, b), relock.WithTimeout(500*time.Millisecond))
				held, err := k.lock(holder, context.Background(), name, 1500*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				done := lockAsync(ctx, k, waiter, name)
				time.Sleep(500 * time.Millisecond)
				redistest.MustDo(t, b.Client(t), "CLIENT", "PAUSE", "2500", "WRITE")
				time.Sleep(200 * time.Millisecond)
				unlocked := make(chan error, 1)
				go func() { unlocked <- k.unlock(holder, held, name) }()
				r := redistest.Recv(t, done, 25*time.Second, "the waiter")
				if err := redistest.Recv(t, unlocked, 25*time.Second, "the holder's Unlock"); err != nil && !errors.Is(err, relock.ErrNotHeld) {
					t.Fatalf("the holder's Unlock: %v", err)
				}
				if r.err != nil {
					t.Fatalf("the waiter gave up in a 2.5s stall: %v (its context: %v)", r.err, ctx.Err())
				}
				if n, err := k.count(waiter, r.held, name); err != nil || n != 1 {
					t.Fatalf("hold count %d, %v; want 1", n, err)
				}
				if err := k.unlock(waiter, r.held, name); err != nil {
					t.Fatal(err)
				}
				if n, err := redistest.Do(t, b.Client(t), "EXISTS", name).AsInt64(); err != nil || n != 0 {
					t.Fatalf("after the one Unlock, EXISTS %s = %d, %v; want 0", name, n, err)
				}
			})
		}
	})
}

// lockResult is what a Lock made in the background returned.
type lockResult struct {
	held context.Context
	err  error
}

// lockAsync takes a hold of kind k on the lock name through c, waiting as long as ctx
// lets it, in the background.
func lockAsync(ctx context.Context, k holdKind, c *relock.Client, name string) <-chan lockResult {
	done := make(chan lockResult, 1)
	go func() {
		h, err := k.lock(c, ctx, name, 0)
		done <- lockResult{h, err}
	}()
	return done
}

// pipelined returns a source of b's clients whose connection pipelines: rueidis sends a
// call on an idle connection by itself, and when its deadline passes closes the
// connection (and Redis drops the call); on a busy one it queues the call, and a call
// whose deadline passed may still run, its answer lost. The busy case is the one where a
// lost request takes effect.
func pipelined(t *testing.T, b *redistest.Backend) relocktest.Source {
	rc := b.Client(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				_ = rc.Do(context.Background(), rc.B().Ping().Build()).Error()
			}
		}()
	}
	wg.Wait()
	return fixedSource{rc}
}

// fixedSource is a relocktest.Source of one client.
type fixedSource struct{ rc rueidis.Client }

func (s fixedSource) Client(testing.TB) rueidis.Client { return s.rc }

// A waiter gives up on a stall longer than a lease, with the error of its last attempt,
// while its context still lives: the holders' leases have run out by then, and the lock
// is not what the waiter waited for. With a lease of 2s and a stall of 8s, behind a hold
// whose lease of 1s runs out in the stall, the waiter returns an error before the stall
// is over. Guards against a waiter that rides out any stall, which would take the lock
// once Redis runs again.
func TestWaiterGivesUpOnAStallLongerThanALease(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		for _, k := range outageKinds {
			t.Run(k.name, func(t *testing.T) {
				name := "longstall:" + k.name
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				holder := relocktest.New(t, b)
				waiter := relocktest.New(t, b, relock.WithTimeout(300*time.Millisecond), relock.WithWatchdogTimeout(2*time.Second))
				if _, err := k.lock(holder, context.Background(), name, time.Second); err != nil {
					t.Fatal(err)
				}
				done := lockAsync(ctx, k, waiter, name)
				time.Sleep(300 * time.Millisecond)
				redistest.MustDo(t, b.Client(t), "CLIENT", "PAUSE", "8000", "WRITE")
				defer redistest.MustDo(t, b.Client(t), "CLIENT", "UNPAUSE")
				err := redistest.Recv(t, done, 25*time.Second, "the waiter").err
				if err == nil {
					t.Fatal("the waiter rode out a stall of four leases and took the lock")
				}
				if ctx.Err() != nil || errors.Is(err, context.Canceled) {
					t.Fatalf("the waiter waited out its context (%v); want it to give up on the stall while its context lives", err)
				}
				var le *relock.Error
				if !errors.As(err, &le) || le.Name != name {
					t.Fatalf("err = %v; want a *relock.Error naming %s", err, name)
				}
			})
		}
	})
}

// Each stall is measured on its own: a waiter whose lease is 2s rides out two stalls of
// 1.5s with a second of answers between them, and gets the lock when the holder's lease of
// 6s runs out, whether it waits in a fair queue or spins. Guards against a waiter that
// measures a stall from the first failure of its wait rather than of the stall, which
// would give up in the second.
func TestWaiterRidesOutTwoStalls(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		for _, k := range []holdKind{fairKind(200 * time.Millisecond), kindSpin} {
			t.Run(k.name, func(t *testing.T) {
				name := "stalls:" + k.name
				ctx := redistest.Context(t, 30*time.Second)
				holder := relocktest.New(t, b)
				waiter := relocktest.New(t, b, relock.WithTimeout(300*time.Millisecond), relock.WithWatchdogTimeout(2*time.Second))
				if _, err := k.lock(holder, ctx, name, 6*time.Second); err != nil {
					t.Fatal(err)
				}
				done := lockAsync(ctx, k, waiter, name)
				side := b.Client(t)
				time.Sleep(500 * time.Millisecond)
				redistest.MustDo(t, side, "CLIENT", "PAUSE", "1500", "WRITE")
				time.Sleep(2500 * time.Millisecond)
				redistest.MustDo(t, side, "CLIENT", "PAUSE", "1500", "WRITE")
				r := redistest.Recv(t, done, 25*time.Second, "the waiter")
				if r.err != nil {
					t.Fatalf("the waiter gave up in the second of two 1.5s stalls (lease 2s): %v", r.err)
				}
				if n, err := k.count(waiter, r.held, name); err != nil || n != 1 {
					t.Fatalf("hold count %d, %v; want 1", n, err)
				}
				if err := k.unlock(waiter, r.held, name); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// A renewal round that fails keeps its holds, and they are renewed as soon as Redis answers
// again (docs/design.md), not a period later. The hold is taken just after a round, so its
// first round comes a period later; Redis is paused by then, and that round fails at its
// bound, a period on. Redis answers again right after, a period before the hold's deadline.
// Guards against a watchdog that waits a whole period after a failed round: its next round
// comes only at the deadline, and ends a hold that Redis kept.
func TestFailedRoundRenewsAsSoonAsRedisAnswers(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		rec := &recorder{}
		const lease = 6 * time.Second // a round every 2s
		c := relocktest.New(t, b, relock.WithObserver(rec), relock.WithWatchdogTimeout(lease))
		ctx := redistest.Context(t, time.Minute)
		// A hold that every round renews, whose count of rounds shows when one has run.
		beat, err := c.Lock("asap:beat").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ticks := c.WatchdogStats().Ticks
		redistest.Eventually(t, 2*lease, "a renewal round", func() bool { return c.WatchdogStats().Ticks > ticks })
		held, err := c.Lock("asap:held").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		taken := time.Now()
		b.Server.Pause(t)
		redistest.Eventually(t, 2*lease, "a failed renewal round", func() bool { return len(rec.snapshot().failed) > 0 })
		// Resumed a moment after the failure, not at once: the round that follows a failed
		// one at once may then fail at once too (the first command after a call that timed
		// out), and the next one must not wait a period.
		time.Sleep(300 * time.Millisecond)
		b.Server.Resume(t)
		// Past the hold's first deadline (its lease from when it was taken) by a third of a
		// period: only a renewal after Redis came back keeps it live.
		time.Sleep(time.Until(taken.Add(lease + lease/9)))
		for name, h := range map[string]context.Context{"asap:held": held, "asap:beat": beat} {
			if err := h.Err(); err != nil {
				t.Fatalf("%s ended although Redis answered again a period before its deadline: %v", name, context.Cause(h))
			}
			if err := c.Lock(name).Unlock(h); err != nil {
				t.Fatal(err)
			}
		}
	})
}
