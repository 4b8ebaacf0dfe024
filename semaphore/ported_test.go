package semaphore_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/semaphore"
)

// Redisson's semaphore tests, method by method, with relock's names for its calls
// (docs/migration-from-redisson.md, RSemaphore): release without an acquire is
// AddPermits, tryAcquire with a wait is Acquire with a bounded context, drainPermits is
// Drain. A "thread" of Redisson's is a goroutine here, and a Redisson client a relock
// client. (The last two tests of this file port methods of the permit-expirable
// semaphore's tests; their map is in ported_lease_test.go.)
//
// These tests wait on leases and wake-ups most of their time, so they run in parallel with
// each other (t.Parallel): each has servers of its own, and the shared cluster takes turns.
//
// RedissonSemaphoreTest:
//   - testAcquireAfterAddPermits: ported, TestRedissonAcquireAfterAddPermits.
//   - testZero: covered by TestInvalidCount (0 permits to TryAcquire, Acquire and Release
//     is ErrInvalidCount, where Redisson's answers true and does nothing: the
//     documented difference) and TestCount (AvailablePermits of no count is 0).
//   - testAcquireWithoutSetPermits: ported, TestRedissonSemaphoreSequences.
//   - testTrySetPermits: covered by TestCount (TrySetPermits sets a count only when there
//     is none, AvailablePermits reads it); its second half is not applicable: delete(),
//     isExists() and trySetPermits with a time to live are not offered.
//   - testAddPermits: ported, TestRedissonSemaphoreSequences.
//   - testReducePermits: ported, TestRedissonSemaphoreSequences.
//   - testBlockingAcquire: ported, TestRedissonBlockingAcquireInOneClient.
//   - testBlockingNAcquire: ported, TestRedissonBlockingAcquireInOneClient.
//   - testTryNAcquire: ported, TestRedissonBlockingAcquireInOneClient.
//   - testReleaseWithoutPermits: covered by TestCount (AddPermits, relock's release
//     without an acquire, on no count starts from 0) and TestReleaseAccounting (Release of
//     permits the client did not take is ErrNotHeld and changes nothing).
//   - testDrainPermits: ported, TestRedissonSemaphoreSequences.
//   - testReleaseIfExists: not applicable: releaseIfExists is not offered
//     (docs/migration-from-redisson.md, RSemaphore table).
//   - testReleaseAcquire: ported, TestRedissonSemaphoreSequences.
//   - testConcurrency_SingleInstance: ported, TestRedissonConcurrencyOneClient.
//   - testConcurrencyLoopMax_MultiInstance: ported, TestRedissonMaxPermitsConcurrency.
//   - testConcurrencyLoop_MultiInstance: ported, TestRedissonConcurrencyLoopClients.
//   - testConcurrency_MultiInstance_1_permits: ported, TestRedissonConcurrencyClientsOnce.

// Sequences of Redisson's RedissonSemaphoreTest, with relock's names for its calls
// (docs/migration-from-redisson.md): its release without an acquire is AddPermits. Each
// step checks the count Redis holds, which is the count a Redisson client reads.
//
//   - testAddPermits: permits added while all are taken raise the count above where it
//     was set; the client still gives back all it took.
//   - testReducePermits: AddPermits(-5) while all 10 are taken leaves -5; giving the 10
//     back leaves 5.
//   - testReleaseAcquire: taking and giving back moves the count by exactly n.
//   - testAcquireWithoutSetPermits: permits added to a semaphore that has no count make
//     one, and Acquire takes them.
//   - testDrainPermits: Drain of no count takes 0; Drain takes what is free, and the
//     permits the client took before stay its own to give back.
//
// Guards against a Drain that forgets the permits the client holds (it would refuse their
// Release, and they would be lost), and a held count that AddPermits moves.
func TestRedissonSemaphoreSequences(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, side := relocktest.New(t, b), b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		for _, tc := range []struct {
			name  string
			steps func(t *testing.T, s *semaphore.Weighted, want func(string))
		}{
			{"addPermits", func(t *testing.T, s *semaphore.Weighted, want func(string)) {
				mustSet(t, s, 10)
				mustAcquire(t, s, 10)
				want("0")
				mustAdd(t, s, 4)
				want("4")
				mustRelease(t, s, 10)
				want("14")
				mustAcquire(t, s, 5)
				want("9")
			}},
			{"reducePermits", func(t *testing.T, s *semaphore.Weighted, want func(string)) {
				mustSet(t, s, 10)
				mustAcquire(t, s, 10)
				mustAdd(t, s, -5)
				want("-5")
				mustTry(t, s, 1, false)
				mustRelease(t, s, 10)
				want("5")
				mustAcquire(t, s, 5)
				want("0")
			}},
			{"releaseAcquire", func(t *testing.T, s *semaphore.Weighted, want func(string)) {
				mustSet(t, s, 10)
				mustAcquire(t, s, 1)
				want("9")
				mustRelease(t, s, 1)
				want("10")
				mustAcquire(t, s, 5)
				want("5")
				mustRelease(t, s, 5)
				want("10")
			}},
			{"acquireWithoutSetPermits", func(t *testing.T, s *semaphore.Weighted, want func(string)) {
				mustAdd(t, s, 1)
				mustAdd(t, s, 1)
				want("2")
				mustAcquire(t, s, 2)
				want("0")
			}},
			{"drainPermits", func(t *testing.T, s *semaphore.Weighted, want func(string)) {
				if n, err := s.Drain(ctx); n != 0 || err != nil {
					t.Fatalf("Drain of no count = %d, %v; want 0", n, err)
				}
				if err := s.AddPermits(ctx, 10); err != nil { // the count Drain may have left
					t.Fatal(err)
				}
				mustAcquire(t, s, 3)
				if n, err := s.Drain(ctx); n != 7 || err != nil {
					t.Fatalf("Drain of 7 free = %d, %v; want 7", n, err)
				}
				want("0")
				if n := available(t, s); n != 0 {
					t.Fatalf("AvailablePermits after Drain = %d; want 0", n)
				}
				// The 3 taken before are still the client's.
				mustRelease(t, s, 3)
				want("3")
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				name := "sem-port:" + tc.name
				tc.steps(t, c.Semaphore(name), func(v string) {
					t.Helper()
					wantValue(t, side, name, v)
				})
			})
		}
	})
}

// mustAcquire fails t unless Acquire(n) takes the permits within 15s.
func mustAcquire(t testing.TB, s *semaphore.Weighted, n int64) {
	t.Helper()
	if err := s.Acquire(redistest.Context(t, 15*time.Second), n); err != nil {
		t.Fatalf("Acquire(%d): %v", n, err)
	}
}

// mustRelease fails t unless Release(n) gives the permits back.
func mustRelease(t testing.TB, s *semaphore.Weighted, n int64) {
	t.Helper()
	if err := s.Release(context.Background(), n); err != nil {
		t.Fatalf("Release(%d): %v", n, err)
	}
}

// mustAdd fails t unless AddPermits(n) works.
func mustAdd(t testing.TB, s *semaphore.Weighted, n int64) {
	t.Helper()
	if err := s.AddPermits(context.Background(), n); err != nil {
		t.Fatalf("AddPermits(%d): %v", n, err)
	}
}

// RedissonSemaphoreTest's testBlockingAcquire, testBlockingNAcquire and testTryNAcquire,
// within one client as there (the releases come from another goroutine of the same
// client): with 3 of 5 taken, TryAcquire(4) fails, and Acquire(4) waits through a release
// that leaves 3 free and takes the 4 at the release that frees them. Then none is free:
// TryAcquire(1) fails. The client's watchdog timeout is a minute, so its refresh (every
// 20s) cannot stand in for the wake-up within the 15s bound.
//
// Guards against a release that wakes only the waiters of other clients (the client's
// own waiter would sleep until its refresh), and an Acquire that takes fewer than n.
func TestRedissonBlockingAcquireInOneClient(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:blocking"
		c, side := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute)), b.Client(t)
		s := c.Semaphore(name)
		mustSet(t, s, 5)
		mustAcquire(t, s, 3)
		if n := available(t, s); n != 2 {
			t.Fatalf("AvailablePermits = %d; want 2", n)
		}
		mustTry(t, s, 4, false)

		done := acquireAsync(redistest.Context(t, 30*time.Second), s, 4)
		parked(t, c, 1, "the waiter for 4 permits")
		mustRelease(t, s, 1)
		stillWaiting(t, done, 300*time.Millisecond, "Acquire(4) with 3 permits free")
		wantValue(t, side, name, "3")
		mustRelease(t, s, 1)
		if err := redistest.Recv(t, done, 15*time.Second, "Acquire(4) after the client's own release freed 4: it was not woken"); err != nil {
			t.Fatalf("Acquire(4): %v", err)
		}
		wantValue(t, side, name, "0")
		mustTry(t, s, 1, false)
		if st := c.PubSubStats(); st.TimedOut != 0 {
			t.Errorf("stats %+v: a wait ended by its time bound, not by the release", st)
		}
		// 1 of the first 3 and the 4: the client holds 5.
		mustRelease(t, s, 5)
		wantValue(t, side, name, "5")
	})
}

// RedissonSemaphoreTest's testConcurrencyLoopMax_MultiInstance: four clients loop on a
// semaphore of 2^31-1 permits (Redisson's Integer.MAX_VALUE), each time taking either all
// of them or one, at random, and giving them back. Every acquisition completes, and no
// more permits are ever out than there are (nor is the count ever seen below zero).
//
// Guards against an acquire that takes more permits than are free, and requests for all
// permits starved by requests for one.
func TestRedissonMaxPermitsConcurrency(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name, all, clients, rounds = "sem-port:max", int64(1<<31 - 1), 4, 10
		side := b.Client(t)
		mustSet(t, relocktest.New(t, b).Semaphore(name), all)
		var out, done, over atomic.Int64
		errs := make(chan error, clients)
		for range clients {
			s := relocktest.New(t, b).Semaphore(name)
			go func() {
				ctx := redistest.Context(t, time.Minute)
				for range rounds {
					n := all
					if rand.IntN(2) == 0 {
						n = 1
					}
					if err := s.Acquire(ctx, n); err != nil {
						errs <- err
						return
					}
					if out.Add(n) > all {
						over.Add(1)
					}
					// Nobody takes permits away: a count below zero is permits taken that
					// were not free.
					if v, err := s.AvailablePermits(ctx); err != nil || v < 0 {
						over.Add(1)
					}
					time.Sleep(10 * time.Millisecond)
					out.Add(-n)
					done.Add(1)
					if err := s.Release(context.Background(), n); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range clients {
			if err := redistest.Recv(t, errs, 90*time.Second, "a client's loop of acquisitions"); err != nil {
				t.Fatalf("a client's loop: %v", err)
			}
		}
		if n := over.Load(); n != 0 {
			t.Fatalf("%d times more permits were out than the semaphore has", n)
		}
		if n := done.Load(); n != clients*rounds {
			t.Fatalf("%d acquisitions; want %d", n, clients*rounds)
		}
		wantValue(t, side, name, "2147483647")
	})
}

// RedissonPermitExpirableSemaphoreTest's testExpire and testAvailablePermits, with the
// permit leased by Redisson's RPermitExpirableSemaphore (a lease of a second, its data
// written as Redisson writes it): a relock waiter gets the permit when that lease runs
// out, with no release; Redisson's tryRelease of the id then answers false and changes
// nothing. The waiter's client has a watchdog timeout of a minute, so its refresh (every
// 20s) cannot stand in for the lease's end within the 15s bound.
//
// Guards against a waiter first in line that does not look again when the next leased
// permit runs out, and a count that does not put back permits whose lease ran out.
func TestRedissonLeaseRunsOutForRelockWaiter(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:expire"
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		r := newRedisson(b, side, name)
		s := c.Semaphore(name)
		mustSet(t, s, 1)
		java := r.leaseAcquire(t, time.Second)
		if java == "" {
			t.Fatal("Redisson acquire(1s) of the one permit failed")
		}
		if n := available(t, s); n != 0 {
			t.Fatalf("AvailablePermits with Java's permit leased = %d; want 0", n)
		}
		done := make(chan error, 1)
		var held context.Context
		go func() {
			var err error
			held, err = s.AcquireLease(redistest.Context(t, 30*time.Second), 1)
			done <- err
		}()
		if err := redistest.Recv(t, done, 15*time.Second, "the relock waiter after Java's lease ran out (no release)"); err != nil {
			t.Fatalf("AcquireLease behind Java's lease: %v", err)
		}
		if r.leaseRelease(t, java) {
			t.Fatal("Redisson tryRelease of its permit whose lease ran out = true; want false")
		}
		wantValue(t, side, name, "0")
		if n := available(t, s); n != 0 {
			t.Fatalf("AvailablePermits with relock's lease = %d; want 0", n)
		}
		if err := s.ReleaseLease(held); err != nil {
			t.Fatal(err)
		}
		wantValue(t, side, name, "1")
	})
}

// RedissonPermitExpirableSemaphoreTest's testBlockingAcquire and
// testConcurrencyMultiPermits2, within one client: with 1 of 2 permits leased, a lease of
// 2 waits (WithWaitTimeout, as Redisson's tryAcquire(2, waitTime, ...)) and gets both
// when the first lease is given back; then none is free. The client's refresh is 20s
// away (a minute's watchdog timeout), beyond the 15s bound.
//
// Guards against a ReleaseLease that publishes nothing (the waiter would sleep until its
// refresh), and one that wakes only other clients' waiters.
func TestRedissonLeaseReleaseWakesWaiterOfTheClient(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:lease-wake"
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		s := c.Semaphore(name)
		mustSet(t, s, 2)
		first := acquireLease(t, s, 1)
		type result struct {
			held context.Context
			err  error
		}
		done := make(chan result, 1)
		go func() {
			held, err := s.AcquireLease(context.Background(), 2, semaphore.WithWaitTimeout(30*time.Second))
			done <- result{held, err}
		}()
		parked(t, c, 1, "the waiter for a lease of 2")
		if err := s.ReleaseLease(first); err != nil {
			t.Fatal(err)
		}
		got := redistest.Recv(t, done, 15*time.Second, "the lease of 2 after the client gave back the first: it was not woken")
		if got.err != nil {
			t.Fatalf("AcquireLease(2): %v", got.err)
		}
		if ids := s.PermitIDs(got.held); len(ids) != 2 || len(ids[0]) != 32 {
			t.Fatalf("PermitIDs = %q; want 2 ids of 32 hex digits", ids)
		}
		wantValue(t, side, name, "0")
		if _, ok, err := s.TryAcquireLease(context.Background(), 1); ok || err != nil {
			t.Fatalf("TryAcquireLease(1) with none free = %v, %v; want false, nil", ok, err)
		}
		if err := s.ReleaseLease(got.held); err != nil {
			t.Fatal(err)
		}
		wantValue(t, side, name, "2")
	})
}

// RedissonSemaphoreTest's testAcquireAfterAddPermits: a goroutine adds a permit to a
// semaphore that has no count and waits for 2. A permit taken and given back meanwhile
// leaves it waiting (1 is free); the permit its client then adds lets it in. The permit
// taken and given back is a Redisson client's: a relock Acquire(1) of any client would
// queue behind the waiter for 2, as relock serves its waiters in turn, where Redisson's
// takes the permit it finds (docs/migration-from-redisson.md, RSemaphore). The waiter's
// client has a watchdog timeout of a minute, so its refresh (every 20s) cannot stand in
// for the wake-up within the 15s bound.
//
// Guards against an AddPermits that publishes nothing (or whose message does not reach
// the waiters of its own client), and an Acquire that takes fewer than n.
func TestRedissonAcquireAfterAddPermits(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:after-add"
		c, side := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute)), b.Client(t)
		s, java := c.Semaphore(name), newRedisson(b, side, name)
		done := make(chan error, 1)
		go func() {
			if err := s.AddPermits(context.Background(), 1); err != nil {
				done <- err
				return
			}
			done <- s.Acquire(redistest.Context(t, 30*time.Second), 2)
		}()
		parked(t, c, 1, "the waiter for 2 permits")
		stillWaiting(t, done, 300*time.Millisecond, "Acquire(2) with 1 permit")
		if !java.tryAcquire(t, 1) {
			t.Fatal("Redisson's acquire of the free permit failed")
		}
		wantValue(t, side, name, "0")
		java.releaseN(t, 1)
		stillWaiting(t, done, 300*time.Millisecond, "Acquire(2) after a release that left 1 permit")
		wantValue(t, side, name, "1")
		mustAdd(t, s, 1)
		if err := redistest.Recv(t, done, 15*time.Second, "Acquire(2) after its client added the second permit: it was not woken"); err != nil {
			t.Fatalf("Acquire(2): %v", err)
		}
		wantValue(t, side, name, "0")
		if st := c.PubSubStats(); st.TimedOut != 0 {
			t.Errorf("stats %+v: a wait ended by its time bound, not by AddPermits", st)
		}
		mustRelease(t, s, 2)
		wantValue(t, side, name, "2")
	})
}

// inTurns runs relocktest.InTurns on sems (one semaphore of 1 permit, through one client
// or several): each round an Acquire(1) and a Release(1).
func inTurns(t *testing.T, sems []*semaphore.Weighted, rounds int, hold time.Duration) {
	t.Helper()
	relocktest.InTurns(t, sems, rounds, hold, func(ctx context.Context, s *semaphore.Weighted) (func() error, error) {
		err := s.Acquire(ctx, 1)
		return func() error { return s.Release(context.Background(), 1) }, err
	})
}

// RedissonSemaphoreTest's testConcurrency_SingleInstance: 15 goroutines of one client
// each take the one permit, count, and give it back: all 15 count, never two at once.
//
// Guards against an Acquire that takes a permit that is not free, and waiters of a client
// left asleep (or queued in the process) after its own release.
func TestRedissonConcurrencyOneClient(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:one-client"
		side := b.Client(t)
		s := relocktest.New(t, b).Semaphore(name)
		mustSet(t, s, 1)
		inTurns(t, slices.Repeat([]*semaphore.Weighted{s}, 15), 1, 0)
		wantValue(t, side, name, "1")
	})
}

// RedissonSemaphoreTest's testConcurrencyLoop_MultiInstance: several clients loop, each
// taking the one permit, holding it a moment, counting, and giving it back: every round
// of every client counts, never two at once. Redisson runs 16 clients of 100 rounds
// holding 10ms each; here 4 clients of 25 rounds hold 5ms.
//
// Guards against an Acquire that takes a permit that is not free, and a client's waiter
// left asleep after another client's release.
func TestRedissonConcurrencyLoopClients(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:loop-clients"
		side := b.Client(t)
		mustSet(t, relocktest.New(t, b).Semaphore(name), 1)
		var sems []*semaphore.Weighted
		for range 4 {
			sems = append(sems, relocktest.New(t, b).Semaphore(name))
		}
		inTurns(t, sems, 25, 5*time.Millisecond)
		wantValue(t, side, name, "1")
	})
}

// RedissonSemaphoreTest's testConcurrency_MultiInstance_1_permits: 30 clients each take
// the one permit once, count, and give it back: all 30 count, never two at once.
//
// Guards against an Acquire that takes a permit that is not free, and a client first in
// the queue that another client's release does not wake (or that does not pass the turn
// on to the client behind it).
func TestRedissonConcurrencyClientsOnce(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:clients-once"
		side := b.Client(t)
		mustSet(t, relocktest.New(t, b).Semaphore(name), 1)
		var sems []*semaphore.Weighted
		for range 30 {
			sems = append(sems, relocktest.New(t, b).Semaphore(name))
		}
		inTurns(t, sems, 1, 0)
		wantValue(t, side, name, "1")
	})
}
