package fairlock_test

// Redisson's fair lock tests, method by method, in relock's terms: a Java thread is an
// owner (relock.NewOwner), another Redisson instance another relock client, tryLock's
// waitTime rlock.WithWaitTimeout, and Redisson's fairLockWaitTimeout (threadWaitTime) the
// waiter refresh period, fairlock.WithRefreshPeriod. A thread killed before it cleans up
// is a worker process killed with SIGKILL (startWaiterProcess).
//
// These tests wait on leases and wake-ups most of their time, so they run in parallel with
// each other (t.Parallel): each has servers of its own, and the shared cluster takes turns.
//
// Where Redisson checks its queue entries' timeout scores against leaseTime + position ×
// threadWaitTime, relock's promise is simpler (docs/design.md, "The fair lock"): a live
// waiter's entry runs out two of its refresh periods after its last refresh, whatever its
// place in the queue and however long the lease; the ports check that bound, the order, and
// that a later waiter gets the lock past entries whose owners are gone.
//
// testLeaseTimeout                            ported: TestFixedLeasesRunOutInArrivalOrder
// testMultipleLocks                           ported: TestManyOwnersAllAcquire
// testWaitTimeoutDrift (formerly testTimeoutDrift) ported: TestWaitTimeoutDrift
// testLockAcquiredTimeoutDrift                ported: TestLockAcquiredTimeoutDrift
// testFirstThreadDeathTimeoutDrift            ported: TestFirstWaiterDeathTimeoutDrift
// testAcquireFailedTimeoutDrift_Descrete      ported: TestWaiterGivingUpKeepsDeadlines
// testLockAcquiredTimeoutDrift_Descrete       ported: TestTurnTakenKeepsDeadlines
// testLockAcquiredBooleanTimeoutDrift_Descrete ported: TestDeadWaiterSkippedWhenTurnTakersLeaseEnds
// testAbandonedTimeoutDrift_Descrete          ported: TestAbandonedWaitersSkippedWhenLeaseEnds
// testTryLockNonDelayed                       ported: TestTryLockAfterAWaiterGaveUp
// testTryLockWait                             ported: TestWaitBoundRunsOutOnAHeldLock
// testForceUnlock                             ported: TestForceUnlockLeavesItFree
// testAutoExpire                              ported: TestHoldOfAClosedClientRunsOut
// testGetHoldCount                            ported: TestHoldCountStepByStep
// testExpire                                  covered by TestFairAnswersLikeRLock (a fixed lease runs out, the other owner's Lock gets it)
// testIsHeldByCurrentThreadOtherThread        covered by TestFairAnswersLikeRLock (IsHeld of another owner, held and unlocked)
// testIsHeldByCurrentThread                   covered by TestFairAnswersLikeRLock (IsHeld free, held, unlocked)
// testIsLockedOtherThread                     covered by TestFairAnswersLikeRLock (IsLocked through another client, held and unlocked)
// testIsLocked                                covered by TestFairAnswersLikeRLock
// testUnlockFail                              covered by TestFairAnswersLikeRLock (Unlock by another owner: ErrNotHeld)
// testLockUnlock                              covered by TestFairAnswersLikeRLock (one owner locks, unlocks, locks again)
// testReentrancy                              covered by TestFairAnswersLikeRLock (TryLock re-entry; another owner's TryLock: ErrLocked)
// testConcurrency_SingleInstance              covered by TestNoKeysLeft (8 owners × 5 cycles on one client)
// testConcurrencyLoop_MultiInstance           covered by TestFIFO (over 1,000 acquisitions by owners of two clients)
// testConcurrency_MultiInstance               covered by TestFIFO
// testConcurrency_MultiInstance_Ordering      covered by TestFIFO (strict arrival order, 32 waiters on two clients)
// testAcquireFailedNotCalledOnRedisTimeout    covered by TestWaiterRidesOutAStall (package relock, fair kind: writes paused past the client timeout)
// testNameMapper                              not applicable: Redisson's NameMapper setting; relock maps no names
// testLockBlock (in Redisson's suite for a while, withdrawn with the change it came with)
//                                             ported: TestClosedClientsCallsDoNotBlockTheLock
// testTimeoutDrift (the name testWaitTimeoutDrift had before) ported: TestWaitTimeoutDrift
// testDelete (Redisson's delete(), since dropped from its suite) ported: TestForceUnlockAnswersWhetherItFreed
//                                             (relock offers no Delete; ForceUnlock deletes the lock)

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/leases"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// checkDeadlines checks every entry in the deadlines of the fair lock name against the
// Redis clock: none runs out later than life(owner) from now, and, with live, none has run
// out. life is how long an owner's entry lives after a refresh: two of its refresh periods.
func checkDeadlines(t *testing.T, rc rueidis.Client, name string, live bool, life func(owner string) time.Duration) {
	t.Helper()
	entries, err := redistest.Do(t, rc, "ZRANGE", "redisson_lock_timeout:{"+name+"}", "0", "-1", "WITHSCORES").AsZScores()
	if err != nil {
		t.Fatal(err)
	}
	now := redistest.Millis(t, rc) // read after the entries: each was written before it
	for _, e := range entries {
		left := time.Duration(int64(e.Score)-now) * time.Millisecond
		if left > life(e.Member) {
			t.Errorf("%s's entry runs out in %v; want within %v (two refresh periods), whatever its place", e.Member, left, life(e.Member))
		}
		if live && left <= 0 {
			t.Errorf("%s's entry ran out %v ago while it waits", e.Member, -left)
		}
	}
}

// lifeOf is checkDeadlines's life for the owners of client c, whose entries live life, and
// worker processes'.
func lifeOf(c *relock.Client, life time.Duration) func(string) time.Duration {
	return func(owner string) time.Duration {
		if strings.HasPrefix(owner, c.ID()+":") {
			return life
		}
		return 2 * workerRefresh
	}
}

// queued is a waiter in Lock in a goroutine of its own, with an owner of its own.
type queued struct {
	cancel context.CancelFunc
	done   chan lockResult
}

type lockResult struct {
	held context.Context
	err  error
}

// queueUp starts a waiter on mu and waits until it is the queue's n-th entry. Its
// goroutine ends before the test does: wg is waited for at t's cleanup, after ctx ends.
func queueUp(t *testing.T, wg *sync.WaitGroup, side rueidis.Client, mu *fairlock.Mutex, ctx context.Context, n int, opts ...fairlock.Option) queued {
	t.Helper()
	wctx, cancel := context.WithCancel(relock.NewOwner(ctx))
	q := queued{cancel, make(chan lockResult, 1)}
	wg.Add(1)
	go func() {
		defer wg.Done()
		held, err := mu.Lock(wctx, opts...)
		q.done <- lockResult{held, err}
	}()
	redistest.Eventually(t, 10*time.Second, "waiter "+strconv.Itoa(n)+" not queued", func() bool { return len(redistest.FairQueue(t, side, mu.Name())) == n })
	return q
}

// granted waits for q's Lock to return, and fails t unless it took the lock.
func (q queued) granted(t *testing.T, what string) context.Context {
	t.Helper()
	r := redistest.Recv(t, q.done, 30*time.Second, what)
	if r.err != nil {
		t.Fatalf("%s: %v", what, r.err)
	}
	return r.held
}

// firstOf waits for one of qs to take the lock, and returns its index and hold.
func firstOf(t *testing.T, qs ...queued) (int, context.Context) {
	t.Helper()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	for {
		for i, q := range qs {
			select {
			case r := <-q.done:
				if r.err != nil {
					t.Fatalf("waiter %d: %v", i, r.err)
				}
				return i, r.held
			default:
			}
		}
		select {
		case <-timer.C:
			t.Fatal("no waiter took the lock within 30s")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Eight owners, arriving in turn, each ask for the lock with a fixed lease of a second and
// never unlock: each gets it when the lease before it runs out, in arrival order.
func TestFixedLeasesRunOutInArrivalOrder(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const owners, lease = 8, time.Second
		c := relocktest.New(t, b)
		side := b.Client(t)
		mu := c.FairLock("lease-order")
		var wg sync.WaitGroup
		t.Cleanup(wg.Wait)
		ctx := redistest.Context(t, time.Minute)
		var (
			order    []int
			orderMu  sync.Mutex
			acquired atomic.Int32
		)
		for i := 0; i < owners; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The wait of each is bounded well past the leases before it.
				_, err := mu.Lock(relock.NewOwner(ctx), rlock.WithWaitTimeout(30*time.Second), rlock.WithLease(lease))
				if err != nil {
					t.Errorf("owner %d: %v", i, err)
					return
				}
				orderMu.Lock()
				order = append(order, i)
				orderMu.Unlock()
				acquired.Add(1)
			}()
			// Arrival confirmed: the owners that came so far hold, held, or wait.
			redistest.Eventually(t, 10*time.Second, "owner "+strconv.Itoa(i)+" not queued", func() bool {
				return int(acquired.Load())+len(redistest.FairQueue(t, side, "lease-order")) == i+1
			})
		}
		wg.Wait()
		for i, o := range order {
			if o != i {
				t.Fatalf("owners took the lock in the order %v; want their arrival order", order)
			}
		}
		if len(order) != owners {
			t.Fatalf("%d of %d owners took the lock", len(order), owners)
		}
	})
}

// A hundred owners of one client ask at once, each with a fixed lease, and each holds a
// moment and unlocks: every one of them gets the lock.
func TestManyOwnersAllAcquire(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const owners = 100
		// A hundred owners' calls queue up at one server: on a loaded machine one of them
		// can wait there longer than the default 3s timeout, which would end its Lock with
		// the deadline's error, a failure of the machine and not of the fair lock.
		c := relocktest.New(t, b, relock.WithTimeout(10*time.Second))
		mu := c.FairLock("many")
		var wg sync.WaitGroup
		t.Cleanup(wg.Wait)
		ctx := redistest.Context(t, 2*time.Minute)
		var acquired atomic.Int32
		for i := 0; i < owners; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				held, err := mu.Lock(relock.NewOwner(ctx), rlock.WithLease(5*time.Second))
				if err != nil {
					t.Errorf("owner %d: %v", i, err)
					return
				}
				time.Sleep(10 * time.Millisecond)
				acquired.Add(1)
				if err := mu.Unlock(held); err != nil {
					t.Errorf("owner %d's unlock: %v", i, err)
				}
			}()
		}
		wg.Wait()
		if n := acquired.Load(); n != owners {
			t.Fatalf("%d of %d owners took the lock", n, owners)
		}
	})
}

// driftRun is one of Redisson's timeout-drift scenes: three owners make attempts in turn,
// each with a short wait bound and a long fixed lease, and an attempt that gets the lock
// holds it a while; then one more waiter, a process, queues and is killed before it can
// leave the queue, and the owners are stopped where they are.
type driftRun struct {
	attempts int           // shared among three owners, in turn
	wait     time.Duration // each attempt's wait bound
	hold     time.Duration // how long an attempt that gets the lock keeps it
}

// run plays the scene on the fair lock name and checks what Redisson checks: once the lock
// is forced free, it is free, and no queue entry runs out later than its owner's refresh
// allows (its two refresh periods from now, not the sum of the leases and waits before
// it). And it checks what that bound is for: a new waiter, whose own refresh is far off,
// gets the lock past the killed waiter's entry.
func (r driftRun) run(t *testing.T, b *redistest.Backend, name string) {
	const (
		lease   = 30 * time.Second // each attempt's fixed lease, as Redisson's
		refresh = time.Second      // the owners' refresh period, Redisson's threadWaitTime
	)
	c := relocktest.New(t, b)
	life := lifeOf(c, 2*refresh)
	side := b.Client(t)
	mu := c.FairLock(name, fairlock.WithRefreshPeriod(refresh))
	var owners sync.WaitGroup
	t.Cleanup(owners.Wait)
	ctx, shutdown := context.WithCancel(redistest.Context(t, 2*time.Minute))
	defer shutdown()
	w := startWaiterProcess(t, b, name, true)
	attempts, handedOut := make(chan int), make(chan struct{})
	var tookTurns atomic.Int32
	for o := 0; o < 3; o++ {
		owner := relock.NewOwner(ctx)
		owners.Add(1)
		go func() {
			defer owners.Done()
			for range attempts {
				held, err := mu.Lock(owner, rlock.WithWaitTimeout(r.wait), rlock.WithLease(lease))
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
						t.Errorf("attempt: %v", err)
					}
					continue
				}
				tookTurns.Add(1)
				hold := r.hold
				select {
				case <-handedOut:
					// Taken once the last attempt is under way: kept until the shutdown, so
					// that the last waiter is still queued when it is killed.
					hold = time.Hour
				default:
				}
				select {
				case <-time.After(hold):
					if err := mu.Unlock(held); err != nil {
						t.Errorf("unlock: %v", err)
					}
				case <-ctx.Done():
					// Stopped while holding: the hold is left to its lease, as Redisson's
					// interrupted thread leaves it.
				}
			}
		}()
	}
	for i := 0; i < r.attempts; i++ {
		select {
		case attempts <- i:
		case <-time.After(time.Minute):
			t.Fatalf("attempt %d not taken up within a minute", i)
		}
		if i < 3 { // the first three staggered, as Redisson's
			time.Sleep(50 * time.Millisecond)
		}
	}
	close(attempts)
	close(handedOut)

	// The last waiter: a process, connected before the attempts began, which asks for the
	// lock as the last attempt is taken up (Redisson's pool thread that frees first), so
	// that it queues behind the attempts still under way.
	w.open()
	redistest.Eventually(t, 10*time.Second, "the waiter process not queued", func() bool {
		for _, e := range redistest.FairQueue(t, side, name) {
			if !strings.HasPrefix(e, c.ID()+":") {
				return true
			}
		}
		select {
		case <-w.exited:
			t.Fatalf("the waiter process exited instead of queueing: %s", w.stderr.String())
		default:
		}
		return false
	})
	time.Sleep(3 * workerRefresh) // it refreshes its entry a few times
	checkDeadlines(t, side, name, false, life)

	// Stop everyone where they are: the owners (waiters leave, a holder keeps its hold) and
	// the process, which leaves its entry behind.
	shutdown()
	stopped := make(chan struct{})
	go func() {
		owners.Wait()
		close(stopped)
	}()
	redistest.Recv(t, stopped, 30*time.Second, "the owners' return")
	if w.kill(t) {
		t.Fatalf("the waiter process took the lock: %s", w.stderr.String())
	}
	t.Logf("%d of %d attempts took the lock", tookTurns.Load(), r.attempts)
	if _, err := mu.ForceUnlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if locked, err := mu.IsLocked(context.Background()); locked || err != nil {
		t.Fatalf("IsLocked after ForceUnlock = %v, %v; want false", locked, err)
	}
	checkDeadlines(t, side, name, false, life)

	// A new waiter that refreshes once a minute gets the lock: its own refresh cannot be
	// what brings it back.
	nctx, cancel := context.WithTimeout(relock.NewOwner(context.Background()), 20*time.Second)
	defer cancel()
	latecomer := c.FairLock(name, fairlock.WithRefreshPeriod(time.Minute))
	held, err := latecomer.Lock(nctx)
	if err != nil {
		t.Fatalf("a new waiter after the scene: %v; want the lock, past the killed waiter's entry", err)
	}
	if err := latecomer.Unlock(held); err != nil {
		t.Fatal(err)
	}
}

// Waits far shorter than the hold: most attempts give up while another owner holds.
func TestWaitTimeoutDrift(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		driftRun{attempts: 50, wait: 100 * time.Millisecond, hold: 10 * time.Second}.run(t, b, "drift:wait")
	})
}

// Waits far longer than the holds: the attempts take the lock in turn.
func TestLockAcquiredTimeoutDrift(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		driftRun{attempts: 3, wait: 5 * time.Second, hold: 300 * time.Millisecond}.run(t, b, "drift:acquired")
	})
}

// As TestLockAcquiredTimeoutDrift with ten attempts: Redisson allows the n-th entry n
// waits; relock allows each entry two of its own refresh periods, whatever its place.
func TestFirstWaiterDeathTimeoutDrift(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		driftRun{attempts: 10, wait: 5 * time.Second, hold: 300 * time.Millisecond}.run(t, b, "drift:death")
	})
}

// Four waiters queue behind a holder; the second gives up. The others keep their order and
// their entries stay within two refresh periods of now as they refresh; the holder's
// unlock gives the lock to the first, and the third and fourth follow in that order.
func TestWaiterGivingUpKeepsDeadlines(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const refresh = time.Second
		c := relocktest.New(t, b)
		side := b.Client(t)
		life := lifeOf(c, 2*refresh)
		const name = "drift:give-up"
		mu := c.FairLock(name, fairlock.WithRefreshPeriod(refresh))
		var wg sync.WaitGroup
		t.Cleanup(wg.Wait)
		ctx := redistest.Context(t, time.Minute)
		holder, err := mu.Lock(ctx, rlock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		var ws []queued
		for i := 0; i < 4; i++ {
			ws = append(ws, queueUp(t, &wg, side, mu, ctx, i+1))
		}
		q := redistest.FairQueue(t, side, name)
		checkDeadlines(t, side, name, true, life)

		ws[1].cancel()
		if r := redistest.Recv(t, ws[1].done, 10*time.Second, "the second waiter's return"); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("the second waiter: %v; want context.Canceled", r.err)
		}
		if got := redistest.FairQueue(t, side, name); strings.Join(got, " ") != strings.Join([]string{q[0], q[2], q[3]}, " ") {
			t.Fatalf("queue after the second gave up = %v; want %v without its second", got, q)
		}
		time.Sleep(refresh * 3 / 2) // everyone left refreshes at least once
		checkDeadlines(t, side, name, true, life)

		if err := mu.Unlock(holder); err != nil {
			t.Fatal(err)
		}
		first := ws[0].granted(t, "the first waiter after the holder's unlock")
		if got := redistest.FairQueue(t, side, name); strings.Join(got, " ") != q[2]+" "+q[3] {
			t.Fatalf("queue after the first took its turn = %v; want [%s %s]", got, q[2], q[3])
		}
		checkDeadlines(t, side, name, true, life)

		if err := mu.Unlock(first); err != nil {
			t.Fatal(err)
		}
		i, held := firstOf(t, ws[2], ws[3])
		if i != 0 {
			t.Fatal("the fourth waiter took the lock before the third")
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if err := mu.Unlock(ws[3].granted(t, "the fourth waiter")); err != nil {
			t.Fatal(err)
		}
	})
}

// Two waiters queue behind a holder, which unlocks: the first takes its turn and a third
// waiter queues. The second stays ahead of the third, and both entries stay within two
// refresh periods of now as they refresh: taking a turn moves nobody's deadline.
func TestTurnTakenKeepsDeadlines(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const refresh = time.Second
		c := relocktest.New(t, b)
		side := b.Client(t)
		life := lifeOf(c, 2*refresh)
		const name = "drift:turn"
		mu := c.FairLock(name, fairlock.WithRefreshPeriod(refresh))
		var wg sync.WaitGroup
		t.Cleanup(wg.Wait)
		ctx := redistest.Context(t, time.Minute)
		holder, err := mu.Lock(ctx, rlock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		first := queueUp(t, &wg, side, mu, ctx, 1)
		second := queueUp(t, &wg, side, mu, ctx, 2)
		if err := mu.Unlock(holder); err != nil {
			t.Fatal(err)
		}
		firstHeld := first.granted(t, "the first waiter after the holder's unlock")
		third := queueUp(t, &wg, side, mu, ctx, 2)
		q := redistest.FairQueue(t, side, name)
		time.Sleep(refresh * 3 / 2) // both refresh at least once
		if got := redistest.FairQueue(t, side, name); strings.Join(got, " ") != strings.Join(q, " ") {
			t.Fatalf("queue %v became %v while nobody left", q, got)
		}
		checkDeadlines(t, side, name, true, life)

		if err := mu.Unlock(firstHeld); err != nil {
			t.Fatal(err)
		}
		i, held := firstOf(t, second, third)
		if i != 0 {
			t.Fatal("the third waiter took the lock before the second")
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if err := mu.Unlock(third.granted(t, "the third waiter")); err != nil {
			t.Fatal(err)
		}
	})
}

// Behind a holder, a waiter and a waiter process queue. The holder unlocks: the first
// waiter takes its turn with a fixed lease of 2s and never unlocks. A third waiter queues,
// and the process is killed. When the lease runs out nobody unlocks and nobody publishes,
// yet the third waiter, whose own refresh is a minute off, gets the lock past the dead
// process's entry.
func TestDeadWaiterSkippedWhenTurnTakersLeaseEnds(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const long = time.Minute // the holder's lease, and the waiters' refresh period
		c := relocktest.New(t, b)
		side := b.Client(t)
		const name = "drift:boolean"
		mu := c.FairLock(name, fairlock.WithRefreshPeriod(long))
		var wg sync.WaitGroup
		t.Cleanup(wg.Wait)
		ctx := redistest.Context(t, 2*time.Minute)
		holder, err := mu.Lock(ctx, rlock.WithLease(long))
		if err != nil {
			t.Fatal(err)
		}
		first := queueUp(t, &wg, side, mu, ctx, 1, rlock.WithLease(2*time.Second))
		w := startWaiterProcess(t, b, name, false)
		redistest.Eventually(t, 10*time.Second, "the waiter process not queued", func() bool { return len(redistest.FairQueue(t, side, name)) == 2 })
		if err := mu.Unlock(holder); err != nil {
			t.Fatal(err)
		}
		first.granted(t, "the first waiter after the holder's unlock") // never unlocked
		third := queueUp(t, &wg, side, mu, ctx, 2)
		if w.kill(t) {
			t.Fatalf("the waiter process took the lock out of turn: %s", w.stderr.String())
		}
		if err := mu.Unlock(third.granted(t, "the third waiter, behind a dead one, once the lease ran out")); err != nil {
			t.Fatal(err)
		}
	})
}

// Behind a holder, two waiter processes queue, then a live waiter. Both processes are
// killed and the holder's lease runs out (nobody unlocks, nobody publishes): the live
// waiter, whose own refresh is a minute off, gets the lock past both dead entries.
func TestAbandonedWaitersSkippedWhenLeaseEnds(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const long = time.Minute
		c := relocktest.New(t, b)
		side := b.Client(t)
		const name = "drift:abandoned"
		mu := c.FairLock(name, fairlock.WithRefreshPeriod(long))
		var wg sync.WaitGroup
		t.Cleanup(wg.Wait)
		ctx := redistest.Context(t, 2*time.Minute)
		if _, err := mu.Lock(ctx, rlock.WithLease(long)); err != nil {
			t.Fatal(err)
		}
		var ws []*waiterProcess
		for i := 0; i < 2; i++ {
			ws = append(ws, startWaiterProcess(t, b, name, false))
			redistest.Eventually(t, 10*time.Second, "waiter process "+strconv.Itoa(i+1)+" not queued", func() bool { return len(redistest.FairQueue(t, side, name)) == i+1 })
		}
		third := queueUp(t, &wg, side, mu, ctx, 3)
		for _, w := range ws {
			if w.kill(t) {
				t.Fatalf("a waiter process took a held lock: %s", w.stderr.String())
			}
		}
		// The holder's lease runs out: cut short here, once everyone is queued, as the
		// processes take a moment to start.
		redistest.MustDo(t, side, "PEXPIRE", name, "1000")
		if err := mu.Unlock(third.granted(t, "the live waiter behind two dead ones, once the lease ran out")); err != nil {
			t.Fatal(err)
		}
	})
}

// One owner takes the lock by TryLock; another's wait of 200ms runs out, and its Unlock is
// refused. Once the first unlocks, a third owner's TryLock gets the lock: the waiter that
// gave up left no entry ahead of it.
func TestTryLockAfterAWaiterGaveUp(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.FairLock("non-delayed")
		ctx := redistest.Context(t, time.Minute)
		held, err := mu.TryLock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatalf("TryLock of a free lock: %v", err)
		}
		other := relock.NewOwner(ctx)
		if _, err := mu.Lock(other, rlock.WithWaitTimeout(200*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a 200ms wait on a held lock: %v; want context.DeadlineExceeded", err)
		}
		if err := mu.Unlock(other); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock by the owner whose wait ran out: %v; want ErrNotHeld", err)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		again, err := mu.TryLock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatalf("TryLock of the freed lock after a waiter gave up: %v", err)
		}
		if err := mu.Unlock(again); err != nil {
			t.Fatal(err)
		}
	})
}

// Another client holds the lock (renewed): a wait bounded by a second fails with
// context.DeadlineExceeded, and not before the second is up.
func TestWaitBoundRunsOutOnAHeldLock(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const wait = time.Second
		if _, err := relocktest.New(t, b).FairLock("bounded").Lock(redistest.Context(t, time.Minute)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := relocktest.New(t, b).FairLock("bounded").Lock(redistest.Context(t, time.Minute), rlock.WithWaitTimeout(wait))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a bounded wait on a held lock: %v; want context.DeadlineExceeded", err)
		}
		if took := time.Since(start); took < wait {
			t.Errorf("the wait gave up after %v; want %v at least", took, wait)
		}
	})
}

// ForceUnlock of a held lock leaves it free, seen through the same handle and a new one.
func TestForceUnlockLeavesItFree(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.FairLock("forced-free")
		ctx := redistest.Context(t, time.Minute)
		if _, err := mu.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, err := mu.ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v; want true", ok, err)
		}
		if locked, err := mu.IsLocked(ctx); locked || err != nil {
			t.Errorf("IsLocked after ForceUnlock = %v, %v; want false", locked, err)
		}
		if locked, err := c.FairLock("forced-free").IsLocked(ctx); locked || err != nil {
			t.Errorf("IsLocked through a new handle = %v, %v; want false", locked, err)
		}
	})
}

// A client that closes without releasing its holds (Redisson's shutdown) leaves a renewed
// hold to its lease: the lock frees within one watchdog timeout.
func TestHoldOfAClosedClientRunsOut(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const watchdog = 1500 * time.Millisecond
		closing := relocktest.New(t, b, relock.WithWatchdogTimeout(watchdog), relock.WithReleaseOnClose(false))
		if _, err := closing.FairLock("auto-expire").Lock(redistest.Context(t, time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := closing.Close(); err != nil {
			t.Fatal(err)
		}
		mu := relocktest.New(t, b).FairLock("auto-expire")
		if locked, err := mu.IsLocked(context.Background()); !locked || err != nil {
			t.Fatalf("IsLocked right after Close = %v, %v; want true, the hold left to its lease", locked, err)
		}
		redistest.Eventually(t, watchdog+5*time.Second, "the closed client's hold outlived its lease", func() bool {
			locked, err := mu.IsLocked(context.Background())
			return err == nil && !locked
		})
	})
}

// The hold count follows each Lock and Unlock of one owner: 0, 1, 0, then 2, 1, 0.
func TestHoldCountStepByStep(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		mu := relocktest.New(t, b).FairLock("hold-count")
		owner := relock.NewOwner(redistest.Context(t, time.Minute))
		count := func(ctx context.Context, want int) {
			t.Helper()
			if n, err := mu.HoldCount(ctx); n != want || err != nil {
				t.Fatalf("HoldCount = %d, %v; want %d", n, err, want)
			}
		}
		count(owner, 0)
		held, err := mu.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		count(held, 1)
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		count(owner, 0)
		first, err := mu.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		second, err := mu.Lock(first)
		if err != nil {
			t.Fatal(err)
		}
		count(second, 2)
		if err := mu.Unlock(second); err != nil {
			t.Fatal(err)
		}
		count(first, 1)
		if err := mu.Unlock(first); err != nil {
			t.Fatal(err)
		}
		count(owner, 0)
	})
}

// Five rounds of a hundred owners of one client each take the lock once and release it;
// the client closes without releasing its holds (Redisson's shutdown) while they are at it,
// some of them waiting in the queue. Redisson's lock() ignores the interrupts its test's
// shutdownNow sends, so the owners' contexts are never cancelled here: Close ends their
// calls. Another client's Lock then gets the lock once the closed client's hold has run out
// its lease: neither that hold nor the queue entries of the closed client's waiters keep
// it out for longer than the lease and two refresh periods.
func TestClosedClientsCallsDoNotBlockTheLock(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const (
			rounds, owners = 5, 100
			watchdog       = 1500 * time.Millisecond
			refresh        = time.Second
			name           = "lock-block"
		)
		// Five hundred owners' calls queue up at one server: on a loaded machine one of
		// them can wait there longer than the default 3s timeout, which would end it with
		// the deadline's error, a failure of the machine and not of what this test is about.
		closing := relocktest.New(t, b, relock.WithWatchdogTimeout(watchdog), relock.WithReleaseOnClose(false),
			relock.WithTimeout(10*time.Second))
		mu := closing.FairLock(name, fairlock.WithRefreshPeriod(refresh))
		var wg sync.WaitGroup
		var returned atomic.Int32
		for r := 0; r < rounds; r++ {
			for i := 0; i < owners; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer returned.Add(1)
					called := time.Now()
					held, err := mu.Lock(relock.NewOwner(context.Background()))
					if err != nil {
						if !errors.Is(err, relock.ErrClosed) {
							t.Errorf("Lock amid Close: %v; want nil or ErrClosed", err)
						}
						return
					}
					// The hold may have run out its 1.5s lease before the Unlock reached
					// Redis, which makes it ErrNotHeld: once Close stopped its renewals, or
					// when a loaded machine kept them from landing. It cannot have before
					// its first lease (less the allowance for clocks) from the Lock call.
					err = mu.Unlock(held)
					lost := errors.Is(err, relock.ErrNotHeld) && time.Since(called) >= watchdog-leases.Allowance(watchdog)
					if err != nil && !errors.Is(err, relock.ErrClosed) && !lost {
						t.Errorf("Unlock amid Close, %v after the Lock call: %v (hold's cause %v); want nil, ErrClosed, or ErrNotHeld for a hold whose lease may have run out",
							time.Since(called), err, context.Cause(held))
					}
				}()
			}
		}
		// Close while owners wait, unless all were through before any was seen waiting.
		relocktest.CloseWhen(t, closing, "no owner waited and not all returned", &wg, func() bool {
			return relocktest.Waiting(closing) > 0 || returned.Load() == rounds*owners
		})

		other := relocktest.New(t, b).FairLock(name)
		ctx := redistest.Context(t, time.Minute)
		// The bound: the closed client's hold runs out its lease, its waiters' entries two
		// refresh periods after their last refresh; the rest is room for a loaded machine.
		held, err := other.Lock(ctx, rlock.WithWaitTimeout(watchdog+2*refresh+10*time.Second))
		if err != nil {
			t.Fatalf("another client's Lock after the closed client's lease and its waiters' entries ran out: %v", err)
		}
		if err := other.Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// ForceUnlock of a fair lock nobody holds answers false; once an owner holds it, true, and
// the lock is free.
func TestForceUnlockAnswersWhetherItFreed(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		mu := relocktest.New(t, b).FairLock("delete")
		ctx := redistest.Context(t, time.Minute)
		if ok, err := mu.ForceUnlock(ctx); ok || err != nil {
			t.Fatalf("ForceUnlock of a free lock = %v, %v; want false", ok, err)
		}
		if _, err := mu.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, err := mu.ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock of a held lock = %v, %v; want true", ok, err)
		}
		if locked, err := mu.IsLocked(ctx); locked || err != nil {
			t.Errorf("IsLocked after ForceUnlock = %v, %v; want false", locked, err)
		}
	})
}
