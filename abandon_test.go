package relock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// abandonLease is the watchdog timeout of the clients that abandon holds: short enough
// that a test waits a few of them, long enough that a loaded machine renews in time.
const abandonLease = 3 * time.Second

// collect runs the garbage collector until cond holds, at most 10s: an abandoned hold is
// found when a collection finds its owner unreachable.
func collect(t *testing.T, what string, cond func() bool) {
	t.Helper()
	redistest.Eventually(t, 10*time.Second, what, func() bool {
		runtime.GC()
		return cond()
	})
}

// cycleWorkers runs workers goroutines of cycles calls of fn each, with the names
// "<prefix>:<worker>" and the cycle's number, and fails t with the first error of each.
// Each worker's semaphore, "<name>:sem", has one permit. It waits at most 60s.
func cycleWorkers(t *testing.T, c *relock.Client, prefix string, workers, cycles int, fn func(name string, i int) error) {
	t.Helper()
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			name := prefix + ":" + strconv.Itoa(w)
			if ok, err := c.Semaphore(name+":sem").TrySetPermits(context.Background(), 1); err != nil || !ok {
				errs <- fmt.Errorf("worker %d: TrySetPermits: %v, %v", w, ok, err)
				return
			}
			for i := range cycles {
				if err := fn(name, i); err != nil {
					errs <- fmt.Errorf("worker %d, cycle %d: %w", w, i, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		select {
		case err := <-errs:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the workers did not finish within 60s")
		}
	}
}

// holdTurns is how many kinds of hold takeHold takes, one per turn.
const holdTurns = 4

// takeHold takes the hold of turn k (below holdTurns) on a name made from name: a lock's,
// a fair lock's or a read hold (the kinds of kinds_test.go), or a lease of one permit of
// the semaphore "<name>:sem" (see cycleWorkers). It returns the hold's context and the
// call that releases it.
func takeHold(c *relock.Client, k int, name string) (context.Context, func(context.Context) error, error) {
	ctx := context.Background()
	if locks := []holdKind{kindRLock, kindFair, kindRead}; k < len(locks) {
		kind := locks[k]
		n := name + ":" + kind.name
		held, err := kind.lock(c, ctx, n, 0)
		return held, func(held context.Context) error { return kind.unlock(c, held, n) }, err
	}
	s := c.Semaphore(name + ":sem")
	held, err := s.AcquireLease(ctx, 1)
	return held, s.ReleaseLease, err
}

// The natural mistake of a redsync or redislock user, Unlock with the context Lock was
// called with, must not keep the lock for the life of the process. The Unlock says which
// context it wanted; and once the context Lock returned is unreachable, the hold is
// abandoned: no longer renewed, reported, and another client gets the lock within one
// lease.
func TestAbandonedHoldFreesWithinALease(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(abandonLease))
		other := relocktest.New(t, b)
		ctx := context.Background()
		mu := c.Lock("abandon:mistake")

		func() {
			if _, err := mu.Lock(ctx); err != nil { // the hold's context dropped
				t.Fatal(err)
			}
		}()
		err := mu.Unlock(ctx)
		if !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("Unlock with the context Lock was called with: %v; want ErrNotHeld", err)
		}
		if want := "pass the one its Lock returned"; !strings.Contains(err.Error(), want) {
			t.Errorf("Unlock's error %q does not say %q", err, want)
		}

		// A hold taken with a NewOwner context, both dropped, is abandoned too.
		func() {
			if _, err := c.Lock("abandon:worker").Lock(relock.NewOwner(ctx)); err != nil {
				t.Fatal(err)
			}
		}()

		collect(t, "the holds whose contexts are unreachable were never abandoned", func() bool {
			return c.WatchdogStats().Abandoned == 2
		})
		if n := c.WatchdogStats().Holds; n != 0 {
			t.Errorf("the watchdog still knows %d holds after abandoning both", n)
		}
		// Within one lease of its abandonment (plus a margin for a loaded machine), the
		// lock frees by expiry, and a waiter elsewhere gets it.
		wctx, cancel := context.WithTimeout(ctx, abandonLease+2*time.Second)
		defer cancel()
		start := time.Now()
		held, err := other.Lock("abandon:mistake").Lock(wctx)
		if err != nil {
			t.Fatalf("another client waited %v for the abandoned lock: %v", time.Since(start).Round(time.Millisecond), err)
		}
		if err := other.Lock("abandon:mistake").Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// A hold taken through another hold's context belongs to that hold's owner, and is
// abandoned when nothing names the owner any more, even if the first hold was released
// at once: here the second lock is taken with the first hold's context, the first is
// unlocked, and both contexts are dropped. The second is abandoned, and frees.
func TestHoldThroughReleasedHoldIsAbandoned(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(abandonLease))
		first, second := c.Lock("abandon:first"), c.Lock("abandon:second")
		func() {
			held, err := first.Lock(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := second.Lock(held); err != nil {
				t.Fatal(err)
			}
			if err := first.Unlock(held); err != nil {
				t.Fatal(err)
			}
		}()
		collect(t, "the hold taken through a released hold's context was never abandoned", func() bool {
			return c.WatchdogStats().Abandoned == 1
		})
		if n := c.WatchdogStats().Holds; n != 0 {
			t.Errorf("the watchdog still knows %d holds after abandoning the second", n)
		}
	})
}

// A hold is abandoned only when nothing can name its owner. An owner that lives on in a
// context the caller still has is not: one made by NewOwner, or another hold's context
// that the lock was taken with. Their holds are renewed past their lease, and that context
// unlocks them.
func TestHoldWithLiveOwnerIsNotAbandoned(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(abandonLease))
		ctx := context.Background()

		worker := relock.NewOwner(ctx)
		if _, err := c.Lock("abandon:worker").Lock(worker); err != nil { // result dropped
			t.Fatal(err)
		}
		outer, err := c.Lock("abandon:outer").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Lock("abandon:inner").Lock(outer); err != nil { // result dropped
			t.Fatal(err)
		}

		// Past more than a lease, with collections all along: still held, still renewed.
		until := time.Now().Add(abandonLease + abandonLease/2)
		for time.Now().Before(until) {
			runtime.GC()
			time.Sleep(50 * time.Millisecond)
		}
		if n := c.WatchdogStats().Abandoned; n != 0 {
			t.Fatalf("%d holds abandoned though contexts naming their owners are alive", n)
		}
		for _, name := range []string{"abandon:worker", "abandon:outer", "abandon:inner"} {
			if locked, err := c.Lock(name).IsLocked(ctx); err != nil || !locked {
				t.Fatalf("%s after %v: locked %v, %v; want still held", name, abandonLease+abandonLease/2, locked, err)
			}
		}
		if err := c.Lock("abandon:worker").Unlock(worker); err != nil {
			t.Errorf("the NewOwner context does not unlock the hold taken with it: %v", err)
		}
		if err := c.Lock("abandon:inner").Unlock(outer); err != nil {
			t.Errorf("the outer hold's context does not unlock the inner hold taken with it: %v", err)
		}
		if err := c.Lock("abandon:outer").Unlock(outer); err != nil {
			t.Error(err)
		}
		runtime.KeepAlive(worker)
		runtime.KeepAlive(outer)
	})
}

// A goroutine that keeps only a hold's Done channel, not its context, is still told when
// the hold ends: when it is lost while its owner lives on elsewhere, and when it is
// abandoned because nothing names its owner any more. Garbage collections run all along.
func TestDoneWithoutItsContext(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(abandonLease))
		ctx := context.Background()
		closed := func(ch <-chan struct{}) func() bool {
			return func() bool {
				select {
				case <-ch:
					return true
				default:
					return false
				}
			}
		}

		worker := relock.NewOwner(ctx) // kept: the owner lives on
		lost := func() <-chan struct{} {
			held, err := c.Lock("done:lost").Lock(worker)
			if err != nil {
				t.Fatal(err)
			}
			return held.Done()
		}()
		redistest.MustDo(t, b.Client(t), "DEL", "done:lost")
		collect(t, "the Done channel of a lost hold whose context was dropped never closed", closed(lost))

		abandoned := func() <-chan struct{} {
			held, err := c.Lock("done:abandoned").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return held.Done()
		}()
		collect(t, "the Done channel of an abandoned hold never closed", closed(abandoned))
		if n := c.WatchdogStats().Abandoned; n != 1 {
			t.Errorf("%d holds abandoned; want 1", n)
		}
		runtime.KeepAlive(worker)
	})
}

// A context being passed to Unlock, Extend or ReleaseLease names its hold's owner, so the
// hold is not abandoned while that call runs, however soon after the call the caller lets
// the context go: a loop of Lock and Unlock is the commonest code there is. Collections
// run all along, so that one finds an owner's anchor unreachable inside any such call that
// does not keep it. An Extend that finds its hold abandoned under it says ErrNotHeld.
//
// It runs on redis-server alone: miniredis answers in the same process, too soon for a
// collection to fall inside a call.
func TestHoldInUseIsNotAbandoned(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		// The abandoned holds this test makes on purpose are not logged.
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(abandonLease), relock.WithLogger(nil))
		ctx := context.Background()
		const workers, cycles = 32, 200

		stop := make(chan struct{})
		collector := make(chan struct{})
		go func() {
			defer close(collector)
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
					runtime.GC()
				}
			}
		}()

		// Each worker takes and gives back every kind of hold in turn, its context dropped
		// as soon as the call that ends the hold is made; and, as one more turn, extends a
		// lock's hold as the context's last use: that hold is abandoned after it (each on a
		// lock of its own, which frees when its lease runs out), never during it.
		var extended atomic.Int64
		cycleWorkers(t, c, "inuse", workers, cycles, func(name string, i int) error {
			if k := i % (holdTurns + 1); k < holdTurns {
				held, release, err := takeHold(c, k, name)
				if err != nil {
					return err
				}
				return release(held)
			}
			mu := c.Lock(name + ":extend:" + strconv.Itoa(i))
			held, err := mu.Lock(ctx)
			if err != nil {
				return err
			}
			if err := mu.Extend(held, abandonLease); err != nil {
				return err
			}
			extended.Add(1)
			return nil
		})
		close(stop)
		<-collector
		want := uint64(extended.Load())
		collect(t, "the holds whose last use was Extend were never abandoned", func() bool {
			return c.WatchdogStats().Abandoned >= want
		})
		if n := c.WatchdogStats().Abandoned; n != want {
			t.Fatalf("%d holds abandoned; want %d, those whose context was dropped after Extend: the others were abandoned while a call that ends them ran with their context", n, want)
		}
		if n := c.WatchdogStats().Holds; n != 0 {
			t.Errorf("the watchdog still knows %d holds after every one was released or abandoned", n)
		}
	})
}
