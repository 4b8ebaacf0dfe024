package semaphore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/semaphore"
)

// Redisson's permit-expirable semaphore tests, method by method, with relock's names for
// its calls (docs/migration-from-redisson.md, RPermitExpirableSemaphore): acquire is
// AcquireLease, tryAcquire with a wait is AcquireLease with WithWaitTimeout, tryAcquire
// without one is TryAcquireLease, release of a permit's ids is ReleaseLease of the whole
// lease. relock's lease has no fixed lease time: it runs out when its holder stops
// renewing it (a dead process, a dropped lease), so a Redisson lease that "runs out" is,
// here, a lease whose permit is scored in the past, as a holder that paused past its
// lease leaves it.
//
// These tests wait on leases and wake-ups most of their time, so they run in parallel with
// each other (t.Parallel): each has servers of its own, and the shared cluster takes turns.
//
//   - testExpire: covered by TestRedissonLeaseRunsOutForRelockWaiter (a waiter gets the
//     permit of a lease that ran out, without a release; the id's release is then false).
//   - testExpireTryAcquire: covered by TestRedissonLeaseRunsOutForRelockWaiter and
//     TestCrashedLeaseComesBack (the same with a bounded wait).
//   - testAvailablePermits: ported, TestRedissonLeaseAvailablePermits.
//   - testBlockingAcquire: covered by TestRedissonLeaseReleaseWakesWaiterOfTheClient.
//   - testConcurrencyMultiPermits2: covered by TestRedissonLeaseReleaseWakesWaiterOfTheClient.
//   - testNotExistent: covered by TestCount (AvailablePermits of no count is 0).
//   - testTrySetPermits: covered by TestCount.
//   - testAddPermits: covered by TestCount (AddPermits adds, and takes away below zero).
//   - testBlockingAcquireMany: covered by TestLeaseLayoutAndRenewal (a lease of 2 of 3,
//     given back whole).
//   - testExpiration: ported, TestRedissonLeaseGoesWithTheSemaphore.
//   - testReleaseWithoutPermits: covered by TestLeaseLayoutAndRenewal (ReleaseLease of a
//     context without a lease is ErrNotHeld).
//   - testReleaseExpired: covered by TestReleaseOfLeaseThatRanOut.
//   - testReleaseManyExpiredDoesNotThrow: ported, TestRedissonLeaseAfterOneThatRanOut.
//   - testRelease, testReleaseAsyncMany, testReleaseManyNotExistOrExpired: not applicable:
//     they release some of a lease's ids at a time, or ids made up; relock gives back a
//     lease whole ("the whole lease at once"); the second release of a lease, ErrNotHeld,
//     is covered by TestLeaseLayoutAndRenewal.
//   - testAcquire, testAcquireAsyncMany: not applicable: Redisson's futures (the *Async
//     methods are a goroutine around AcquireLease, as every test here does).
//   - testUpdateLeaseTime, testGetLeaseTime: not applicable: relock's lease is renewed by
//     the watchdog ("updateLeaseTime | not needed", "getLeaseTime | not offered").
//   - testAcquiredPermits, testGetPermits, testSetPermits: not applicable: not offered.
//   - testGetInClusterNameMapper: not applicable: Redisson's NameMapper setting.
//   - testTryAcquire: ported, TestRedissonLeaseTryAcquire.
//   - testTryAcquireMany: ported, TestRedissonLeaseTryAcquireMany.
//   - testTryReleaseManyExpired: ported, TestRedissonLeaseReleaseBesideOneThatRanOut.
//   - testConcurrency_SingleInstance: ported, TestRedissonLeaseConcurrencyOneClient.
//   - testConcurrencyLoop_MultiInstance: ported, TestRedissonLeaseConcurrencyLoopClients.
//   - testConcurrencyMultiPermits: ported, TestRedissonLeaseConcurrencyAllPermits.

// TryAcquireLease takes the one permit (an id of 32 hex digits), a second fails, and an
// AcquireLease with a wait bound, parked behind it, gets the permit when another goroutine
// gives the first lease back; then none is free. The wait bound is 30s where Redisson's is
// 1s; the client's refresh is 20s away (a minute's watchdog timeout), past the 15s bound
// on the wake-up.
//
// Guards against a TryAcquireLease that takes a permit that is not free, and a bounded
// AcquireLease that is not woken by the release.
func TestRedissonLeaseTryAcquire(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:lease-try"
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		s := c.Semaphore(name)
		ctx := context.Background()
		mustSet(t, s, 1)
		first, ok, err := s.TryAcquireLease(ctx, 1)
		if !ok || err != nil {
			t.Fatalf("TryAcquireLease(1) of 1 = %v, %v; want true, nil", ok, err)
		}
		if ids := s.PermitIDs(first); len(ids) != 1 || len(ids[0]) != 32 {
			t.Fatalf("PermitIDs = %q; want one id of 32 hex digits", ids)
		}
		if _, ok, err := s.TryAcquireLease(ctx, 1); ok || err != nil {
			t.Fatalf("TryAcquireLease(1) with none free = %v, %v; want false, nil", ok, err)
		}
		type result struct {
			held context.Context
			err  error
		}
		done := make(chan result, 1)
		go func() {
			held, err := s.AcquireLease(ctx, 1, semaphore.WithWaitTimeout(30*time.Second))
			done <- result{held, err}
		}()
		parked(t, c, 1, "the bounded AcquireLease")
		released := make(chan error, 1)
		go func() { released <- s.ReleaseLease(first) }()
		if err := redistest.Recv(t, released, 15*time.Second, "the release of the first lease"); err != nil {
			t.Fatalf("ReleaseLease: %v", err)
		}
		got := redistest.Recv(t, done, 15*time.Second, "the bounded AcquireLease after the release")
		if got.err != nil {
			t.Fatalf("AcquireLease with a wait bound: %v", got.err)
		}
		if ids := s.PermitIDs(got.held); len(ids) != 1 || len(ids[0]) != 32 {
			t.Fatalf("PermitIDs = %q; want one id of 32 hex digits", ids)
		}
		if n := available(t, s); n != 0 {
			t.Fatalf("AvailablePermits = %d; want 0", n)
		}
		if err := s.ReleaseLease(got.held); err != nil {
			t.Fatal(err)
		}
		wantValue(t, side, name, "1")
	})
}

// Of 10 permits, TryAcquireLease(4) takes 4 (4 ids), TryAcquireLease(5) takes 5 more (5
// ids), and 1 is left.
//
// Guards against a lease of n that takes, or records, another number of permits.
func TestRedissonLeaseTryAcquireMany(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:lease-try-many"
		side := b.Client(t)
		s := relocktest.New(t, b).Semaphore(name)
		ctx := context.Background()
		mustSet(t, s, 10)
		var helds []context.Context
		for _, n := range []int64{4, 5} {
			held, ok, err := s.TryAcquireLease(ctx, n)
			if !ok || err != nil {
				t.Fatalf("TryAcquireLease(%d) = %v, %v; want true, nil", n, ok, err)
			}
			if ids := s.PermitIDs(held); int64(len(ids)) != n {
				t.Fatalf("PermitIDs of a lease of %d = %q", n, ids)
			}
			helds = append(helds, held)
		}
		if n := available(t, s); n != 1 {
			t.Fatalf("AvailablePermits = %d; want 1", n)
		}
		if l := leased(t, side, name); len(l) != 9 {
			t.Fatalf("%d permits leased; want 9", len(l))
		}
		for _, held := range helds {
			if err := s.ReleaseLease(held); err != nil {
				t.Fatal(err)
			}
		}
		wantValue(t, side, name, "10")
	})
}

// Of 10 permits, a lease of 3 runs out (its ids scored in the past, as a holder that
// paused past its lease leaves them) while another lease of 3 lives: 4 are free. Giving
// back the live lease works, and the count reads 10 (the 3 that ran out put back). Giving
// back the lease that ran out is then ErrNotHeld and leaves 10: its permits are not
// counted twice.
//
// Guards against a ReleaseLease of a lost lease that gives back permits already put back
// (the count would read 13), and a release of a live lease upset by a lost one beside it.
func TestRedissonLeaseReleaseBesideOneThatRanOut(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:lease-ran-out"
		side := b.Client(t)
		// A minute's watchdog timeout: no renewal comes before the test ends.
		s := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute), relock.WithLogger(nil)).Semaphore(name)
		mustSet(t, s, 10)
		timed := acquireLease(t, s, 3)
		lasting := acquireLease(t, s, 3)
		if n := available(t, s); n != 4 {
			t.Fatalf("AvailablePermits = %d; want 4", n)
		}
		runOut(t, side, s, timed)
		if err := s.ReleaseLease(lasting); err != nil {
			t.Fatalf("ReleaseLease of the live lease: %v", err)
		}
		if n := available(t, s); n != 10 {
			t.Fatalf("AvailablePermits after the live lease's release = %d; want 10", n)
		}
		wantErr(t, s.ReleaseLease(timed), relock.ErrNotHeld, name)
		if n := available(t, s); n != 10 {
			t.Fatalf("AvailablePermits after the release of the lease that ran out = %d; want 10", n)
		}
		wantValue(t, side, name, "10")
		if l := leased(t, side, name); len(l) != 0 {
			t.Fatalf("leased permits %v left; want none", l)
		}
	})
}

// A hundred goroutines of one client each lease the one permit, count, and give it back:
// all hundred get it, and never two at once.
//
// Guards against a lease that takes a permit that is not free, and waiters of a client
// left asleep after a release.
func TestRedissonLeaseConcurrencyOneClient(t *testing.T) {
	t.Parallel()
	const iterations = 100
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:lease-one-client"
		side := b.Client(t)
		s := relocktest.New(t, b).Semaphore(name)
		mustSet(t, s, 1)
		var inside, over, counter atomic.Int64
		errs := make(chan error, iterations)
		ctx := redistest.Context(t, 2*time.Minute)
		for range iterations {
			go func() {
				held, err := s.AcquireLease(ctx, 1)
				if err != nil {
					errs <- err
					return
				}
				if inside.Add(1) > 1 {
					over.Add(1)
				}
				counter.Add(1)
				inside.Add(-1)
				errs <- s.ReleaseLease(held)
			}()
		}
		for range iterations {
			if err := redistest.Recv(t, errs, 90*time.Second, "a goroutine's lease and release"); err != nil {
				t.Fatalf("AcquireLease or ReleaseLease: %v", err)
			}
		}
		if n := over.Load(); n != 0 {
			t.Fatalf("%d times two goroutines held the one permit", n)
		}
		if n := counter.Load(); n != iterations {
			t.Fatalf("counted %d; want %d", n, iterations)
		}
		wantValue(t, side, name, "1")
	})
}

// Several clients loop, each leasing the one permit, holding it a moment, counting, and
// giving it back: every round of every client gets it, and never two at once. Redisson
// runs 16 clients of 100 rounds holding 10ms each; here 4 clients of 25 rounds hold 5ms.
//
// Guards against a lease that takes a permit that is not free, and a client's waiter
// left asleep after another client's release.
func TestRedissonLeaseConcurrencyLoopClients(t *testing.T) {
	t.Parallel()
	const clients, rounds = 4, 25
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:lease-loop"
		side := b.Client(t)
		mustSet(t, relocktest.New(t, b).Semaphore(name), 1)
		var sems []*semaphore.Weighted
		for range clients {
			sems = append(sems, relocktest.New(t, b).Semaphore(name))
		}
		relocktest.InTurns(t, sems, rounds, 5*time.Millisecond, func(ctx context.Context, s *semaphore.Weighted) (func() error, error) {
			held, err := s.AcquireLease(ctx, 1)
			return func() error { return s.ReleaseLease(held) }, err
		})
		wantValue(t, side, name, "1")
	})
}

// Two goroutines of one client each lease both of 2 permits with a wait bound, hold them
// half a second and give them back: both get them, one after the other. The bound is 15s
// where Redisson's is 2s; the client's refresh is 20s away (a minute's watchdog timeout),
// so it cannot stand in for the release's wake-up within the bound.
//
// Guards against a lease of all permits that does not get them back from the other (its
// waiter not woken by the release).
func TestRedissonLeaseConcurrencyAllPermits(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:lease-all"
		side := b.Client(t)
		s := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute)).Semaphore(name)
		mustSet(t, s, 2)
		var success, inside, over atomic.Int64
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				held, err := s.AcquireLease(context.Background(), 2, semaphore.WithWaitTimeout(15*time.Second))
				if err != nil {
					errs <- err
					return
				}
				if inside.Add(1) > 1 {
					over.Add(1)
				}
				time.Sleep(500 * time.Millisecond)
				inside.Add(-1)
				success.Add(1)
				errs <- s.ReleaseLease(held)
			}()
		}
		for range 2 {
			if err := redistest.Recv(t, errs, 30*time.Second, "a lease of both permits"); err != nil {
				t.Fatalf("AcquireLease(2) or ReleaseLease: %v", err)
			}
		}
		if n := success.Load(); n != 2 {
			t.Fatalf("%d leases of both permits; want 2", n)
		}
		if n := over.Load(); n != 0 {
			t.Fatal("both goroutines held both permits at once")
		}
		wantValue(t, side, name, "2")
	})
}

// Of 2 permits, two leases with a wait bound take one each, and a third, bounded at 200ms
// as Redisson's, fails at its bound (DeadlineExceeded naming the semaphore) while
// AvailablePermits reads 0. Both leases run out: a fourth lease with a bound gets a permit
// without any release, and once it has run out too AvailablePermits reads 2, every permit
// back. ReleaseLease of each lease that ran out is then ErrNotHeld and leaves the count at
// 2, and no key but the count is left.
//
// Guards against an acquire that waits on permits whose lease ran out (it would fail at
// its bound), an AvailablePermits that does not put them back, and a lease that ran out
// counted back twice.
func TestRedissonLeaseAvailablePermits(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:lease-available"
		side := b.Client(t)
		// A minute's watchdog timeout: no renewal comes before the test ends.
		s := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute), relock.WithLogger(nil)).Semaphore(name)
		ctx := context.Background()
		mustSet(t, s, 2)
		if n := available(t, s); n != 2 {
			t.Fatalf("AvailablePermits of a new semaphore of 2 = %d; want 2", n)
		}
		lease := func(what string) context.Context {
			t.Helper()
			held, err := s.AcquireLease(ctx, 1, semaphore.WithWaitTimeout(15*time.Second))
			if err != nil {
				t.Fatalf("%s: AcquireLease(1) with a wait bound: %v", what, err)
			}
			return held
		}
		first, second := lease("the first lease"), lease("the second lease")
		_, err := s.AcquireLease(ctx, 1, semaphore.WithWaitTimeout(200*time.Millisecond))
		wantErr(t, err, context.DeadlineExceeded, name)
		if n := available(t, s); n != 0 {
			t.Fatalf("AvailablePermits with both leased = %d; want 0", n)
		}
		runOut(t, side, s, first)
		runOut(t, side, s, second)
		fourth := lease("a lease after two ran out")
		runOut(t, side, s, fourth)
		if n := available(t, s); n != 2 {
			t.Fatalf("AvailablePermits once every lease ran out = %d; want 2", n)
		}
		for _, held := range []context.Context{first, second, fourth} {
			wantErr(t, s.ReleaseLease(held), relock.ErrNotHeld, name)
		}
		if n := available(t, s); n != 2 {
			t.Fatalf("AvailablePermits after the releases of the leases that ran out = %d; want 2", n)
		}
		wantValue(t, side, name, "2")
		wantKeys(t, b, side, name)
	})
}

// Of 10 permits, a lease of 6 leaves 4. It runs out, and a lease of 1 taken after it
// leaves 9 available, the 6 put back; once that one runs out too, 10. ReleaseLease of the
// lease of 6 is then ErrNotHeld (a lease that ran out is not held; Redisson's release of
// ids that ran out does nothing) and the count stays 10.
//
// Guards against permits of a lease that ran out left out of the count once a lease is
// taken beside them (an acquire that finds enough free need not put them back, but the
// next count must), and put back twice by a late release.
func TestRedissonLeaseAfterOneThatRanOut(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:lease-after-ran-out"
		side := b.Client(t)
		// A minute's watchdog timeout: no renewal comes before the test ends.
		s := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute), relock.WithLogger(nil)).Semaphore(name)
		mustSet(t, s, 10)
		many := acquireLease(t, s, 6)
		if ids := s.PermitIDs(many); len(ids) != 6 {
			t.Fatalf("PermitIDs of a lease of 6 = %q", ids)
		}
		if n := available(t, s); n != 4 {
			t.Fatalf("AvailablePermits = %d; want 4", n)
		}
		runOut(t, side, s, many)
		one := acquireLease(t, s, 1)
		if n := available(t, s); n != 9 {
			t.Fatalf("AvailablePermits after a lease of 1 beside the 6 that ran out = %d; want 9", n)
		}
		runOut(t, side, s, one)
		if n := available(t, s); n != 10 {
			t.Fatalf("AvailablePermits once the lease of 1 ran out too = %d; want 10", n)
		}
		wantErr(t, s.ReleaseLease(many), relock.ErrNotHeld, name)
		if n := available(t, s); n != 10 {
			t.Fatalf("AvailablePermits after the release of the lease of 6 = %d; want 10", n)
		}
		wantValue(t, side, name, "10")
		if l := leased(t, side, name); len(l) != 0 {
			t.Fatalf("leased permits %v left; want none", l)
		}
	})
}

// A semaphore of 1 permit whose count expires in 3s (Redisson's expire; relock offers
// none, so the test sets it on the key, as Redisson's does before any permit is leased)
// is leased with a wait bound; once the count has expired, no key of the semaphore is
// left: the leased permits went with it, though the watchdog renewed the lease (every
// third of a second) until then. The lease is lost: its context ends with ErrLeaseLost, and
// ReleaseLease is ErrNotHeld and writes nothing.
//
// Guards against leased permits that outlive their semaphore (a renewal that writes the
// zset anew, or without the count's expiry), a lease held on after its semaphore is gone,
// and a release that writes a count for a semaphore that expired.
func TestRedissonLeaseGoesWithTheSemaphore(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-port:lease-expiration"
		side := b.Client(t)
		s := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second), relock.WithLogger(nil)).Semaphore(name)
		mustSet(t, s, 1)
		redistest.MustDo(t, side, "PEXPIRE", name, "3000")
		held, err := s.AcquireLease(context.Background(), 1, semaphore.WithWaitTimeout(15*time.Second))
		if err != nil {
			t.Fatalf("AcquireLease(1) with a wait bound: %v", err)
		}
		redistest.Eventually(t, 15*time.Second, "the semaphore's keys to expire", func() bool { return len(keys(t, b, side)) == 0 })
		redistest.Recv(t, held.Done(), 15*time.Second, "the end of a lease whose semaphore expired")
		if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
			t.Fatalf("the lease's context has cause %v; want ErrLeaseLost", context.Cause(held))
		}
		wantErr(t, s.ReleaseLease(held), relock.ErrNotHeld, name)
		wantKeys(t, b, side)
	})
}
