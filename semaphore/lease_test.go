package semaphore_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/javaside"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/internal/script"
	"github.com/relock-go/relock/semaphore"
)

// leaseNames are semaphore names on each master of the test cluster (slots 365, 8619,
// 12558), so that a cluster run covers every shard.
var leaseNames = []string{"lease:b", "lease:d", "lease:a"}

// leasesKey is Redisson's RPermitExpirableSemaphore zset of leased permits for name, as
// its suffixName makes it: {name}:timeout, or name:timeout for a name with a hash tag.
func leasesKey(name string) string {
	if strings.Contains(name, "{") {
		return name + ":timeout"
	}
	return "{" + name + "}:timeout"
}

// leased returns the zset of leased permits of name: id in hex -> when it runs out (ms).
func leased(t testing.TB, rc rueidis.Client, name string) map[string]int64 {
	t.Helper()
	zs, err := rc.Do(context.Background(), rc.B().Zrange().Key(leasesKey(name)).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil {
		t.Fatalf("ZRANGE %s: %v", leasesKey(name), err)
	}
	out := make(map[string]int64, len(zs))
	for _, z := range zs {
		out[hex.EncodeToString([]byte(z.Member))] = int64(z.Score)
	}
	return out
}

// runOut scores the permits of the lease held of s in the past, as a holder that paused
// past its lease leaves them: the lease has run out, and nobody has put its permits back.
func runOut(t testing.TB, rc rueidis.Client, s *semaphore.Weighted, held context.Context) {
	t.Helper()
	var raws []string
	for _, id := range s.PermitIDs(held) {
		raw, _ := hex.DecodeString(id)
		raws = append(raws, string(raw))
	}
	leasedInThePast(t, rc, s.Name(), raws...)
}

// leasedInThePast scores the permits (raw ids) leased of the semaphore name a millisecond
// in the past by Redis's clock, as a lease that ran out leaves them, adding those not there.
func leasedInThePast(t testing.TB, rc rueidis.Client, name string, raws ...string) {
	t.Helper()
	past := strconv.FormatInt(redistest.Millis(t, rc)-1, 10)
	for _, raw := range raws {
		redistest.MustDo(t, rc, "ZADD", leasesKey(name), past, raw)
	}
}

// acquireLease fails t unless AcquireLease(n) succeeds within 15s.
func acquireLease(t testing.TB, s *semaphore.Weighted, n int64) context.Context {
	t.Helper()
	held, err := s.AcquireLease(redistest.Context(t, 15*time.Second), n)
	if err != nil {
		t.Fatalf("AcquireLease(%d): %v", n, err)
	}
	return held
}

// available fails t unless AvailablePermits works, and returns it.
func available(t testing.TB, s *semaphore.Weighted) int64 {
	t.Helper()
	n, err := s.AvailablePermits(context.Background())
	if err != nil {
		t.Fatalf("AvailablePermits: %v", err)
	}
	return n
}

// A lease taken while the semaphore's count has an expiry (an application's, or
// Redisson's expire) ends, with ErrLeaseLost, by the time that expiry takes its permits
// away with the semaphore (the zset of leased permits has the count's expiry), however
// far off the lease's next renewal is: once the semaphore is gone, another client sets it
// up again and takes its permit, and the first lease's context must have ended by then.
//
// Guards against a lease whose context lives to the end of the lease the client asked
// for while Redis lets its permits go earlier, with the semaphore.
func TestLeaseEndsWhenItsSemaphoreExpires(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-sem-expires"
		side := b.Client(t)
		// A minute's watchdog timeout: the first renewal is 20s away.
		s := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute), relock.WithLogger(nil)).Semaphore(name)
		other := relocktest.New(t, b).Semaphore(name)
		mustSet(t, s, 1)
		redistest.MustDo(t, side, "PEXPIRE", name, "1500")
		held := acquireLease(t, s, 1)
		redistest.Eventually(t, 15*time.Second, "the semaphore to expire", func() bool { return len(keys(t, b, side)) == 0 })
		mustSet(t, other, 1)
		theirs, ok, err := other.TryAcquireLease(context.Background(), 1)
		if !ok || err != nil {
			t.Fatalf("TryAcquireLease(1) of the semaphore set up again = %v, %v; want true", ok, err)
		}
		defer func() { _ = other.ReleaseLease(theirs) }()
		if err := held.Err(); err == nil {
			t.Fatal("the first lease's context is live while another client holds the one permit of the semaphore set up again")
		}
		if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
			t.Fatalf("the first lease's context has cause %v; want ErrLeaseLost", context.Cause(held))
		}
		wantErr(t, s.ReleaseLease(held), relock.ErrNotHeld, name)
		wantValue(t, side, name, "0")
	})
}

// A lease that waited in line for its permits, and took them once the count had been
// given an expiry, ends by that expiry too, with ErrLeaseLost: within 15s of being taken,
// while its first renewal is 20s away (a minute's watchdog timeout).
//
// Guards against a lease taken by a waiter first in line (the acquire script's queued
// path) that is not told of the count's expiry.
func TestLeaseThatWaitedEndsWhenItsSemaphoreExpires(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-waited-sem-expires"
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute), relock.WithLogger(nil))
		s := c.Semaphore(name)
		mustSet(t, s, 0)
		type result struct {
			held context.Context
			err  error
		}
		got := make(chan result, 1)
		go func() {
			held, err := s.AcquireLease(redistest.Context(t, 30*time.Second), 1)
			got <- result{held, err}
		}()
		parked(t, c, 1, "the lease waiting for a permit")
		redistest.MustDo(t, side, "PEXPIRE", name, "2000")
		if err := relocktest.New(t, b).Semaphore(name).AddPermits(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		r := redistest.Recv(t, got, 15*time.Second, "the waiting AcquireLease after a permit was added")
		if r.err != nil {
			t.Fatalf("AcquireLease after a permit was added: %v", r.err)
		}
		redistest.Recv(t, r.held.Done(), 15*time.Second, "the end of a lease whose semaphore expires in 2s (its renewal is 20s away)")
		if !errors.Is(context.Cause(r.held), relock.ErrLeaseLost) {
			t.Fatalf("the lease's context has cause %v; want ErrLeaseLost", context.Cause(r.held))
		}
	})
}

// A lease taken in the last millisecond of its semaphore's count (PTTL 0: the key lives
// while the script runs, and expires as it ends) goes with the semaphore too: its context
// ends at once, with ErrLeaseLost, and no leased permit is left behind. Each round sets a
// count that expires a millisecond later and leases it at once: some rounds find it with a
// millisecond left, others in its last one, and every lease taken must end well within 5s,
// its first renewal being 20s away.
//
// A real server only: miniredis moves its clock within a script, where Redis holds it
// still, so there the count can expire between two commands of one script.
//
// Guards against an acquire that takes a count's PTTL of 0 for none (as -1): the leased
// permits would get no expiry, and the lease would be renewed on for a semaphore gone.
func TestLeaseInTheLastMillisecondOfItsSemaphore(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-last-ms"
		side := b.Client(t)
		s := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute), relock.WithLogger(nil)).Semaphore(name)
		for range 20 {
			redistest.MustDo(t, side, "SET", name, "1", "PX", "1")
			held, ok, err := s.TryAcquireLease(context.Background(), 1)
			if err != nil {
				t.Fatalf("TryAcquireLease(1): %v", err)
			}
			if !ok {
				continue // the count expired first
			}
			redistest.Recv(t, held.Done(), 5*time.Second, "the end of a lease whose semaphore expires within a millisecond")
			if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
				t.Fatalf("the lease's context has cause %v; want ErrLeaseLost", context.Cause(held))
			}
			wantKeys(t, b, side)
		}
	})
}

// A lease taken from a count whose expiry lies centuries ahead (18446744074710ms: 2^64ns
// and a second, beyond what a time.Duration counts) is a lease like any other: its context
// is live after it is taken and after the watchdog has renewed it, and ReleaseLease gives
// its permit back. Its expiry bounds nothing a program can wait for.
//
// Guards against an expiry converted to a Duration unchecked: this one wraps to under a
// second, and the lease's context ends then, while Redis holds its permit for centuries.
//
// A real server only: miniredis keeps a TTL as a time.Duration, which such an expiry
// overflows.
func TestLeaseOfACountExpiringBeyondADuration(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-far-expiry"
		side := b.Client(t)
		s := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second)).Semaphore(name)
		mustSet(t, s, 1)
		redistest.MustDo(t, side, "PEXPIRE", name, "18446744074710")
		held := acquireLease(t, s, 1)
		if err := held.Err(); err != nil {
			t.Fatalf("the lease's context ended as it was taken: %v", context.Cause(held))
		}
		time.Sleep(1500 * time.Millisecond) // past the first renewals, within the lease
		if err := held.Err(); err != nil {
			t.Fatalf("the lease's context ended after 1.5s of a count expiring in 18446744074710ms: %v", context.Cause(held))
		}
		if err := s.ReleaseLease(held); err != nil {
			t.Fatalf("ReleaseLease: %v", err)
		}
		if got := value(t, side, name); got != "1" {
			t.Fatalf("%s = %s after ReleaseLease; want 1", name, got)
		}
	})
}

// A lease is Redisson's RPermitExpirableSemaphore data: the count drops by n, and n ids of
// 16 bytes sit in {name}:timeout scored by when they run out, Redis time plus the watchdog
// timeout (1s here). PermitIDs spells them in hex. The watchdog renews them: after 3 leases
// the context is live and every score still lies ahead. ReleaseLease puts the count back,
// removes the ids (the zset goes with the last), ends the context with no cause, and a
// second ReleaseLease, or one with a context that carries no lease, is ErrNotHeld naming
// the semaphore. On the cluster, on a name of each master.
//
// Guards against a renewal that does not move the scores (the lease runs out
// after 1s and the context ends), a release that does not remove the ids.
func TestLeaseLayoutAndRenewal(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second))
		helds := make([]context.Context, len(leaseNames))
		for i, name := range leaseNames {
			s := c.Semaphore(name)
			mustSet(t, s, 3)
			helds[i] = acquireLease(t, s, 2)
			ids := s.PermitIDs(helds[i])
			if len(ids) != 2 || len(ids[0]) != 32 || ids[0] == ids[1] {
				t.Fatalf("PermitIDs = %q; want two distinct ids of 32 hex digits", ids)
			}
			wantValue(t, side, name, "1")
			zs, now := leased(t, side, name), redistest.Millis(t, side)
			for _, id := range ids {
				until, ok := zs[id]
				if !ok {
					t.Fatalf("permit %s not in %s: %v", id, leasesKey(name), zs)
				}
				if d := until - now; d <= 0 || d > 1000 {
					t.Fatalf("permit %s runs out %dms from now; want within the 1000ms lease", id, d)
				}
			}
			if len(zs) != 2 {
				t.Fatalf("%s holds %d ids; want 2", leasesKey(name), len(zs))
			}
		}
		// Three leases later every lease is still held.
		time.Sleep(3 * time.Second)
		for i, name := range leaseNames {
			if err := helds[i].Err(); err != nil {
				t.Fatalf("%s: the lease's context ended after 3 leases: %v", name, context.Cause(helds[i]))
			}
			now := redistest.Millis(t, side)
			for id, until := range leased(t, side, name) {
				if until <= now {
					t.Fatalf("%s: permit %s ran out %dms ago though its lease is renewed", name, id, now-until)
				}
			}
			if n := available(t, c.Semaphore(name)); n != 1 {
				t.Fatalf("%s: AvailablePermits = %d while 2 of 3 are leased; want 1", name, n)
			}
		}
		for i, name := range leaseNames {
			s, held := c.Semaphore(name), helds[i]
			if err := s.ReleaseLease(held); err != nil {
				t.Fatalf("%s: ReleaseLease: %v", name, err)
			}
			if !errors.Is(held.Err(), context.Canceled) || context.Cause(held) != context.Canceled {
				t.Fatalf("%s: after ReleaseLease the context has %v, cause %v; want Canceled without a cause", name, held.Err(), context.Cause(held))
			}
			wantValue(t, side, name, "3")
			wantErr(t, s.ReleaseLease(held), relock.ErrNotHeld, name)
			wantErr(t, s.ReleaseLease(context.Background()), relock.ErrNotHeld, name)
		}
		wantKeys(t, b, side, leaseNames...)
	})
}

// The zset of leased permits expires with the semaphore, as Redisson's acquire makes it: a
// lease taken while the permits key has an expiry (an application's, or Redisson's
// RSemaphore.expire) gives the zset the key's remaining PTTL, so that ids are not left
// behind to be put back, later, into a semaphore set up anew. A key without one leaves the
// zset without one.
func TestLeasesExpireWithTheSemaphore(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b)
		pttl := func(key string) int64 {
			t.Helper()
			ms, err := side.Do(context.Background(), side.B().Pttl().Key(key).Build()).AsInt64()
			if err != nil {
				t.Fatalf("PTTL %s: %v", key, err)
			}
			return ms
		}
		expiring, lasting := leaseNames[0], leaseNames[1]
		for _, name := range []string{expiring, lasting} {
			mustSet(t, c.Semaphore(name), 3)
		}
		redistest.MustDo(t, side, "PEXPIRE", expiring, "600000")
		for _, name := range []string{expiring, lasting} {
			held := acquireLease(t, c.Semaphore(name), 1)
			defer func() { _ = c.Semaphore(name).ReleaseLease(held) }()
		}
		if ms := pttl(leasesKey(expiring)); ms <= 590000 || ms > 600000 {
			t.Errorf("%s has PTTL %d; want the semaphore's, about 600000", leasesKey(expiring), ms)
		}
		if ms := pttl(leasesKey(lasting)); ms != -1 {
			t.Errorf("%s has PTTL %d; want none (-1), as its semaphore has none", leasesKey(lasting), ms)
		}
	})
}

// The whole life of one lease, kept: renewed past several leases, then released, which
// leaves the count as it was and no zset behind.
func TestLeaseReleased(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second))
		var helds []context.Context
		for _, name := range leaseNames {
			s := c.Semaphore(name)
			mustSet(t, s, 2)
			helds = append(helds, acquireLease(t, s, 2))
		}
		time.Sleep(2500 * time.Millisecond)
		for i, name := range leaseNames {
			s := c.Semaphore(name)
			if err := helds[i].Err(); err != nil {
				t.Fatalf("%s: the lease's context ended after 2.5 leases: %v", name, context.Cause(helds[i]))
			}
			if err := s.ReleaseLease(helds[i]); err != nil {
				t.Fatalf("%s: ReleaseLease: %v", name, err)
			}
			wantValue(t, side, name, "2")
		}
		wantKeys(t, b, side, leaseNames...)
	})
}

// A lease one of whose permits is taken out of the zset (an operator, a Java service's
// release of that id) is lost: its context ends with ErrLeaseLost within a renewal period
// or two, ReleaseLease says ErrNotHeld, and gives back the permit that was still there.
//
// Guards against a renewal that renews the ids it finds and ignores a missing
// one.
func TestLeaseLost(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second), relock.WithLogger(nil))
		for _, name := range leaseNames {
			s := c.Semaphore(name)
			mustSet(t, s, 2)
			held := acquireLease(t, s, 2)
			id, _ := hex.DecodeString(s.PermitIDs(held)[1])
			redistest.MustDo(t, side, "ZREM", leasesKey(name), string(id))
			select {
			case <-held.Done():
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the lease's context did not end after one of its permits was taken away", name)
			}
			if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
				t.Fatalf("%s: cause %v; want ErrLeaseLost", name, context.Cause(held))
			}
			wantErr(t, s.ReleaseLease(held), relock.ErrNotHeld, name)
			wantValue(t, side, name, "1")
		}
	})
}

// A process that dies with a lease (its connections blackholed: it neither renews nor
// releases) loses its permits within one lease (1s here), and a waiter of another client
// gets them without any release: first in line, it tries again when the next lease runs
// out. Its own refresh period is 10s (a 30s watchdog timeout), so an acquisition within 8s
// shows it woke at the lease's end, not at its refresh.
//
// Guards against a waiter that ignores when the next lease runs out, an
// acquire script that never puts back permits whose lease ran out.
func TestCrashedLeaseComesBack(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-crash"
		side := b.Client(t)
		proxy := redistest.StartProxy(t, b.Addr)
		dying := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()},
			relock.WithWatchdogTimeout(time.Second), relock.WithTimeout(time.Second), relock.WithLogger(nil))
		live := relocktest.New(t, b, relock.WithWatchdogTimeout(30*time.Second))
		mustSet(t, live.Semaphore(name), 2)
		held := acquireLease(t, dying.Semaphore(name), 2)
		defer func() { _ = held }()

		done := acquireAsync(redistest.Context(t, 30*time.Second), live.Semaphore(name), 2)
		parked(t, live, 1, "the live waiter")
		start := time.Now()
		proxy.Blackhole()
		if err := redistest.Recv(t, done, 8*time.Second, "the waiter behind a dead client's lease (its refresh is 10s away)"); err != nil {
			t.Fatalf("Acquire after the lease's holder died: %v", err)
		}
		t.Logf("the dead client's permits came back %v after it stopped answering (lease 1s)", time.Since(start).Round(time.Millisecond))
		if zs := leased(t, side, name); len(zs) != 0 {
			t.Fatalf("%d leased permits left after they were put back", len(zs))
		}
		wantValue(t, side, name, "0")
		runtime.KeepAlive(held)
	})
}

// A lease whose context is dropped without ReleaseLease is abandoned, as a lock's hold is:
// the watchdog stops renewing it, and its permits are back within a lease.
func TestLeaseAbandoned(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-dropped"
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second), relock.WithLogger(nil))
		s := c.Semaphore(name)
		mustSet(t, s, 1)
		func() {
			held := acquireLease(t, s, 1)
			if len(s.PermitIDs(held)) != 1 {
				t.Fatal("no permit id")
			}
		}()
		redistest.Eventually(t, 20*time.Second, "the dropped lease's permit never came back", func() bool {
			runtime.GC()
			return available(t, s) == 1
		})
		if st := c.WatchdogStats(); st.Abandoned != 1 {
			t.Fatalf("watchdog stats %+v; want one abandoned hold", st)
		}
	})
}

// A lease whose acquisition's reply is on its way when Close runs is given back by its
// taker: AcquireLease returns ErrClosed naming the semaphore, and the permits are back
// once it has returned, not leased for a lease that nobody renews or releases. The
// acquire script takes the permits at once; its reply comes 2s late, after Close.
//
// Guards against an AcquireLease that hands the caller a lease the closing client
// refused to renew, leaving its permits leased in Redis.
func TestCloseGivesBackALeaseInFlight(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-close:in-flight"
		side := b.Client(t)
		holder := relocktest.New(t, b)
		mustSet(t, holder.Semaphore(name), 3)
		c := relocktest.On(t, redistest.LateReply(b.Client(t), name, 2*time.Second))
		s := c.Semaphore(name)
		got := make(chan error, 1)
		go func() {
			held, err := s.AcquireLease(redistest.Context(t, time.Minute), 2)
			if err == nil {
				err = fmt.Errorf("AcquireLease took a lease after Close (ids %v)", s.PermitIDs(held))
			}
			got <- err
		}()
		redistest.Eventually(t, 10*time.Second, "the acquisition never took the permits", func() bool {
			return len(leased(t, side, name)) == 2
		})
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wantErr(t, redistest.Recv(t, got, 15*time.Second, "AcquireLease, whose reply came after Close"), relock.ErrClosed, name)
		if zs := leased(t, side, name); len(zs) != 0 {
			t.Errorf("%d permits leased while the client closed are still leased: nobody will give them back", len(zs))
		}
		wantValue(t, side, name, "3")
	})
}

// Close gives back every lease of the client and ends its context with ErrClosed.
func TestCloseGivesLeasesBack(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b)
		var helds []context.Context
		for _, name := range leaseNames {
			mustSet(t, c.Semaphore(name), 3)
			helds = append(helds, acquireLease(t, c.Semaphore(name), 2))
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		for i, name := range leaseNames {
			wantValue(t, side, name, "3")
			if !errors.Is(context.Cause(helds[i]), relock.ErrClosed) {
				t.Fatalf("%s: cause %v after Close; want ErrClosed", name, context.Cause(helds[i]))
			}
		}
		wantKeys(t, b, side, leaseNames...)
	})
}

// A lease's context answers for the owner of the context it was taken with: a lock held
// through ctx is re-entered through the lease's context, not waited for.
func TestLeaseKeepsTheOwner(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.Lock("lease-owner-lock")
		held, err := mu.Lock(redistest.Context(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		s := c.Semaphore("lease-owner")
		mustSet(t, s, 1)
		lease, err := s.AcquireLease(held, 1)
		if err != nil {
			t.Fatal(err)
		}
		again, err := mu.TryLock(lease)
		if err != nil {
			t.Fatalf("TryLock through the lease's context of a lock held through its parent: %v; want a re-entry", err)
		}
		if n, err := mu.HoldCount(again); n != 2 || err != nil {
			t.Fatalf("HoldCount = %d, %v; want 2", n, err)
		}
		for _, err := range []error{mu.Unlock(again), mu.Unlock(held), s.ReleaseLease(lease)} {
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Bad input: n below 1 or above 10,000 is ErrInvalidCount, and a permits key of another type is
// ErrWrongType with the key untouched, as is a zset of leased permits of another type,
// with the count untouched too (a script that took the permits and then failed to record
// their ids would lose them); none panics.
func TestLeaseBadInput(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b)
		s := c.Semaphore("lease-bad")
		for _, n := range []int64{0, -1, 10001, 1 << 62} {
			_, err := s.AcquireLease(redistest.Context(t, 5*time.Second), n)
			wantErr(t, err, relock.ErrInvalidCount, "lease-bad")
			_, _, err = s.TryAcquireLease(context.Background(), n)
			wantErr(t, err, relock.ErrInvalidCount, "lease-bad")
		}
		redistest.MustDo(t, side, "HSET", "lease-bad", "f", "v")
		redistest.Unchanged(t, side, "lease-bad", func() {
			_, err := s.AcquireLease(redistest.Context(t, 5*time.Second), 1)
			wantErr(t, err, relock.ErrWrongType, "lease-bad")
		})
		// The zset of leased permits holding another type: refused before the count moves.
		redistest.MustDo(t, side, "DEL", "lease-bad")
		mustSet(t, s, 2)
		redistest.MustDo(t, side, "SET", leasesKey("lease-bad"), "not a zset")
		redistest.Unchanged(t, side, leasesKey("lease-bad"), func() {
			_, err := s.AcquireLease(redistest.Context(t, 5*time.Second), 1)
			wantErr(t, err, relock.ErrWrongType, "lease-bad")
		})
		wantValue(t, side, "lease-bad", "2")
		if ids := s.PermitIDs(context.Background()); ids != nil {
			t.Fatalf("PermitIDs of a context without a lease = %q; want nil", ids)
		}
	})
}

// A lease takes up to 10,000 permits (AcquireLease and TryAcquireLease: n from 1 to
// 10,000): a lease of exactly 10,000 is taken, each permit under an id of its own, and
// given back whole. TestLeaseBadInput refuses 10,001.
//
// Guards against a bound that is off by one, refusing the largest lease the contract allows.
func TestLeaseOfTheMostPermits(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name, most = "lease-most", 10000
		side := b.Client(t)
		// A script that leases ten thousand ids runs for a while on miniredis's Lua, the
		// more so on a loaded machine: the client's calls get room beyond the default 3s.
		c := relocktest.New(t, b, relock.WithTimeout(30*time.Second))
		s := c.Semaphore(name)
		mustSet(t, s, 2*most)

		held, ok, err := s.TryAcquireLease(context.Background(), most)
		if !ok || err != nil {
			t.Fatalf("TryAcquireLease(%d) with %d permits free = %v, %v; want true, nil", most, 2*most, ok, err)
		}
		waited := acquireLease(t, s, most)
		wantValue(t, side, name, "0")
		if ids := s.PermitIDs(held); len(ids) != most {
			t.Errorf("PermitIDs of a lease of %d: %d ids", most, len(ids))
		}
		if l := leased(t, side, name); len(l) != 2*most {
			t.Errorf("%d permits leased; want %d", len(l), 2*most)
		}
		for _, l := range []context.Context{held, waited} {
			if err := s.ReleaseLease(l); err != nil {
				t.Fatalf("ReleaseLease of a lease of %d: %v", most, err)
			}
		}
		wantValue(t, side, name, strconv.Itoa(2*most))
	})
}

// TryAcquireLease takes the permits when they are there, and returns ctx and false when
// they are not.
func TestTryAcquireLease(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b)
		s := c.Semaphore("lease-try")
		mustSet(t, s, 2)
		ctx := context.Background()
		held, ok, err := s.TryAcquireLease(ctx, 2)
		if !ok || err != nil || held == ctx {
			t.Fatalf("TryAcquireLease(2) of 2 = %v, %v", ok, err)
		}
		got, ok, err := s.TryAcquireLease(ctx, 1)
		if ok || err != nil || got != ctx {
			t.Fatalf("TryAcquireLease(1) of none = %v, %v; want ctx, false, nil", ok, err)
		}
		if err := s.ReleaseLease(held); err != nil {
			t.Fatal(err)
		}
		wantValue(t, side, "lease-try", "2")
	})
}

// leaseAcquire leases one permit for lease, as RPermitExpirableSemaphore's
// acquire(leaseTime) does (lease 0: without a lease time, as acquire() does), and returns
// its id in hex, or "" when none was available.
func (r *redisson) leaseAcquire(t testing.TB, lease time.Duration) string {
	t.Helper()
	id, err := r.java.LeaseAcquire(redistest.Context(t, 10*time.Second), r.name, lease)
	if err != nil {
		t.Fatalf("Redisson acquire: %v", err)
	}
	return id
}

// leaseRelease releases the permit id (hex), as release(id) does, and reports whether it
// was there and had not run out.
func (r *redisson) leaseRelease(t testing.TB, id string) bool {
	t.Helper()
	ok, err := r.java.LeaseRelease(redistest.Context(t, 10*time.Second), r.name, id)
	if err != nil {
		t.Fatalf("Redisson release: %v", err)
	}
	return ok
}

// relock's leases and Redisson's RPermitExpirableSemaphore share the data: each sees the
// other's leased permits; a relock waiter is woken by a Redisson release; a relock lease
// released by its id from Java is lost to relock (ErrLeaseLost); Redisson's acquire puts
// back a relock lease that ran out (a dead relock process's), and relock puts back a
// Redisson permit whose lease ran out. On a name of each master of the cluster.
func TestRedissonLeasesShare(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second), relock.WithLogger(nil))
		for _, name := range []string{"java:b", "java:d", "java:a"} {
			t.Run(name, func(t *testing.T) {
				r := newRedisson(b, side, name)
				s := c.Semaphore(name)
				mustSet(t, s, 2)

				// Java leases one for a minute: relock sees one left, takes it, and its
				// waiter is woken when Java releases by id.
				java := r.leaseAcquire(t, time.Minute)
				if java == "" {
					t.Fatal("Redisson acquire of 1 of 2 failed")
				}
				if n := available(t, s); n != 1 {
					t.Fatalf("AvailablePermits with one leased by Java = %d; want 1", n)
				}
				mine := acquireLease(t, s, 1)
				if r.leaseAcquire(t, time.Minute) != "" {
					t.Fatal("Redisson acquired a permit while relock and Java hold both")
				}
				done := make(chan error, 1)
				go func() {
					held, err := s.AcquireLease(redistest.Context(t, 20*time.Second), 1)
					if err == nil {
						err = s.ReleaseLease(held)
					}
					done <- err
				}()
				parked(t, c, 1, "the relock waiter")
				if !r.leaseRelease(t, java) {
					t.Fatal("Redisson release of its own permit failed")
				}
				if err := redistest.Recv(t, done, 10*time.Second, "the relock waiter after a Redisson release"); err != nil {
					t.Fatalf("relock waiter: %v", err)
				}

				// A Java waiter hears the count when a relock lease is released.
				msgs := r.subscribe(t)
				extra := acquireLease(t, s, 1)
				if err := s.ReleaseLease(extra); err != nil {
					t.Fatal(err)
				}
				if m := redistest.Recv(t, msgs, 10*time.Second, "the Java waiter's message after a relock ReleaseLease"); m != "1" {
					t.Fatalf("message after ReleaseLease with one permit free: %q; want the count, 1", m)
				}

				// Java releases relock's permit by the id relock gives: relock's lease is lost.
				if !r.leaseRelease(t, s.PermitIDs(mine)[0]) {
					t.Fatal("Redisson release of relock's permit id failed")
				}
				select {
				case <-mine.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("relock's lease went on after Java released its permit")
				}
				if !errors.Is(context.Cause(mine), relock.ErrLeaseLost) {
					t.Fatalf("cause %v; want ErrLeaseLost", context.Cause(mine))
				}
				wantValue(t, side, name, "2")

				// Java's permit that runs out comes back through relock.
				if r.leaseAcquire(t, 300*time.Millisecond) == "" {
					t.Fatal("Redisson acquire failed")
				}
				redistest.Eventually(t, 10*time.Second, "Java's expired permit never came back through relock", func() bool { return available(t, s) == 2 })

				// A relock lease that runs out (a dead process's, written as relock writes
				// it) comes back through Redisson's acquire.
				raw, _ := hex.DecodeString(strings.Repeat("ab", 16))
				redistest.MustDo(t, side, "DECRBY", name, "2")
				leasedInThePast(t, side, name, string(raw), string(raw[:15])+"x")
				// Redisson puts back as many as it asks for; relock's count puts back the rest.
				javaID := r.leaseAcquire(t, time.Minute)
				if javaID == "" {
					t.Fatal("Redisson acquire did not put back relock's expired permits")
				}
				wantValue(t, side, name, "0")
				if zs := leased(t, side, name); len(zs) != 2 {
					t.Fatalf("leased permits %v; want Java's new one and one expired", zs)
				}
				if n := available(t, s); n != 1 {
					t.Fatalf("AvailablePermits = %d; want 1 once the other expired permit is back", n)
				}
				if zs := leased(t, side, name); len(zs) != 1 || !slices.Contains(keysOf(zs), javaID) {
					t.Fatalf("leased permits %v; want only Java's new one, %s", zs, javaID)
				}
			})
		}
	})
}

// A permit that a Java service leases without a lease time (Redisson's acquire() scores it
// javaside.Forever) never runs out for relock: a count does not put it back, and a relock
// waiter first in line behind it waits for a release, not for the lease's end, looking
// again on its own only at its refresh, 20s away (a minute's watchdog timeout). Java's
// release by id wakes it.
//
// Guards against reading that score as a wait in milliseconds without bounding it: the
// wait overflows a Duration to below zero, and the first waiter tries again without pause.
func TestRedissonPermitWithoutLeaseTime(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-forever"
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		r := newRedisson(b, side, name)
		s := c.Semaphore(name)
		mustSet(t, s, 1)
		java := r.leaseAcquire(t, 0)
		if java == "" {
			t.Fatal("Redisson acquire() of the one permit failed")
		}
		kept := func(when string) {
			t.Helper()
			wantValue(t, side, name, "0")
			if zs := leased(t, side, name); len(zs) != 1 || zs[java] != javaside.Forever {
				t.Fatalf("%s: leased permits %v; want only Java's %s, scored %d", when, zs, java, javaside.Forever)
			}
		}
		if n := available(t, s); n != 0 {
			t.Fatalf("AvailablePermits with Java's permit leased for ever = %d; want 0", n)
		}
		kept("after AvailablePermits")

		done := acquireAsync(redistest.Context(t, 40*time.Second), s, 1)
		redistest.Eventually(t, 10*time.Second, "the relock waiter never queued", func() bool {
			return len(redistest.Members(t, side, queueKey(name))) == 1
		})
		parked(t, c, 1, "the relock waiter behind Java's permit")
		before := c.PubSubStats()
		stillWaiting(t, done, 1500*time.Millisecond, "Acquire(1) behind a permit leased for ever")
		if after := c.PubSubStats(); after.TimedOut != before.TimedOut {
			t.Fatalf("the waiter's waits ended by their time bound %d times in 1.5s (its refresh is 20s away): it took Java's permit for one about to run out",
				after.TimedOut-before.TimedOut)
		}
		kept("while the relock waiter waits")

		if !r.leaseRelease(t, java) {
			t.Fatal("Redisson release of its permit failed")
		}
		if err := redistest.Recv(t, done, 15*time.Second, "the relock waiter after Java released its permit"); err != nil {
			t.Fatalf("relock waiter: %v", err)
		}
		wantValue(t, side, name, "0")
		if err := s.Release(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		wantValue(t, side, name, "1")
	})
}

// A Java service's permit leased for longer than a time.Duration holds (over 292 years)
// runs out never for relock, as a permit leased without a lease time does: a relock waiter
// first in line behind it waits for a release, looking again on its own only at its
// refresh, 20s away. The lease here runs out 2^64ns and 3s from now: in milliseconds it
// is a whole number well within the script's reply.
//
// Guards against taking such a wait in milliseconds as a Duration without bounding it
// first: 2^64ns more than 3s wraps to 3s, and the waiter would look again then (and
// again, without pause, as that wait runs down), where it must send nothing.
func TestLeaseLongerThanADuration(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-centuries"
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		r := newRedisson(b, side, name)
		s := c.Semaphore(name)
		mustSet(t, s, 1)
		const wrap = (1<<64 + 999_999) / 1_000_000 // 2^64ns in ms, rounded up
		now := time.Now().UnixMilli()
		java, err := r.java.LeaseAcquireUntil(redistest.Context(t, 10*time.Second), name, now, now+wrap+3000)
		if err != nil || java == "" {
			t.Fatalf("Redisson acquire of the one permit: %q, %v", java, err)
		}

		done := acquireAsync(redistest.Context(t, 40*time.Second), s, 1)
		redistest.Eventually(t, 10*time.Second, "the relock waiter never queued", func() bool {
			return len(redistest.Members(t, side, queueKey(name))) == 1
		})
		parked(t, c, 1, "the relock waiter behind Java's permit")
		before := c.PubSubStats()
		stillWaiting(t, done, 6*time.Second, "Acquire(1) behind a permit leased for centuries")
		if after := c.PubSubStats(); after.TimedOut != before.TimedOut {
			t.Fatalf("the waiter's waits ended by their time bound %d times in 6s (its refresh is 20s away): it took a lease of centuries for one about to run out",
				after.TimedOut-before.TimedOut)
		}
		if zs := leased(t, side, name); len(zs) != 1 || zs[java] == 0 {
			t.Fatalf("leased permits %v; want only Java's %s", zs, java)
		}

		if !r.leaseRelease(t, java) {
			t.Fatal("Redisson release of its permit failed")
		}
		if err := redistest.Recv(t, done, 15*time.Second, "the relock waiter after Java released its permit"); err != nil {
			t.Fatalf("relock waiter: %v", err)
		}
	})
}

func keysOf(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The renewal script (the watchdog's call for leases) answers 0 for a lease one of whose
// permits is gone, and leaves its other permits' leases as they were: the lease is lost,
// not renewed in part. It answers 1 and moves every score on for a whole lease.
//
// Guards against a renewal that renews the ids it finds and ignores a missing
// one, which the lease's local deadline would hide from TestLeaseLost.
func TestRenewalFindsMissingPermit(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-renew"
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute), relock.WithLogger(nil))
		s := c.Semaphore(name)
		mustSet(t, s, 2)
		held := acquireLease(t, s, 2)
		ids := s.PermitIDs(held)
		renew := func() int64 {
			v, err := script.SemaphoreRenew().Exec(context.Background(), side, []string{name, leasesKey(name)},
				[]string{"120000", strings.Join(ids, "")}).AsIntSlice()
			if err != nil || len(v) != 1 {
				t.Fatalf("renewal script: %v %v", v, err)
			}
			return v[0]
		}
		if got := renew(); got != 1 {
			t.Fatalf("renewal of a whole lease = %d; want 1", got)
		}
		for id, until := range leased(t, side, name) {
			if d := until - redistest.Millis(t, side); d <= 60000 {
				t.Fatalf("permit %s runs out in %dms after a renewal for 120s", id, d)
			}
		}
		raw, _ := hex.DecodeString(ids[0])
		redistest.MustDo(t, side, "ZREM", leasesKey(name), string(raw))
		before := leased(t, side, name)
		if got := renew(); got != 0 {
			t.Fatalf("renewal of a lease missing a permit = %d; want 0", got)
		}
		if after := leased(t, side, name); len(after) != 1 || after[ids[1]] != before[ids[1]] {
			t.Fatalf("leased permits %v after the failed renewal; want %v unchanged", after, before)
		}
		runtime.KeepAlive(held)
	})
}

// A leased permit scored below zero (-1, -inf: written by hand, or by a tool gone wrong)
// ran out long ago, and comes back as any permit whose lease ran out does: TryAcquire
// takes it, AvailablePermits counts it, and neither leaves it in the zset of leased
// permits.
//
// Guards against putting back only the permits scored from 0 to now: one scored below
// zero stayed leased for ever, and the waiter first in line, told that the next lease runs
// out at once, tried again every millisecond for as long as it waited.
func TestLeaseScoredBelowZeroComesBack(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b)
		for i, op := range []struct {
			name string
			call func(s *semaphore.Weighted)
		}{
			{"TryAcquire", func(s *semaphore.Weighted) { mustTry(t, s, 2, true) }},
			{"AvailablePermits", func(s *semaphore.Weighted) {
				if n := available(t, s); n != 2 {
					t.Fatalf("AvailablePermits = %d; want 2", n)
				}
			}},
		} {
			name := fmt.Sprintf("lease-below-zero:%d", i)
			s := c.Semaphore(name)
			mustSet(t, s, 0)
			redistest.MustDo(t, side, "ZADD", leasesKey(name), "-1", strings.Repeat("a", 16), "-inf", strings.Repeat("b", 16))
			op.call(s)
			if zs := leased(t, side, name); len(zs) != 0 {
				t.Fatalf("%s: leased permits %v left; want none", op.name, zs)
			}
		}
	})
}

// An acquire that finds too few permits free puts back first the leased permits whose
// lease ran out (a dead holder's) and counts them. Having put some back it publishes the
// count on the semaphore's channel, as Redisson's acquire does, so that a Redisson waiter
// hears of the permits that came back; but only when that leaves some available: a count
// still at or below zero would wake waiters, relock's and Redisson's, for nothing.
func TestAcquirePutsBackExpiredLease(t *testing.T) {
	for _, tc := range []struct {
		what           string
		set, takenAway int64  // the count set, and how many of it are taken away after one is leased
		try            int64  // what TryAcquire asks for
		took           bool   // whether it takes them
		left, heard    string // the count after, and the first message on the channel
	}{
		// One permit free and one whose lease ran out: TryAcquire(2) takes both.
		{"some available", 2, 0, 2, true, "0", "2"},
		// The permit put back leaves the count at -1: nothing is published.
		{"none available", 1, 2, 1, false, "-1", "(nothing)"},
	} {
		t.Run(strings.ReplaceAll(tc.what, " ", "_"), func(t *testing.T) {
			redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
				const name = "lease-back"
				side := b.Client(t)
				s := relocktest.New(t, b).Semaphore(name)
				mustSet(t, s, tc.set)
				// One permit leased, as a holder leases it, by a holder whose lease ran out.
				raw, _ := hex.DecodeString(strings.Repeat("cd", 16))
				redistest.MustDo(t, side, "DECRBY", name, strconv.FormatInt(1+tc.takenAway, 10))
				leasedInThePast(t, side, name, string(raw))
				java := newRedisson(b, side, name)
				msgs := java.subscribe(t)

				mustTry(t, s, tc.try, tc.took)
				wantValue(t, side, name, tc.left)
				if zs := leased(t, side, name); len(zs) != 0 {
					t.Fatalf("leased permits %v after the expired one was put back; want none", zs)
				}
				// A marker after the acquire: the first message is the acquire's, if it sent one.
				redistest.MustDo(t, side, java.publish(), channel(name), "(nothing)")
				if m := redistest.Recv(t, msgs, 10*time.Second, "the first message after the acquire"); m != tc.heard {
					t.Fatalf("first message on %s = %q; want %q", channel(name), m, tc.heard)
				}
			})
		})
	}
}

// A lease given back after its permits key was overwritten is refused before anything is
// written, the leased permits staying recorded and the key as it is: with ErrWrongType
// when the key holds data that is not a count, with ErrInvalidCount when it holds a whole
// number beyond what a semaphore counts exactly (TestCountsAreExact).
func TestLeaseReturnRefusesForeignCount(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute), relock.WithLogger(nil))
		for i, tc := range []struct {
			value string
			want  error
		}{
			{"not a count", relock.ErrWrongType},
			{"9007199254740992", relock.ErrInvalidCount},
		} {
			t.Run(tc.value, func(t *testing.T) {
				name := fmt.Sprintf("lease-foreign:%d", i)
				s := c.Semaphore(name)
				mustSet(t, s, 2)
				held := acquireLease(t, s, 1)
				redistest.MustDo(t, side, "SET", name, tc.value)
				redistest.Unchanged(t, side, leasesKey(name), func() {
					redistest.Unchanged(t, side, name, func() {
						wantErr(t, s.ReleaseLease(held), tc.want, name)
					})
				})
			})
		}
	})
}

// Leased permits count towards the range a semaphore counts exactly: AddPermits and
// TrySetPermits refuse, with ErrInvalidCount and writing nothing, a count that the leased
// permits would take beyond 2^53-1 when they come back, and a lease given back onto the
// highest count they allow leaves a count that every call still takes. Leases outlive a
// count deleted beside them (Redisson's RSemaphore.delete leaves them), so TrySetPermits
// counts them too.
//
// Guards against a check of the count alone: a lease given back (or put back as it runs
// out) then takes the count to 2^53, which every call refuses from then on, AddPermits(-1)
// included, so that the semaphore cannot be used or mended through relock.
func TestLeasedPermitsCountTowardsTheRange(t *testing.T) {
	const most = 1<<53 - 1
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-range"
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		ctx := context.Background()
		s := c.Semaphore(name)
		mustSet(t, s, 1)
		held := acquireLease(t, s, 1)
		redistest.Unchanged(t, side, name, func() { wantErr(t, s.AddPermits(ctx, most), relock.ErrInvalidCount, name) })
		if err := s.AddPermits(ctx, most-1); err != nil {
			t.Fatalf("AddPermits(2^53-2) beside a permit leased: %v", err)
		}
		if err := s.ReleaseLease(held); err != nil {
			t.Fatalf("ReleaseLease: %v", err)
		}
		wantValue(t, side, name, "9007199254740991")
		if n := available(t, s); n != most {
			t.Fatalf("AvailablePermits = %d; want %d", n, most)
		}
		if err := s.AddPermits(ctx, -most); err != nil {
			t.Fatalf("AddPermits(-(2^53-1)): %v", err)
		}

		// The count deleted while a permit is leased: the lease comes back onto the next one.
		if err := s.AddPermits(ctx, 1); err != nil {
			t.Fatal(err)
		}
		held = acquireLease(t, s, 1)
		redistest.MustDo(t, side, "DEL", name)
		redistest.Unchanged(t, side, name, func() {
			ok, err := s.TrySetPermits(ctx, most)
			if ok {
				t.Fatalf("TrySetPermits(2^53-1) beside a permit leased = true")
			}
			wantErr(t, err, relock.ErrInvalidCount, name)
		})
		mustSet(t, s, most-1)
		if err := s.ReleaseLease(held); err != nil {
			t.Fatalf("ReleaseLease: %v", err)
		}
		if n := available(t, s); n != most {
			t.Fatalf("AvailablePermits = %d; want %d", n, most)
		}
	})
}

// The zset of leased permits holding another type, while a lease is out: every call that
// puts back the permits whose lease ran out before it counts (AvailablePermits, Drain,
// TryAcquire and Acquire that find too few, ReleaseLease) is refused with ErrWrongType
// naming the semaphore, at once, and neither the count nor that key is written.
// (AcquireLease: TestLeaseBadInput; TestAuxKeysOfAnotherType puts the waiting clients'
// keys of another type.)
//
// Guards against a script that writes the count before it reads the leased permits (a
// Drain that sets the count to 0, an acquisition that takes the permits, and then fails on
// the zset), and against a raw Redis error or a wait where a refusal is due.
func TestLeasesKeyOfAnotherType(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-other-type"
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute), relock.WithLogger(nil))
		ctx := context.Background()
		s := c.Semaphore(name)
		mustSet(t, s, 2)
		held := acquireLease(t, s, 1)
		redistest.MustDo(t, side, "DEL", leasesKey(name))
		redistest.MustDo(t, side, "HSET", leasesKey(name), "f", "v")
		for _, op := range []struct {
			name string
			call func() error
		}{
			{"AvailablePermits", func() error { _, err := s.AvailablePermits(ctx); return err }},
			{"Drain", func() error { _, err := s.Drain(ctx); return err }},
			{"TryAcquire", func() error { _, err := s.TryAcquire(ctx, 2); return err }},
			{"Acquire", func() error { return s.Acquire(redistest.Context(t, 30*time.Second), 2) }},
			{"ReleaseLease", func() error { return s.ReleaseLease(held) }},
		} {
			redistest.Unchanged(t, side, leasesKey(name), func() {
				redistest.Unchanged(t, side, name, func() {
					err := op.call()
					if !errors.Is(err, relock.ErrWrongType) {
						t.Fatalf("%s with the leased permits key a hash: %v; want ErrWrongType", op.name, err)
					}
					wantErr(t, err, relock.ErrWrongType, name)
				})
			})
		}
		wantValue(t, side, name, "1")
	})
}

// Permits taken away count alone: leased permits come back on top of the count, so they
// only ever raise it, and an AddPermits below zero that takes the count below -(2^53-1) is
// refused with ErrInvalidCount and changes nothing, however many permits are leased.
func TestPermitsTakenAwayCountAloneTowardsTheRange(t *testing.T) {
	const most = 1<<53 - 1
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-range-low"
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		ctx := context.Background()
		s := c.Semaphore(name)
		mustSet(t, s, 10)
		held := acquireLease(t, s, 10)
		if err := s.AddPermits(ctx, -most); err != nil {
			t.Fatalf("AddPermits(-(2^53-1)) on a count of 0: %v", err)
		}
		redistest.Unchanged(t, side, name, func() { wantErr(t, s.AddPermits(ctx, -1), relock.ErrInvalidCount, name) })
		if err := s.AddPermits(ctx, most); err != nil {
			t.Fatal(err)
		}
		if err := s.ReleaseLease(held); err != nil {
			t.Fatalf("ReleaseLease: %v", err)
		}
		if n := available(t, s); n != 10 {
			t.Fatalf("AvailablePermits = %d; want 10", n)
		}
	})
}

// A leased permits key of another type (written by something else) holds no leased
// permits to count towards the range: TrySetPermits and AddPermits beside it set and add
// as beside none, and leave it as it is.
func TestLeasesKeyOfAnotherTypeCountsNoPermits(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-other-type-add"
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		ctx := context.Background()
		s := c.Semaphore(name)
		redistest.MustDo(t, side, "SET", leasesKey(name), "not a zset")
		redistest.Unchanged(t, side, leasesKey(name), func() {
			if ok, err := s.TrySetPermits(ctx, 2); !ok || err != nil {
				t.Fatalf("TrySetPermits(2) beside a leased permits key of another type = %v, %v; want true, nil", ok, err)
			}
			if err := s.AddPermits(ctx, 3); err != nil {
				t.Fatalf("AddPermits(3) beside a leased permits key of another type: %v", err)
			}
		})
		wantValue(t, side, name, "5")
	})
}

// A lease whose permits ran out, though nobody put them back yet, is not held any more:
// ReleaseLease gives the permits back to the count but answers ErrNotHeld, and the
// lease's context ends with ErrLeaseLost.
func TestReleaseOfLeaseThatRanOut(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-ran-out"
		side := b.Client(t)
		s := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute), relock.WithLogger(nil)).Semaphore(name)
		mustSet(t, s, 2)
		held := acquireLease(t, s, 1)
		// The lease runs out, as a holder's that paused past it, before any script counted it.
		runOut(t, side, s, held)
		wantErr(t, s.ReleaseLease(held), relock.ErrNotHeld, name)
		wantValue(t, side, name, "2")
		if zs := leased(t, side, name); len(zs) != 0 {
			t.Fatalf("leased permits %v after the release; want none", zs)
		}
		if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
			t.Fatalf("the lease's context has cause %v; want ErrLeaseLost", context.Cause(held))
		}
	})
}

// Drain puts back first the leased permits whose lease ran out, and takes them with the
// free ones, as Redisson's drainPermits does; permits still leased stay leased.
func TestDrainTakesExpiredLeases(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-drain"
		side := b.Client(t)
		s := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute)).Semaphore(name)
		mustSet(t, s, 3)
		held := acquireLease(t, s, 1)
		// One more permit leased, as a holder leases it, by a holder whose lease ran out.
		raw, _ := hex.DecodeString(strings.Repeat("cd", 16))
		redistest.MustDo(t, side, "DECRBY", name, "1")
		leasedInThePast(t, side, name, string(raw))

		if n, err := s.Drain(context.Background()); n != 2 || err != nil {
			t.Fatalf("Drain = %d, %v; want 2: the free permit and the one whose lease ran out", n, err)
		}
		wantValue(t, side, name, "0")
		if zs := leased(t, side, name); len(zs) != 1 || zs[s.PermitIDs(held)[0]] == 0 {
			t.Fatalf("leased permits %v after Drain; want only the live lease's", zs)
		}
		if err := s.ReleaseLease(held); err != nil {
			t.Fatalf("ReleaseLease after Drain: %v", err)
		}
		wantValue(t, side, name, "1")
	})
}

// Leased permits are given back by ReleaseLease alone: Release counts only the plain
// permits the client took, so after AcquireLease (at once, and after a wait), or
// TryAcquireLease, a Release of those permits is refused with ErrNotHeld and changes
// nothing, and ReleaseLease then puts the count back as it was.
//
// Guards against leased permits counted as plain permits held: a Release would give them
// back, and the ReleaseLease after it would give them back a second time.
func TestReleaseLeavesLeasedPermits(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-not-plain"
		side := b.Client(t)
		c, holder := relocktest.New(t, b), relocktest.New(t, b)
		ctx := context.Background()
		s := c.Semaphore(name)
		mustSet(t, s, 2)
		refused := func(what string) {
			t.Helper()
			redistest.Unchanged(t, side, name, func() { wantErr(t, s.Release(ctx, 1), relock.ErrNotHeld, name) })
			if t.Failed() {
				t.Fatalf("%s: Release(1) gave back a leased permit", what)
			}
		}

		held := acquireLease(t, s, 2)
		refused("after AcquireLease")
		if err := s.ReleaseLease(held); err != nil {
			t.Fatal(err)
		}
		wantValue(t, side, name, "2")

		held, ok, err := s.TryAcquireLease(ctx, 2)
		if !ok || err != nil {
			t.Fatalf("TryAcquireLease(2) of 2 = %v, %v", ok, err)
		}
		refused("after TryAcquireLease")
		if err := s.ReleaseLease(held); err != nil {
			t.Fatal(err)
		}
		wantValue(t, side, name, "2")

		// A lease that waited for its permits.
		mustTry(t, holder.Semaphore(name), 2, true)
		type leaseResult struct {
			held context.Context
			err  error
		}
		got := make(chan leaseResult, 1)
		go func() {
			h, err := s.AcquireLease(redistest.Context(t, 30*time.Second), 2)
			got <- leaseResult{h, err}
		}()
		parked(t, c, 1, "the lease waiting for 2 permits")
		if err := holder.Semaphore(name).Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
		r := redistest.Recv(t, got, 15*time.Second, "the waiting AcquireLease after the release")
		if r.err != nil {
			t.Fatalf("AcquireLease after a wait: %v", r.err)
		}
		refused("after an AcquireLease that waited")
		if err := s.ReleaseLease(r.held); err != nil {
			t.Fatal(err)
		}
		wantValue(t, side, name, "2")
		wantKeys(t, b, side, name)
	})
}

// An AcquireLease whose context ends while its attempt is in flight takes nothing, even
// when the attempt took the permits: it gives them back and returns ctx and an error for
// which errors.Is(err, ctx.Err()) holds. The attempt takes the permit at once, and its
// reply comes 3s late, past the context's deadline of 1s.
//
// Guards against an AcquireLease that keeps a lease its caller gave up on, and one that
// returns the error but leaves the permits taken.
func TestAcquireLeaseContextEndsInFlight(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-late"
		side := b.Client(t)
		holder := relocktest.New(t, b)
		mustSet(t, holder.Semaphore(name), 2)
		c := relocktest.On(t, redistest.LateReply(b.Client(t), queueKey(name), 3*time.Second))
		s := c.Semaphore(name)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		held, err := s.AcquireLease(ctx, 1)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("AcquireLease whose context ended in flight = %v; want errors.Is DeadlineExceeded", err)
		}
		wantErr(t, err, context.DeadlineExceeded, name)
		if held != ctx || s.PermitIDs(held) != nil {
			t.Fatal("AcquireLease returned a lease's context with its error; want ctx")
		}
		wantValue(t, side, name, "2")
		if zs := leased(t, side, name); len(zs) != 0 {
			t.Fatalf("%d leased permits left by an AcquireLease that gave up", len(zs))
		}
	})
}

// A TryAcquireLease whose context ends while its attempt is in flight takes nothing, as
// AcquireLease does: it gives back the permit the attempt took, and answers false with an
// error for which errors.Is(err, ctx.Err()) holds, naming the semaphore, as every error of
// the semaphore's does. The attempt takes the permit at once; its reply comes 3s late,
// past the context's deadline of 1s.
func TestTryAcquireLeaseContextEndsInFlight(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "trylease-late"
		side := b.Client(t)
		mustSet(t, relocktest.New(t, b).Semaphore(name), 2)
		c := relocktest.On(t, redistest.LateReply(b.Client(t), queueKey(name), 3*time.Second))
		s := c.Semaphore(name)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		held, ok, err := s.TryAcquireLease(ctx, 1)
		if ok {
			t.Fatal("TryAcquireLease whose context ended in flight = true; want false")
		}
		wantErr(t, err, context.DeadlineExceeded, name)
		if held != ctx || s.PermitIDs(held) != nil {
			t.Fatal("TryAcquireLease returned a lease's context with its error; want ctx")
		}
		wantValue(t, side, name, "2")
		if zs := leased(t, side, name); len(zs) != 0 {
			t.Fatalf("%d leased permits left by a TryAcquireLease that gave up", len(zs))
		}
	})
}

// A lease taken with a context that carries an owner (here a held lock's) is still an
// owner of its own for the watchdog: dropped without ReleaseLease while the lock's context
// lives on, it is abandoned, and its permit is back within a lease (1s here), as with a
// lease taken with a plain context.
//
// Guards against a lease that belongs to the owner of the context it was taken with: it
// would be renewed as long as that owner is reachable, and never come back.
func TestLeaseAbandonedUnderAnotherOwner(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-dropped-owned"
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second), relock.WithLogger(nil))
		mu := c.Lock("lease-dropped-owner")
		locked, err := mu.Lock(redistest.Context(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		s := c.Semaphore(name)
		mustSet(t, s, 1)
		func() {
			held, err := s.AcquireLease(locked, 1)
			if err != nil {
				t.Fatalf("AcquireLease: %v", err)
			}
			if len(s.PermitIDs(held)) != 1 {
				t.Fatal("no permit id")
			}
		}()
		redistest.Eventually(t, 20*time.Second, "the dropped lease's permit never came back while the lock's owner lived", func() bool {
			runtime.GC()
			return available(t, s) == 1
		})
		if err := mu.Unlock(locked); err != nil {
			t.Fatalf("Unlock of the lock the lease was taken under: %v", err)
		}
	})
}

// The lease calls of a semaphore with an invalid name fail with ErrInvalidName naming it,
// as every method of such a semaphore does: AcquireLease, TryAcquireLease and
// ReleaseLease, whatever the context passed.
//
// Guards against a ReleaseLease that looks for the lease before the name, and so answers
// ErrNotHeld, and a lease's count refused before the name, which hides the name's error.
func TestLeaseInvalidName(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := context.Background()
		for _, name := range []string{"", "a{b", "{x}", "relock_semaphore_queue:{x}"} {
			s := c.Semaphore(name)
			_, err := s.AcquireLease(redistest.Context(t, 5*time.Second), 1)
			wantErr(t, err, relock.ErrInvalidName, name)
			_, ok, err := s.TryAcquireLease(ctx, 1)
			if ok {
				t.Errorf("%q: TryAcquireLease reported true", name)
			}
			wantErr(t, err, relock.ErrInvalidName, name)
			wantErr(t, s.ReleaseLease(ctx), relock.ErrInvalidName, name)
			// A count out of range, below one or above a lease's most, does not hide the
			// name's error.
			for _, n := range []int64{0, 10001} {
				_, err := s.AcquireLease(redistest.Context(t, 5*time.Second), n)
				wantErr(t, err, relock.ErrInvalidName, name)
				_, ok, err := s.TryAcquireLease(ctx, n)
				if ok {
					t.Errorf("%q: TryAcquireLease(%d) reported true", name, n)
				}
				wantErr(t, err, relock.ErrInvalidName, name)
			}
			if ids := s.PermitIDs(ctx); ids != nil {
				t.Errorf("%q: PermitIDs = %q; want nil", name, ids)
			}
		}
		wantKeys(t, b, b.Client(t))
	})
}

// A lease's context carries the lease of its own semaphore of its own client only: to
// another semaphore of the client, or to the same semaphore of another client, it carries
// none, so PermitIDs is nil and ReleaseLease is ErrNotHeld and changes nothing; the lease
// is still live, and its own semaphore gives it back.
//
// Guards against a lease context that answers as a lease of every semaphore.
func TestLeaseBelongsToItsSemaphore(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name, other = "lease-own", "lease-own:other"
		side := b.Client(t)
		c, c2 := relocktest.New(t, b), relocktest.New(t, b)
		s := c.Semaphore(name)
		mustSet(t, s, 2)
		mustSet(t, c.Semaphore(other), 2)
		held := acquireLease(t, s, 1)
		for _, w := range []*semaphore.Weighted{c.Semaphore(other), c2.Semaphore(name)} {
			if ids := w.PermitIDs(held); ids != nil {
				t.Fatalf("PermitIDs through another semaphore or client = %q; want nil", ids)
			}
			redistest.Unchanged(t, side, name, func() {
				redistest.Unchanged(t, side, other, func() { wantErr(t, w.ReleaseLease(held), relock.ErrNotHeld, w.Name()) })
			})
		}
		if held.Err() != nil {
			t.Fatalf("the lease ended after ReleaseLease through another semaphore: %v", context.Cause(held))
		}
		if err := s.ReleaseLease(held); err != nil {
			t.Fatal(err)
		}
		wantValue(t, side, name, "2")
		wantValue(t, side, other, "2")
	})
}

// WithWaitTimeout bounds the wait for a lease, and only that (Redisson's
// tryAcquire(permits, waitTime, leaseTime, unit)): with no permit free the call fails with
// DeadlineExceeded naming the semaphore long before ctx would end it, and takes nothing;
// with permits free the lease is taken, and its context lives on past the bound. A bound
// that is not positive is refused with ErrInvalidOption, taking nothing.
//
// Guards against a bound applied as a deadline on the lease's context (which would end
// it at once, or at the bound, while the permits stay leased and renewed), and against a
// bound that is ignored.
func TestLeaseWaitTimeout(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-wait"
		side := b.Client(t)
		c := relocktest.New(t, b)
		s := c.Semaphore(name)
		ctx := redistest.Context(t, 60*time.Second)
		mustSet(t, s, 0)

		start := time.Now()
		got, err := s.AcquireLease(ctx, 1, semaphore.WithWaitTimeout(300*time.Millisecond))
		wantErr(t, err, context.DeadlineExceeded, name)
		if got != ctx {
			t.Error("a failed AcquireLease returned another context than ctx")
		}
		// ctx allows a minute: only the bound ends the call this soon.
		if took := time.Since(start); took >= 30*time.Second {
			t.Errorf("AcquireLease with a bound of 300ms took %v", took)
		}
		wantValue(t, side, name, "0")
		if l := leased(t, side, name); len(l) != 0 {
			t.Errorf("leased permits after a bounded wait ran out: %v; want none", l)
		}

		for _, d := range []time.Duration{0, -time.Second} {
			_, err := s.AcquireLease(redistest.Context(t, 5*time.Second), 1, semaphore.WithWaitTimeout(d))
			wantErr(t, err, relock.ErrInvalidOption, name)
		}

		if err := s.AddPermits(ctx, 1); err != nil {
			t.Fatal(err)
		}
		held, err := s.AcquireLease(ctx, 1, semaphore.WithWaitTimeout(200*time.Millisecond))
		if err != nil {
			t.Fatalf("AcquireLease with a permit free: %v", err)
		}
		if err := held.Err(); err != nil {
			t.Fatalf("the lease's context ended as AcquireLease returned: %v", err)
		}
		select {
		case <-held.Done():
			t.Fatalf("the lease's context ended after the wait bound: %v", context.Cause(held))
		case <-time.After(time.Second):
		}
		if err := s.ReleaseLease(held); err != nil {
			t.Fatalf("ReleaseLease: %v", err)
		}
		wantValue(t, side, name, "1")
	})
}

// An expiry on the count (an application's, or Redisson's RSemaphore.expire) is kept by
// every relock call that writes the count: acquire, release, AddPermits, Drain, and a
// lease's acquire and release (docs/migration-from-redisson.md: "an expiry is kept by
// every relock call").
func TestCountKeepsItsExpiry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, 15*time.Second)
		s := c.Semaphore("expiring-count")
		mustSet(t, s, 3)
		redistest.MustDo(t, side, "PEXPIRE", s.Name(), "600000")
		var lease context.Context
		for _, call := range []struct {
			what string
			do   func() error
		}{
			{"Acquire", func() error { return s.Acquire(ctx, 1) }},
			{"Release", func() error { return s.Release(ctx, 1) }},
			{"AddPermits", func() error { return s.AddPermits(ctx, 2) }},
			{"AcquireLease", func() (err error) { lease, err = s.AcquireLease(ctx, 1); return err }},
			{"ReleaseLease", func() error { return s.ReleaseLease(lease) }},
			{"Drain", func() error { _, err := s.Drain(ctx); return err }},
		} {
			if err := call.do(); err != nil {
				t.Fatalf("%s: %v", call.what, err)
			}
			if ms := redistest.PTTL(t, side, s.Name()); ms <= 500000 || ms > 600000 {
				t.Errorf("the count's PTTL after %s is %dms; want the expiry kept, about 600000", call.what, ms)
			}
		}
	})
}

// Writes paused past the lease (CLIENT PAUSE WRITE: renewals wait, and the leased permits'
// scores, kept in Redis's time, run out meanwhile): when the pause ends, another client
// takes the permit the lease held, and at that moment the lease's context has already
// ended, with ErrLeaseLost.
func TestLeaseEndsBeforeAWritePausePastItGivesItsPermitAway(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(lease), relock.WithLogger(nil))
		other := relocktest.New(t, b, relock.WithLogger(nil)).Semaphore("lease:paused")
		s := c.Semaphore("lease:paused")
		mustSet(t, s, 1)
		held := acquireLease(t, s, 1)
		// Three leases: the lease's deadline passes well within the pause.
		redistest.MustDo(t, b.Client(t), "CLIENT", "PAUSE", "3000", "WRITE")
		var cause error
		redistest.Eventually(t, 30*time.Second, "another client to take the permit after the pause", func() bool {
			ok, err := other.TryAcquire(redistest.Context(t, 10*time.Second), 1)
			if ok {
				// What the lease's context said the moment another client had its permit.
				cause = context.Cause(held)
			}
			return ok && err == nil
		})
		if !errors.Is(cause, relock.ErrLeaseLost) {
			t.Fatalf("another client took the leased permit while the lease's context said %v; want it ended with ErrLeaseLost", cause)
		}
	})
}

// A Redis restarted without persistence has lost the semaphore, and with it every lease:
// a lease's context ends soon after its client reconnects, not at its next renewal (a
// third of the 30s watchdog timeout), so that it is not live long beside another client
// that set the semaphore up again and took its permit.
func TestRestartEndsLeasesAtReconnect(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithLogger(nil)) // default 30s lease: renewals every 10s
		other := relocktest.New(t, b, relock.WithLogger(nil)).Semaphore("lease:restart")
		s := c.Semaphore("lease:restart")
		mustSet(t, s, 1)
		held := acquireLease(t, s, 1)
		// The restart comes well before the lease's first renewal (10s).
		b.Server.Restart(t)
		redistest.Eventually(t, 30*time.Second, "another client to set the semaphore up again and take its permit", func() bool {
			ctx := redistest.Context(t, 5*time.Second)
			_, _ = other.TrySetPermits(ctx, 1)
			ok, err := other.TryAcquire(ctx, 1)
			return ok && err == nil
		})
		select {
		case <-held.Done():
			if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
				t.Fatalf("cause %v; want ErrLeaseLost", context.Cause(held))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the lease's context is live 5s after another client took its permit on the restarted server; want it ended at reconnect")
		}
	})
}
