package countdown_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// Redisson's count-down latch tests, method by method, with relock's names for its calls
// (docs/migration-from-redisson.md, RCountDownLatch): await(wait, unit) is Await with a
// context bounded at wait, false is a context error. A "thread" of Redisson's is a
// goroutine here; each uses the latch through the same relock client, as the Java tests
// use one Redisson client, so the client that counts down also wakes its own waiters.
//
// These tests wait on leases and wake-ups most of their time, so they run in parallel with
// each other (t.Parallel): each has servers of its own, and the shared cluster takes turns.
//
// RedissonCountDownLatchTest:
//   - testAwaitTimeout: ported, TestRedissonLatchAwaitWithinWait.
//   - testAwaitTimeoutFail: ported, TestRedissonLatchAwaitPastWait.
//   - testMultiAwait: ported, TestRedissonLatchMultiAwait.
//   - testCountDown: ported, TestRedissonLatchCountDownSequence.
//   - testDelete, testDeleteFailed: not applicable: relock offers no delete() on a latch
//     (docs/migration-from-redisson.md: "delete() | not offered").
//   - testTrySetCount: covered by TestDataLayout (TrySetCount on an open latch is true, on
//     a live one false, and the count stays).
//   - testCount: covered by TestDataLayout (Count of a latch never set is 0).
//
// RedissonCountDownLatchConcurrentTest:
//   - testSingleCountDownAwait_SingleInstance: ported,
//     TestRedissonLatchConcurrentCountDownAwait.

// A count down made while a goroutine of the same client waits, with a wait bound that
// the count down comes well within, ends the wait without error; the waiter saw the count
// of 1 before it waited. The watchdog timeout is a minute, so the waiter's look once per
// timeout cannot stand in for the wake-up: the count down's own message wakes it.
//
// Redisson counts down after 500 ms and waits 550 ms; here the count down comes once the
// waiter is parked, and the wait is bounded at 30 s.
//
// Guards against a client whose own "0" does not reach its waiters (only other clients'
// do), and an Await that returns before the count down.
func TestRedissonLatchAwaitWithinWait(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "latch1"
		c, done := awaitLatchOfOne(t, b, name, 30*time.Second)
		ctx := context.Background()
		parked(t, done, 1, func() bool { return c.PubSubStats().Waiting == 1 })
		if err := c.CountDownLatch(name).CountDown(ctx); err != nil {
			t.Fatalf("CountDown: %v", err)
		}
		if err := redistest.Recv(t, done, 15*time.Second, "the waiter's wake-up by its own client's count down"); err != nil {
			t.Fatalf("Await within its wait: %v; want nil", err)
		}
	})
}

// A goroutine of the client reads the count of 1 and waits with a bound of 500ms, as
// Redisson's; nothing counts down within it, so the wait ends with DeadlineExceeded
// naming the latch, and the latch keeps its count. The count down that comes after the
// wait (Redisson's, after a second) opens the latch: the key is gone and an Await returns.
//
// Guards against an Await that reports the latch open when its bound runs out, and one
// whose end takes the count, or the key, with it.
func TestRedissonLatchAwaitPastWait(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "latch1"
		c, done := awaitLatchOfOne(t, b, name, 500*time.Millisecond)
		ctx := context.Background()
		err := redistest.Recv(t, done, 15*time.Second, "the Await bounded at 500ms")
		var e *relock.Error
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) || e.Name != name {
			t.Fatalf("Await past its bound = %v; want context.DeadlineExceeded naming %s", err, name)
		}
		if got := state(t, b.Client(t), name); got != counted(1) {
			t.Fatalf("after the wait ran out the latch is %q; want %q", got, counted(1))
		}
		if err := c.CountDownLatch(name).CountDown(ctx); err != nil {
			t.Fatalf("CountDown: %v", err)
		}
		if got := state(t, b.Client(t), name); got != noKey {
			t.Fatalf("after the count down the latch is %q; want %q", got, noKey)
		}
		if err := c.CountDownLatch(name).Await(redistest.Context(t, 15*time.Second)); err != nil {
			t.Fatalf("Await on the open latch: %v; want nil", err)
		}
	})
}

// awaitLatchOfOne sets the latch name to a count of 1 through a client c whose watchdog
// timeout is a minute (so that its look at waiters once per timeout cannot stand in for a
// wake-up), and starts a goroutine of c that reads the count of 1 and waits on the latch
// with a bound of wait. done has the wait's result, or a countErr if the count was not 1.
func awaitLatchOfOne(t *testing.T, b *redistest.Backend, name string, wait time.Duration) (c *relock.Client, done chan error) {
	t.Helper()
	c = relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
	ctx := context.Background()
	if ok, err := c.CountDownLatch(name).TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetCount(1) = %v, %v; want true", ok, err)
	}
	done = make(chan error, 1)
	go func() {
		l := c.CountDownLatch(name)
		if n, err := l.Count(ctx); n != 1 || err != nil {
			done <- &countErr{n, err}
			return
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		done <- l.Await(wctx)
	}()
	return c, done
}

// countErr is a waiter's report that the count it read before waiting was not 1.
type countErr struct {
	n   int64
	err error
}

func (e *countErr) Error() string {
	if e.err != nil {
		return "Count before Await: " + e.err.Error()
	}
	return "Count before Await = " + strconv.FormatInt(e.n, 10) + "; want 1"
}

// Five goroutines, each with a Latch of its own on one client, wait on a latch of 5 with a
// bounded wait; five count downs, each through a Latch of its own, open it: the count
// reaches 0 and every wait ends without error.
//
// Redisson's waits are bounded at 10 s and its count downs come after a second; here the
// count downs come once the five are parked, the waits are bounded at 30 s, and each
// waiter's result is read (Redisson reads a counter of successes right after the count
// reaches 0, which its waiters may not yet have raised).
//
// Guards against a message that wakes one waiter of a client where all must wake, a count
// down that opens the latch early (a waiter returns while the count is above zero), and
// concurrent count downs that lose one (the latch never opens).
func TestRedissonLatchMultiAwait(t *testing.T) {
	t.Parallel()
	const waiters = 5
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "latch"
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		ctx := context.Background()
		if ok, err := c.CountDownLatch(name).TrySetCount(ctx, waiters); !ok || err != nil {
			t.Fatalf("TrySetCount(%d) = %v, %v; want true", waiters, ok, err)
		}
		var succeeded atomic.Int32
		done := make(chan error, waiters)
		for range waiters {
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				err := c.CountDownLatch(name).Await(wctx)
				if err == nil {
					succeeded.Add(1)
				}
				done <- err
			}()
		}
		parked(t, done, waiters, func() bool { return c.PubSubStats().Waiting == waiters })
		downs := make(chan error, waiters)
		for range waiters {
			go func() { downs <- c.CountDownLatch(name).CountDown(ctx) }()
		}
		for range waiters {
			if err := redistest.Recv(t, downs, 15*time.Second, "a count down"); err != nil {
				t.Fatalf("CountDown: %v", err)
			}
		}
		redistest.Eventually(t, 15*time.Second, "the count to reach 0", func() bool {
			n, err := c.CountDownLatch(name).Count(ctx)
			return n == 0 && err == nil
		})
		for range waiters {
			if err := redistest.Recv(t, done, 15*time.Second, "a waiter's wake-up"); err != nil {
				t.Fatalf("Await: %v; want nil", err)
			}
		}
		if got := succeeded.Load(); got != waiters {
			t.Fatalf("%d waits succeeded; want %d", got, waiters)
		}
	})
}

// A latch of 2 counts down to 1, then 0; count downs of the open latch leave it open at
// 0, and Await on it returns at once each time. A latch of 1 counted down twice is open;
// Await on it, twice, returns. A latch never set is open to Await and to Count, and a count
// down of it leaves it open.
//
// Redisson's test reads the first latch's count where it means the later latches'; this
// port reads the count of the latch it has just counted down, which is what the sequence
// is about (the first latch's stays 0 either way).
//
// Guards against a count down of an open latch that makes a count (-1, which Redis holds
// and Count reports), one that leaves the key at 0, and an Await that waits on an open
// latch or on a latch with no key.
func TestRedissonLatchCountDownSequence(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		ctx := context.Background()
		mustCount := func(t *testing.T, name string, want int64) {
			t.Helper()
			if n, err := c.CountDownLatch(name).Count(ctx); n != want || err != nil {
				t.Fatalf("Count of %s = %d, %v; want %d", name, n, err, want)
			}
		}
		mustCountDown := func(t *testing.T, name string) {
			t.Helper()
			if err := c.CountDownLatch(name).CountDown(ctx); err != nil {
				t.Fatalf("CountDown of %s: %v", name, err)
			}
		}
		mustAwait := func(t *testing.T, name string) {
			t.Helper()
			// Bounded: an open latch lets Await through at once, and the watchdog
			// timeout, a minute, is past this bound.
			if err := c.CountDownLatch(name).Await(redistest.Context(t, 15*time.Second)); err != nil {
				t.Fatalf("Await on the open latch %s: %v; want nil", name, err)
			}
		}
		mustSet := func(t *testing.T, name string, n int64) {
			t.Helper()
			if ok, err := c.CountDownLatch(name).TrySetCount(ctx, n); !ok || err != nil {
				t.Fatalf("TrySetCount(%d) of %s = %v, %v; want true", n, name, ok, err)
			}
		}

		mustSet(t, "latch", 2)
		mustCount(t, "latch", 2)
		mustCountDown(t, "latch")
		mustCount(t, "latch", 1)
		mustCountDown(t, "latch")
		mustCount(t, "latch", 0)
		mustAwait(t, "latch")
		mustCountDown(t, "latch")
		mustCount(t, "latch", 0)
		mustAwait(t, "latch")
		mustCountDown(t, "latch")
		mustCount(t, "latch", 0)
		mustAwait(t, "latch")

		mustSet(t, "latch1", 1)
		mustCountDown(t, "latch1")
		mustCount(t, "latch1", 0)
		mustCountDown(t, "latch1")
		mustCount(t, "latch1", 0)
		mustAwait(t, "latch1")

		mustSet(t, "latch2", 1)
		mustCountDown(t, "latch2")
		mustAwait(t, "latch2")
		mustAwait(t, "latch2")

		mustCount(t, "latch3", 0)
		mustAwait(t, "latch3")

		mustCount(t, "latch4", 0)
		mustCountDown(t, "latch4")
		mustCount(t, "latch4", 0)
		mustAwait(t, "latch4")

		for _, name := range []string{"latch", "latch1", "latch2", "latch3", "latch4"} {
			if got := state(t, b.Client(t), name); got != noKey {
				t.Fatalf("the open latch %s is %q in Redis; want no key", name, got)
			}
		}
	})
}

// Three waiters for each CPU, and as many count downs, all on one client at once, on a
// latch of that count: every waiter returns, and finds the count at 0 and every count
// down made.
//
// Redisson raises its counter of count downs after each count down, so a waiter may read
// it one short; here each goroutine raises it before its count down, so that a waiter
// that returns before the last count down finds it short. The waits are bounded at 30 s.
//
// Guards against an Await that returns while the count is above zero, a message that
// wakes only some of a client's waiters, and concurrent count downs that lose one.
func TestRedissonLatchConcurrentCountDownAwait(t *testing.T) {
	t.Parallel()
	iterations := runtime.NumCPU() * 3
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "latch"
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		ctx := context.Background()
		if ok, err := c.CountDownLatch(name).TrySetCount(ctx, int64(iterations)); !ok || err != nil {
			t.Fatalf("TrySetCount(%d) = %v, %v; want true", iterations, ok, err)
		}
		l := c.CountDownLatch(name)
		var counter atomic.Int64
		type seen struct {
			err     error
			count   int64
			countEr error
			counter int64
		}
		done := make(chan seen, iterations)
		for range iterations {
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				if err := l.Await(wctx); err != nil {
					done <- seen{err: err}
					return
				}
				n, err := l.Count(ctx)
				done <- seen{count: n, countEr: err, counter: counter.Load()}
			}()
		}
		downs := make(chan error, iterations)
		for range iterations {
			go func() {
				counter.Add(1)
				downs <- l.CountDown(ctx)
			}()
		}
		for range iterations {
			if err := redistest.Recv(t, downs, 15*time.Second, "a count down"); err != nil {
				t.Fatalf("CountDown: %v", err)
			}
		}
		for range iterations {
			s := redistest.Recv(t, done, 15*time.Second, "a waiter's return")
			switch {
			case s.err != nil:
				t.Fatalf("Await: %v; want nil", s.err)
			case s.count != 0 || s.countEr != nil:
				t.Fatalf("Count after Await = %d, %v; want 0", s.count, s.countEr)
			case s.counter != int64(iterations):
				t.Fatalf("a waiter returned after %d count downs had begun; want all %d", s.counter, iterations)
			}
		}
	})
}
