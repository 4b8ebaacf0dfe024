package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/javaside"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/semaphore"
)

// Every goroutine relock starts is owned and stopped: none may outlive the tests.
func TestMain(m *testing.M) {
	// Main also stops the Redis Cluster the "cluster" subtests share, and checks for leaked goroutines.
	os.Exit(redistest.Main(m))
}

// Helpers.

// value returns the semaphore key's value as Redis holds it, "(none)" when there is no
// key; it fails t if the key is not a string.
func value(t testing.TB, rc rueidis.Client, key string) string {
	t.Helper()
	v, err := redistest.Do(t, rc, "GET", key).ToString()
	if rueidis.IsRedisNil(err) {
		return "(none)"
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// wantValue fails t unless the semaphore key holds want (a string without expiry).
func wantValue(t testing.TB, rc rueidis.Client, key, want string) {
	t.Helper()
	if got := value(t, rc, key); got != want {
		t.Fatalf("%s = %s; want %s", key, got, want)
	}
	if want == "(none)" {
		return
	}
	if ms := redistest.PTTL(t, rc, key); ms != -1 {
		t.Fatalf("PTTL %s = %d; want -1: the count of permits must not expire", key, ms)
	}
}

// keys returns every key of b, sorted.
func keys(t testing.TB, b *redistest.Backend, rc rueidis.Client) []string {
	t.Helper()
	ks := b.Keys(t, rc, "*")
	slices.Sort(ks)
	return ks
}

// wantKeys fails t unless b holds exactly the keys want, within 10s: waiters that have
// just returned may still be leaving the queue.
func wantKeys(t testing.TB, b *redistest.Backend, rc rueidis.Client, want ...string) {
	t.Helper()
	want = slices.Clone(want)
	slices.Sort(want)
	var got []string
	if !redistest.Await(10*time.Second, func() bool { got = keys(t, b, rc); return slices.Equal(got, want) }) {
		t.Fatalf("keys %q; want %q (queue keys must be gone once nobody waits)", got, want)
	}
}

// queueKey is the Redis queue of relock's waiting clients for the semaphore name
// (package doc), in the layout's prefix form.
func queueKey(name string) string {
	if strings.Contains(name, "{") {
		return "relock_semaphore_queue:" + name
	}
	return "relock_semaphore_queue:{" + name + "}"
}

// deadlinesKey is the zset of by when each of the semaphore name's waiting clients must
// come back (package doc), in the layout's prefix form.
func deadlinesKey(name string) string {
	if strings.Contains(name, "{") {
		return "relock_semaphore_timeout:" + name
	}
	return "relock_semaphore_timeout:{" + name + "}"
}

// channel is the semaphore's channel, Redisson's redisson_sc:{name}.
func channel(name string) string {
	if strings.Contains(name, "{") {
		return "redisson_sc:" + name
	}
	return "redisson_sc:{" + name + "}"
}

// acquireAsync runs s.Acquire(ctx, n) in a goroutine and returns where its error arrives.
func acquireAsync(ctx context.Context, s *semaphore.Weighted, n int64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.Acquire(ctx, n) }()
	return done
}

// parked waits until c has n waiters parked.
func parked(t testing.TB, c *relock.Client, n int, what string) {
	t.Helper()
	redistest.Eventually(t, 10*time.Second, what+" never parked", func() bool { return c.PubSubStats().Waiting == n })
}

// stillWaiting fails t if done delivers within d: the wait must go on. (It cannot fail a
// correct implementation on a slow machine; it only may miss a late wrong return.)
func stillWaiting(t testing.TB, done <-chan error, d time.Duration, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned (%v) while it had to wait", what, err)
	case <-time.After(d):
	}
}

// mustTry runs TryAcquire and fails t unless it reports want without error.
func mustTry(t testing.TB, s *semaphore.Weighted, n int64, want bool) {
	t.Helper()
	got, err := s.TryAcquire(context.Background(), n)
	if err != nil || got != want {
		t.Fatalf("TryAcquire(%d) = %v, %v; want %v, nil", n, got, err, want)
	}
}

// mustSet runs TrySetPermits(n) on a semaphore without a count.
func mustSet(t testing.TB, s *semaphore.Weighted, n int64) {
	t.Helper()
	if ok, err := s.TrySetPermits(context.Background(), n); !ok || err != nil {
		t.Fatalf("TrySetPermits(%d) = %v, %v; want true, nil", n, ok, err)
	}
}

// wantErr checks that err is target, wrapped as *relock.Error naming the semaphore name
// (and so saying it in its text).
func wantErr(t testing.TB, err, target error, name string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v; want errors.Is %v", err, target)
	}
	var le *relock.Error
	if !errors.As(err, &le) || le.Name != name || !strings.Contains(err.Error(), strconv.Quote(name)) {
		t.Fatalf("err = %v (%T); want a *relock.Error naming %q", err, err, name)
	}
}

// 1. Counting.

// The count is Redisson's: a string key <name> without expiry that holds the available
// permits, and nothing else in Redis. TrySetPermits sets it only when there is none;
// AddPermits adds and takes away (below zero too); Drain takes what is there and leaves
// 0; TryAcquire, Acquire and Release move it by exactly their n. On a cluster it runs on a
// name of each master.
//
// Guards against AddPermits ignoring the sign of n, Drain returning the
// count without setting it to 0, TrySetPermits overwriting an existing count.
func TestCount(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c, side := relocktest.New(t, b), b.Client(t)
		ctx := context.Background()
		names := []string{"sem-count:0", "sem-count{tag}"}
		if b.Cluster != nil {
			names = append(b.Cluster.NamesOnEveryMaster(t, "sem-count:"), "sem-count{tag}")
		}
		var all []string
		for _, name := range names {
			s := c.Semaphore(name)
			if s.Name() != name {
				t.Fatalf("Name() = %q; want %q", s.Name(), name)
			}
			avail := func(want int64) {
				t.Helper()
				if n, err := s.AvailablePermits(ctx); n != want || err != nil {
					t.Fatalf("%s: AvailablePermits = %d, %v; want %d", name, n, err, want)
				}
			}
			avail(0)
			wantValue(t, side, name, "(none)")
			mustSet(t, s, 3)
			wantValue(t, side, name, "3")
			if ok, err := s.TrySetPermits(ctx, 5); ok || err != nil {
				t.Fatalf("%s: second TrySetPermits(5) = %v, %v; want false, nil", name, ok, err)
			}
			wantValue(t, side, name, "3")
			avail(3)

			for _, step := range []struct {
				add  int64
				want string
			}{{2, "5"}, {-4, "1"}, {-3, "-2"}, {3, "1"}} {
				if err := s.AddPermits(ctx, step.add); err != nil {
					t.Fatalf("%s: AddPermits(%d): %v", name, step.add, err)
				}
				wantValue(t, side, name, step.want)
				w, _ := strconv.ParseInt(step.want, 10, 64)
				avail(w)
			}
			// Below zero nothing is taken.
			if err := s.AddPermits(ctx, -2); err != nil {
				t.Fatal(err)
			}
			mustTry(t, s, 1, false)
			wantValue(t, side, name, "-1")
			if err := s.AddPermits(ctx, 6); err != nil {
				t.Fatal(err)
			}
			wantValue(t, side, name, "5")

			mustTry(t, s, 2, true)
			wantValue(t, side, name, "3")
			mustTry(t, s, 4, false)
			wantValue(t, side, name, "3")
			if err := s.Acquire(redistest.Context(t, 10*time.Second), 3); err != nil {
				t.Fatalf("%s: Acquire(3) with 3 available: %v", name, err)
			}
			wantValue(t, side, name, "0")
			if err := s.Release(ctx, 4); err != nil {
				t.Fatalf("%s: Release(4) of the 5 taken: %v", name, err)
			}
			wantValue(t, side, name, "4")
			if err := s.Release(ctx, 1); err != nil {
				t.Fatalf("%s: Release(1): %v", name, err)
			}
			wantValue(t, side, name, "5")

			if n, err := s.Drain(ctx); n != 5 || err != nil {
				t.Fatalf("%s: Drain = %d, %v; want 5", name, n, err)
			}
			wantValue(t, side, name, "0")
			avail(0)
			if n, err := s.Drain(ctx); n != 0 || err != nil {
				t.Fatalf("%s: second Drain = %d, %v; want 0", name, n, err)
			}
			wantValue(t, side, name, "0")
			// A count of 0 is a count: TrySetPermits does not set it again.
			if ok, err := s.TrySetPermits(ctx, 2); ok || err != nil {
				t.Fatalf("%s: TrySetPermits(2) on a count of 0 = %v, %v; want false, nil", name, ok, err)
			}
			wantValue(t, side, name, "0")
			all = append(all, name)
		}

		// AddPermits on no count starts from 0, as Redisson's; TrySetPermits(0) sets 0;
		// Drain of no count takes 0 and creates nothing.
		add, zero, none := c.Semaphore("sem-count:add"), c.Semaphore("sem-count:zero"), c.Semaphore("sem-count:none")
		if err := add.AddPermits(ctx, 2); err != nil {
			t.Fatal(err)
		}
		wantValue(t, side, "sem-count:add", "2")
		mustSet(t, zero, 0)
		wantValue(t, side, "sem-count:zero", "0")
		if n, err := none.Drain(ctx); n != 0 || err != nil {
			t.Fatalf("Drain of no count = %d, %v; want 0", n, err)
		}
		all = append(all, "sem-count:add", "sem-count:zero")
		if v := value(t, side, "sem-count:none"); v != "(none)" && v != "0" {
			t.Fatalf("sem-count:none after Drain = %s; want no key (or 0)", v)
		} else if v == "0" {
			all = append(all, "sem-count:none")
		}
		wantKeys(t, b, side, all...)
	})
}

// 2. Wake-ups.

// A waiter is woken by the release that makes its permits available, made by another
// client; and by TrySetPermits and AddPermits of another client, which publish too (as
// Redisson's do). The waiter's client has a watchdog timeout of a minute, so its refresh
// (every 20s) cannot stand in for the wake-up within the 15s bound; and a release that
// leaves too few permits does not let it in.
//
// Guards against a release that does not publish, TrySetPermits that
// does not publish, and an Acquire that takes permits when fewer than n are free.
func TestReleaseWakesWaiterOfAnotherClient(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		holder, side := relocktest.New(t, b), b.Client(t)
		waiter := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		ctx := context.Background()

		t.Run("Release", func(t *testing.T) {
			const name = "sem-wake:release"
			mustSet(t, holder.Semaphore(name), 2)
			mustTry(t, holder.Semaphore(name), 2, true)
			done := acquireAsync(redistest.Context(t, 30*time.Second), waiter.Semaphore(name), 2)
			parked(t, waiter, 1, "the waiter for 2 permits")
			msgs := waiter.PubSubStats().Messages

			// One permit back: the waiter hears it, and must go on waiting for the second.
			if err := holder.Semaphore(name).Release(ctx, 1); err != nil {
				t.Fatal(err)
			}
			redistest.Eventually(t, 10*time.Second, "the waiter's client never heard the release",
				func() bool { return waiter.PubSubStats().Messages > msgs })
			stillWaiting(t, done, 300*time.Millisecond, "Acquire(2) with 1 permit available")
			wantValue(t, side, name, "1")

			if err := holder.Semaphore(name).Release(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := redistest.Recv(t, done, 15*time.Second, "the waiter's Acquire after the release that freed its permits: it was not woken"); err != nil {
				t.Fatalf("waiter: %v", err)
			}
			wantValue(t, side, name, "0")
			if st := waiter.PubSubStats(); st.TimedOut != 0 {
				t.Errorf("waiter's stats %+v: a wait ended by its time bound, not by a release", st)
			}
			if err := waiter.Semaphore(name).Release(ctx, 2); err != nil {
				t.Fatal(err)
			}
			wantValue(t, side, name, "2")
		})

		for _, tc := range []struct {
			name string
			give func(s *semaphore.Weighted) error
		}{
			{"TrySetPermits", func(s *semaphore.Weighted) error {
				ok, err := s.TrySetPermits(ctx, 1)
				if err == nil && !ok {
					err = errors.New("TrySetPermits found a count")
				}
				return err
			}},
			{"AddPermits", func(s *semaphore.Weighted) error { return s.AddPermits(ctx, 1) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				name := "sem-wake:" + tc.name
				done := acquireAsync(redistest.Context(t, 30*time.Second), waiter.Semaphore(name), 1)
				parked(t, waiter, 1, "the waiter on a semaphore without a count")
				if err := tc.give(holder.Semaphore(name)); err != nil {
					t.Fatal(err)
				}
				if err := redistest.Recv(t, done, 15*time.Second, "the waiter's Acquire after "+tc.name+" gave it a permit: it was not woken"); err != nil {
					t.Fatalf("waiter: %v", err)
				}
				wantValue(t, side, name, "0")
				if err := waiter.Semaphore(name).Release(ctx, 1); err != nil {
					t.Fatal(err)
				}
			})
		}
		if st := waiter.PubSubStats(); st.TimedOut != 0 {
			t.Errorf("waiter's stats %+v: a wait ended by its time bound, not by a wake-up", st)
		}
		wantKeys(t, b, side, "sem-wake:release", "sem-wake:TrySetPermits", "sem-wake:AddPermits")
	})
}

// 3. Order.

// A request for all 3 permits, waiting while they are taken, is served before requests
// for 1 that come after it, from three other clients that loop Acquire(1)/Release(1):
// each permit given back while it waits first stays free for it (no small request takes
// it), and it gets all three once the last comes back. The small requests go on after it
// has given them back.
//
// A second case starts the stream of small requests first: they keep the permits busy
// when the large request comes, and must leave the ones they give back to it.
//
// Guards against an acquire that ignores the queue of waiters when enough
// permits are free for its request (Redisson's behaviour): the small requests take each
// permit as it comes back and the large one starves.
func TestLargeRequestNotStarved(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		holder := relocktest.New(t, b)
		ctx := context.Background()

		// stream starts k clients that each loop Acquire(1), a short hold, Release(1)
		// until stop is called; taken counts each client's acquisitions. late counts the
		// acquisitions whose Acquire started and ended while *waiting was true: requests
		// that came after the large request was queued and were served before it.
		var waiting atomic.Bool
		var late atomic.Int64
		stream := func(t *testing.T, name string, k int) (clients []*relock.Client, taken []*atomic.Int64, stop func()) {
			sctx, cancel := context.WithCancel(redistest.Context(t, 2*time.Minute))
			var wg sync.WaitGroup
			for i := range k {
				c := relocktest.New(t, b)
				clients = append(clients, c)
				n := new(atomic.Int64)
				taken = append(taken, n)
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := c.Semaphore(name)
					for {
						after := waiting.Load()
						if err := s.Acquire(sctx, 1); err != nil {
							if sctx.Err() == nil {
								t.Errorf("small request of client %d: %v", i, err)
							}
							return
						}
						if after && waiting.Load() {
							late.Add(1)
						}
						n.Add(1)
						time.Sleep(2 * time.Millisecond)
						if err := s.Release(context.Background(), 1); err != nil {
							t.Errorf("small release of client %d: %v", i, err)
							return
						}
					}
				}()
			}
			stopped := make(chan struct{})
			var once sync.Once
			stop = func() {
				cancel()
				once.Do(func() { go func() { wg.Wait(); close(stopped) }() })
				redistest.Recv(t, stopped, 15*time.Second, "the small requests' end after their contexts ended")
			}
			return clients, taken, stop
		}
		sum := func(taken []*atomic.Int64) int64 {
			var s int64
			for _, n := range taken {
				s += n.Load()
			}
			return s
		}

		t.Run("stream after", func(t *testing.T) {
			const name = "sem-order:after"
			big := relocktest.New(t, b)
			mustSet(t, holder.Semaphore(name), 3)
			mustTry(t, holder.Semaphore(name), 3, true)
			bigDone := acquireAsync(redistest.Context(t, 30*time.Second), big.Semaphore(name), 3)
			parked(t, big, 1, "the large request")

			smalls, taken, stop := stream(t, name, 3)
			defer stop()
			for i, c := range smalls {
				parked(t, c, 1, fmt.Sprintf("small request of client %d", i))
			}
			waiting := append([]*relock.Client{big}, smalls...)
			heard := func() []uint64 {
				var m []uint64
				for _, c := range waiting {
					m = append(m, c.PubSubStats().Messages)
				}
				return m
			}
			for i := 1; i <= 2; i++ {
				before := heard()
				if err := holder.Semaphore(name).Release(ctx, 1); err != nil {
					t.Fatal(err)
				}
				// The client first in line hears the release, tries, and waits again; the
				// others wait on their own channels until they come first (a small
				// request that tried anyway would find the large one ahead).
				redistest.Eventually(t, 10*time.Second, "the first in line never heard the release and parked again", func() bool {
					if sum(taken) > 0 {
						return true
					}
					now := heard()
					if now[0] <= before[0] {
						return false
					}
					for _, c := range waiting {
						if c.PubSubStats().Waiting != 1 {
							return false
						}
					}
					return true
				})
				if n := sum(taken); n > 0 {
					t.Fatalf("after %d permit(s) came back: the small requests took %d while the request for 3 waited first", i, n)
				}
				wantValue(t, side, name, strconv.Itoa(i))
			}
			if err := holder.Semaphore(name).Release(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := redistest.Recv(t, bigDone, 20*time.Second, "the request for 3 permits: starved by the requests for 1"); err != nil {
				t.Fatalf("large request: %v", err)
			}
			if n := sum(taken); n > 0 {
				t.Fatalf("the small requests took %d permits before the request for 3 that came first", n)
			}
			wantValue(t, side, name, "0")
			if err := big.Semaphore(name).Release(ctx, 3); err != nil {
				t.Fatal(err)
			}
			redistest.Eventually(t, 15*time.Second, "the small requests never went on after the large one", func() bool {
				for _, n := range taken {
					if n.Load() < 2 {
						return false
					}
				}
				return true
			})
			stop()
			wantValue(t, side, name, "3")
			wantKeys(t, b, side, name)
		})

		t.Run("stream before", func(t *testing.T) {
			const name = "sem-order:before"
			big := relocktest.New(t, b)
			mustSet(t, holder.Semaphore(name), 3)
			// Six clients for three permits: three are always waiting to take a permit
			// that comes back, so without the order the count hardly ever reaches 3.
			_, taken, stop := stream(t, name, 6)
			defer stop()
			redistest.Eventually(t, 10*time.Second, "the small requests never got going", func() bool { return sum(taken) >= 20 })
			bigDone := acquireAsync(redistest.Context(t, 20*time.Second), big.Semaphore(name), 3)
			// Once the large request is parked its entry is in Redis, ahead of every
			// small request that starts from then on: none of those may be served before
			// it. (It may also find 3 permits free at once and never park.)
			var err error
			var done bool
			redistest.Eventually(t, 10*time.Second, "the request for 3 permits neither parked nor returned", func() bool {
				select {
				case err = <-bigDone:
					done = true
					return true
				default:
				}
				if big.PubSubStats().Waiting == 1 {
					waiting.Store(true)
					return true
				}
				return false
			})
			if !done {
				err = redistest.Recv(t, bigDone, 20*time.Second, "the request for 3 permits among a stream of requests for 1: starved")
			}
			waiting.Store(false)
			if err != nil {
				t.Fatalf("request for 3 permits among a stream of requests for 1: %v", err)
			}
			if n := late.Load(); n > 0 {
				t.Fatalf("%d requests for 1 permit that came after the request for 3 was queued were served before it", n)
			}
			wantValue(t, side, name, "0")
			before := sum(taken)
			if err := big.Semaphore(name).Release(ctx, 3); err != nil {
				t.Fatal(err)
			}
			redistest.Eventually(t, 15*time.Second, "the small requests never went on after the large one",
				func() bool { return sum(taken) > before+6 })
			stop()
			wantValue(t, side, name, "3")
			redistest.Eventually(t, 10*time.Second, "queue "+queueKey(name)+" left behind after the waiters are done",
				func() bool { return !slices.Contains(keys(t, b, side), queueKey(name)) })
		})
	})
}

// TryAcquire does not take permits while a relock waiter is queued, even permits enough
// for its own request: not from another client, nor from the waiter's own client, nor
// the waiter's own permits in a client that holds some. Once the waiter is served and
// gone, TryAcquire takes again.
//
// Guards against a TryAcquire that looks only at the count, and one
// that checks the queue in Redis but not the waiters queued in its own process.
func TestTryAcquireYieldsToWaiters(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-try"
		side := b.Client(t)
		holder, waiter, other := relocktest.New(t, b), relocktest.New(t, b), relocktest.New(t, b)
		ctx := context.Background()
		mustSet(t, holder.Semaphore(name), 2)
		mustTry(t, holder.Semaphore(name), 1, true)
		done := acquireAsync(redistest.Context(t, 30*time.Second), waiter.Semaphore(name), 2)
		parked(t, waiter, 1, "the waiter for 2 permits")
		redistest.Eventually(t, 10*time.Second, "the waiter's client never queued in Redis", func() bool {
			n, err := redistest.Do(t, side, "EXISTS", queueKey(name)).AsInt64()
			return err == nil && n == 1
		})

		mustTry(t, other.Semaphore(name), 1, false)
		mustTry(t, waiter.Semaphore(name), 1, false)
		mustTry(t, holder.Semaphore(name), 1, false)
		wantValue(t, side, name, "1")
		// A plain Acquire comes after the waiter too.
		otherDone := acquireAsync(redistest.Context(t, 30*time.Second), other.Semaphore(name), 1)
		parked(t, other, 1, "the second waiter")
		wantValue(t, side, name, "1")

		if err := holder.Semaphore(name).Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, done, 15*time.Second, "the first waiter's Acquire"); err != nil {
			t.Fatalf("first waiter: %v", err)
		}
		stillWaiting(t, otherDone, 100*time.Millisecond, "the second waiter's Acquire with no permit free")
		if err := waiter.Semaphore(name).Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, otherDone, 15*time.Second, "the second waiter's Acquire"); err != nil {
			t.Fatalf("second waiter: %v", err)
		}
		wantValue(t, side, name, "1")
		if err := other.Semaphore(name).Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		wantKeys(t, b, side, name)
		// Nobody waits: TryAcquire takes again.
		mustTry(t, other.Semaphore(name), 2, true)
		wantValue(t, side, name, "0")

		// The same in one process: the waiter's own client, with no other client queued.
		t.Run("same client", func(t *testing.T) {
			const name = "sem-try:local"
			c := relocktest.New(t, b)
			mustSet(t, c.Semaphore(name), 2)
			mustTry(t, c.Semaphore(name), 1, true)
			done := acquireAsync(redistest.Context(t, 30*time.Second), c.Semaphore(name), 2)
			parked(t, c, 1, "the waiter for 2 permits")
			mustTry(t, c.Semaphore(name), 1, false)
			wantValue(t, side, name, "1")
			if err := c.Semaphore(name).Release(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := redistest.Recv(t, done, 15*time.Second, "the waiter's Acquire"); err != nil {
				t.Fatal(err)
			}
			wantValue(t, side, name, "0")
			if err := c.Semaphore(name).Release(ctx, 2); err != nil {
				t.Fatal(err)
			}
			mustTry(t, c.Semaphore(name), 2, true)
		})
	})
}

// 4. Dead waiters.

// A client whose waiter is first in the queue and then stops answering (its connections
// blackholed by a proxy: it neither refreshes nor leaves, as a crashed process) does not
// keep the permits from the waiter behind it: its entry runs out within its watchdog
// timeout (2s here) and the waiter behind gets the permit well within the 15s bound. The
// dead client's entry goes with it: once the live waiter has released, the queue is gone.
//
// Guards against an acquire script that never skips an expired entry at the
// head of the queue: the live waiter would wait behind the dead one for ever.
func TestDeadWaiterSkipped(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-dead"
		side := b.Client(t)
		holder := relocktest.New(t, b)
		proxy := redistest.StartProxy(t, b.Addr)
		dead := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()},
			relock.WithWatchdogTimeout(timeout), relock.WithTimeout(time.Second), relock.WithLogger(nil))
		live := relocktest.New(t, b, relock.WithWatchdogTimeout(timeout))
		ctx := context.Background()

		mustSet(t, holder.Semaphore(name), 1)
		mustTry(t, holder.Semaphore(name), 1, true)
		deadCtx, killDead := context.WithCancel(redistest.Context(t, time.Minute))
		defer killDead()
		deadDone := acquireAsync(deadCtx, dead.Semaphore(name), 1)
		parked(t, dead, 1, "the soon dead waiter")
		redistest.Eventually(t, 10*time.Second, "the dead waiter's client never queued in Redis", func() bool {
			n, err := redistest.Do(t, side, "EXISTS", queueKey(name)).AsInt64()
			return err == nil && n == 1
		})
		liveDone := acquireAsync(redistest.Context(t, 30*time.Second), live.Semaphore(name), 1)
		parked(t, live, 1, "the live waiter")

		proxy.Blackhole()
		if err := holder.Semaphore(name).Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, liveDone, 15*time.Second, "the live waiter's Acquire behind a dead client's waiter: the dead entry was never skipped"); err != nil {
			t.Fatalf("live waiter: %v", err)
		}
		wantValue(t, side, name, "0")
		if err := live.Semaphore(name).Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		wantValue(t, side, name, "1")
		wantKeys(t, b, side, name)

		// The dead client's waiter gives up (its calls time out against the blackhole).
		killDead()
		if err := redistest.Recv(t, deadDone, 15*time.Second, "the dead client's Acquire after its context ended"); err == nil {
			t.Fatal("the blackholed client's Acquire took a permit")
		}
		wantValue(t, side, name, "1")
	})
}

// The same with the dead client's entry written straight into Redis, as a process that
// crashed while first in the queue leaves it (relock_semaphore_queue:{name}: client ->
// arrival number; relock_semaphore_timeout:{name}: client -> Redis time in ms by which
// it must come back), 2s ahead of Redis's clock: on every backend, the cluster too, a live
// waiter that comes after it gets the free permit once the entry has run out, and the
// dead entry is gone with the queue.
//
// Guards against the same fault as the test before it.
func TestDeadEntrySkipped(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-dead-entry"
		side := b.Client(t)
		live := relocktest.New(t, b, relock.WithWatchdogTimeout(2*time.Second))
		mustSet(t, live.Semaphore(name), 1)
		deadline := redistest.Millis(t, side) + 2000
		const dead = "0d2c8f0e-5b1a-4c6e-9f3d-2a7b8c9d0e1f"
		redistest.MustDo(t, side, "ZADD", "relock_semaphore_queue:{"+name+"}", "1", dead)
		redistest.MustDo(t, side, "ZADD", "relock_semaphore_timeout:{"+name+"}", strconv.FormatInt(deadline, 10), dead)

		if err := live.Semaphore(name).Acquire(redistest.Context(t, 15*time.Second), 1); err != nil {
			t.Fatalf("live waiter behind a dead entry that ran out: %v", err)
		}
		wantValue(t, side, name, "0")
		if err := live.Semaphore(name).Release(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		wantKeys(t, b, side, name)
	})
}

// A client in the queue with no deadline (relock_semaphore_timeout:{name} lost beside a
// queue that lives on: evicted under memory pressure, or restored without it) is a client
// nobody vouches for, and is skipped at once, as an entry that ran out is: a TryAcquire
// takes the permit free behind two such clients, and an Acquire gets one, well within 15s though the
// clients' entries live a minute; the entries are gone with the queue after.
//
// Guards against an acquire script that drops only entries whose deadline passed: an
// entry with none stays first for ever, and every relock client waits behind it until its
// context ends, while the live waiters keep the queue from expiring.
func TestQueueEntryWithoutDeadlineSkipped(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-no-deadline"
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		s := c.Semaphore(name)
		mustSet(t, s, 1)
		const ghost, ghost2 = "6f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b", "7a2f3e4d-5c6b-4a89-9b7c-6d5e4f3a2b1c"
		redistest.MustDo(t, side, "ZADD", queueKey(name), "1", ghost, "2", ghost2) // one behind the other
		mustTry(t, s, 1, true)
		wantKeys(t, b, side, name)

		redistest.MustDo(t, side, "ZADD", queueKey(name), "1", ghost)
		waited := make(chan error, 1)
		go func() { waited <- s.Acquire(redistest.Context(t, 15*time.Second), 1) }()
		if err := s.Release(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, waited, 20*time.Second, "the Acquire behind an entry with no deadline"); err != nil {
			t.Fatalf("Acquire behind an entry with no deadline: %v", err)
		}
		if err := s.Release(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		wantKeys(t, b, side, name)
	})
}

// A client that comes first in line because the client ahead of it was found dead, when
// no permit is free, is told so at once (lua/semaphore_acquire.lua) and listens for
// releases from then on: the next release reaches it well within its refresh period (20s,
// its watchdog timeout being a minute), beyond the 12s bound. Another client's single
// attempt is what finds the dead entry here.
//
// Guards against a message to the new first that carries the permits free, 0, which
// wakes nobody: the client would go on listening on its own channel, deaf to the release,
// until its refresh.
func TestNewFirstListensForReleasesWithNoneFree(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-new-first-none-free"
		const dead = "5e0b7c1d-2f3a-4b5c-8d6e-7f8091a2b3c4"
		side := b.Client(t)
		holder := relocktest.New(t, b)
		live := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		mustSet(t, holder.Semaphore(name), 1)
		mustTry(t, holder.Semaphore(name), 1, true)
		deadline := redistest.Millis(t, side) + 3000
		redistest.MustDo(t, side, "ZADD", queueKey(name), "1", dead)
		redistest.MustDo(t, side, "ZADD", deadlinesKey(name), strconv.FormatInt(deadline, 10), dead)

		liveDone := acquireAsync(redistest.Context(t, 30*time.Second), live.Semaphore(name), 1)
		parked(t, live, 1, "the waiter behind the soon dead entry")
		redistest.Eventually(t, 10*time.Second, "the live client queued behind the dead entry", func() bool {
			return len(redistest.Members(t, side, queueKey(name))) == 2
		})
		redistest.Eventually(t, 10*time.Second, "Redis's time past the dead entry's deadline", func() bool {
			return redistest.Millis(t, side) > deadline
		})
		mustTry(t, holder.Semaphore(name), 1, false)
		if q := redistest.Members(t, side, queueKey(name)); len(q) != 1 || q[0] == dead {
			t.Fatalf("queue %v after an attempt found the dead entry; want the live client alone", q)
		}
		if err := holder.Semaphore(name).Release(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, liveDone, 12*time.Second, "the waiter that came first with no permit free, after a release"); err != nil {
			t.Fatalf("live waiter: %v", err)
		}
		wantValue(t, side, name, "0")
	})
}

// Close ends the client's waiters with ErrClosed and they leave the queue: the next
// client's waiter is served at once, and no queue key is left (the calls after Close:
// TestCallsAfterCloseChangeNothing).
//
// Guards against a waiter that returns on Close without leaving the Redis
// queue: the other client's waiter would wait behind it until its entry ran out (a
// minute here, beyond the 15s bound).
func TestCloseEndsWaiters(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-close"
		side := b.Client(t)
		holder := relocktest.New(t, b)
		closing := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		next := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		ctx := context.Background()
		mustSet(t, holder.Semaphore(name), 1)
		mustTry(t, holder.Semaphore(name), 1, true)
		closingDone := acquireAsync(redistest.Context(t, 30*time.Second), closing.Semaphore(name), 1)
		parked(t, closing, 1, "the waiter of the closing client")
		nextDone := acquireAsync(redistest.Context(t, 30*time.Second), next.Semaphore(name), 1)
		parked(t, next, 1, "the waiter of the next client")

		if err := closing.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		err := redistest.Recv(t, closingDone, 15*time.Second, "the closing client's waiter")
		wantErr(t, err, relock.ErrClosed, name)
		if err := holder.Semaphore(name).Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, nextDone, 15*time.Second, "the next client's waiter, behind a closed client's"); err != nil {
			t.Fatalf("next waiter: %v", err)
		}
		if err := next.Semaphore(name).Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		wantValue(t, side, name, "1")
		wantKeys(t, b, side, name)
	})
}

// Close ends every waiter of the client with ErrClosed, also those queued in the
// process behind its first waiter: none of them takes permits or joins the queue after
// Close. With a permit free, the first waiter asks for 2 and the second for 1: the second
// must not take it once the first has gone. With none free, the second must not queue.
//
// Guards against a waiter queued in memory that, handed the turn by a first
// waiter that returned ErrClosed, makes its attempt anyway: it would take the free
// permit after Close, a permit nobody can give back, or join the queue.
func TestCloseEndsWaitersInProcess(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		holder := relocktest.New(t, b)
		for _, tc := range []struct {
			name  string
			first int64  // permits the first waiter asks for; the second asks for 1
			held  bool   // the holder has the one permit
			want  string // the count at the end
		}{
			{"permit free", 2, false, "1"},
			{"none free", 1, true, "0"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				name := "sem-close:local:" + strings.ReplaceAll(tc.name, " ", "-")
				c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
				mustSet(t, holder.Semaphore(name), 1)
				if tc.held {
					mustTry(t, holder.Semaphore(name), 1, true)
				}
				firstDone := acquireAsync(redistest.Context(t, 30*time.Second), c.Semaphore(name), tc.first)
				parked(t, c, 1, "the first waiter")
				secondDone := acquireAsync(redistest.Context(t, 30*time.Second), c.Semaphore(name), 1)
				// The second waiter queues in memory; nothing shows it but its not returning.
				stillWaiting(t, secondDone, 200*time.Millisecond, "the second waiter, behind the first")

				if err := c.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				wantErr(t, redistest.Recv(t, firstDone, 15*time.Second, "the first waiter after Close"), relock.ErrClosed, name)
				err := redistest.Recv(t, secondDone, 15*time.Second, "the second waiter after Close")
				if err == nil {
					t.Fatalf("the second waiter's Acquire returned nil after Close: it took a permit (%s = %s)", name, value(t, side, name))
				}
				wantErr(t, err, relock.ErrClosed, name)
				wantValue(t, side, name, tc.want)
				redistest.Eventually(t, 10*time.Second, "queue "+queueKey(name)+" left behind by a closed client",
					func() bool { return !slices.Contains(keys(t, b, side), queueKey(name)) })
			})
		}
	})
}

// 5. Release accounting.

// A client releases only the permits it took: more is refused with ErrNotHeld naming the
// semaphore, and nothing changes in Redis (no count, no message); another client, or
// another semaphore, cannot release them; permits drained are not the client's. Release
// after TryAcquire and after Acquire works, through any Weighted of the client for that
// name, and with a context that has ended.
//
// Guards against a Release that does not check the permits the client holds
// (it would add permits nobody took), and a Release that follows ctx, so that a
// cancelled context keeps the permits from coming back.
func TestReleaseAccounting(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-release"
		side := b.Client(t)
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		ctx := context.Background()
		s := c.Semaphore(name)
		mustSet(t, s, 5)
		l := b.Listen(t, channel(name))
		mustTry(t, s, 2, true)
		wantValue(t, side, name, "3")

		refused := func(w *semaphore.Weighted, n int64, what string) {
			t.Helper()
			redistest.Unchanged(t, side, name, func() {
				if err := w.Release(ctx, n); !errors.Is(err, relock.ErrNotHeld) {
					t.Fatalf("%s: Release(%d) = %v; want ErrNotHeld", what, n, err)
				} else {
					wantErr(t, err, relock.ErrNotHeld, w.Name())
				}
			})
		}
		refused(s, 3, "2 permits held")
		refused(other.Semaphore(name), 1, "another client, no permit held")
		refused(c.Semaphore(name+":other"), 1, "another semaphore of the client")
		wantKeys(t, b, side, name)

		// Through another Weighted of the same client and name.
		if err := c.Semaphore(name).Release(ctx, 1); err != nil {
			t.Fatalf("Release(1) of 2 held: %v", err)
		}
		wantValue(t, side, name, "4")
		if err := s.Release(ctx, 1); err != nil {
			t.Fatalf("Release(1) of 1 held: %v", err)
		}
		wantValue(t, side, name, "5")
		refused(s, 1, "none held any more")

		// After Acquire, released with a context that has ended.
		if err := s.Acquire(redistest.Context(t, 10*time.Second), 2); err != nil {
			t.Fatal(err)
		}
		wantValue(t, side, name, "3")
		ended, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Release(ended, 2); err != nil {
			t.Fatalf("Release with a cancelled context: %v", err)
		}
		wantValue(t, side, name, "5")
		expired, cancel2 := context.WithTimeout(ctx, -time.Second)
		defer cancel2()
		mustTry(t, s, 1, true)
		if err := s.Release(expired, 1); err != nil {
			t.Fatalf("Release with an expired context: %v", err)
		}
		wantValue(t, side, name, "5")

		// Drained permits are nobody's.
		if n, err := s.Drain(ctx); n != 5 || err != nil {
			t.Fatalf("Drain = %d, %v; want 5", n, err)
		}
		refused(s, 1, "after Drain")
		wantValue(t, side, name, "0")

		// The releases published the new count, the refused ones nothing: 4, 5, 3+2=5, 5.
		redistest.Eventually(t, 10*time.Second, "the releases' messages", func() bool { return len(l.Messages()) >= 4 })
		if msgs := l.Messages(); !slices.Equal(msgs, []string{"4", "5", "5", "5"}) {
			t.Fatalf("messages on %s: %q; want the count after each release that went through: 4, 5, 5, 5", channel(name), msgs)
		}
	})
}

// An Acquire that gives up takes nothing, so the client holds nothing by it (package doc,
// Permits held): a waiter whose context ends while it waits for permits that never come
// leaves the client unable to release them, and the count as it was.
//
// Guards against counting the permits of an Acquire as held whether or not its wait
// took them: a Release after a failed wait would then add permits nobody took.
func TestFailedAcquireHoldsNothing(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-release:failed-wait"
		side := b.Client(t)
		c := relocktest.New(t, b)
		ctx := context.Background()
		s := c.Semaphore(name)
		mustSet(t, s, 1)

		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		err := redistest.Recv(t, acquireAsync(wctx, s, 2), 15*time.Second, "Acquire(2) with 1 permit, whose context ends")
		wantErr(t, err, context.DeadlineExceeded, name)
		wantValue(t, side, name, "1")

		redistest.Unchanged(t, side, name, func() {
			wantErr(t, s.Release(ctx, 2), relock.ErrNotHeld, name)
			wantErr(t, s.Release(ctx, 1), relock.ErrNotHeld, name)
		})
		wantKeys(t, b, side, name)
	})
}

// 6. Bad input.

// Counts out of range fail with ErrInvalidCount naming the semaphore, change nothing and
// queue nothing: Acquire, TryAcquire and Release of 0 or fewer permits or of 2^53 or more
// (the most a semaphore counts is 2^53-1: TestCountsAreExact), TrySetPermits below 0 or
// above 2^53-1, AddPermits of 0 or beyond ±(2^53-1).
//
// Guards against Acquire accepting n = 0 (it would return at once, and
// Release(0) would be refused only by the held count), AddPermits(0) accepted, and a
// request for 2^53+1 permits that a count of 2^53 would satisfy (the scripts' doubles read
// both as 2^53), leaving -1.
func TestInvalidCount(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-count-bad"
		side := b.Client(t)
		c := relocktest.New(t, b)
		ctx := context.Background()
		s := c.Semaphore(name)
		mustSet(t, s, 2)
		mustTry(t, s, 1, true)
		for _, n := range []int64{0, -1, -1 << 62, 1 << 53, 1<<53 + 1, math.MaxInt64} {
			for _, op := range []struct {
				name string
				call func() error
			}{
				{"Acquire", func() error { return s.Acquire(redistest.Context(t, 5*time.Second), n) }},
				{"TryAcquire", func() error {
					ok, err := s.TryAcquire(ctx, n)
					if ok {
						t.Errorf("TryAcquire(%d) reported true", n)
					}
					return err
				}},
				{"Release", func() error { return s.Release(ctx, n) }},
			} {
				t.Run(fmt.Sprintf("%s(%d)", op.name, n), func(t *testing.T) {
					redistest.Unchanged(t, side, name, func() { wantErr(t, op.call(), relock.ErrInvalidCount, name) })
				})
			}
		}
		for _, n := range []int64{-1, 1 << 53, math.MaxInt64} {
			t.Run(fmt.Sprintf("TrySetPermits(%d)", n), func(t *testing.T) {
				const fresh = "sem-count-bad:fresh"
				ok, err := c.Semaphore(fresh).TrySetPermits(ctx, n)
				if ok {
					t.Errorf("TrySetPermits(%d) reported true", n)
				}
				wantErr(t, err, relock.ErrInvalidCount, fresh)
				wantValue(t, side, fresh, "(none)")
			})
		}
		for _, n := range []int64{0, 1 << 53, -1 << 53, math.MaxInt64, math.MinInt64} {
			t.Run(fmt.Sprintf("AddPermits(%d)", n), func(t *testing.T) {
				redistest.Unchanged(t, side, name, func() { wantErr(t, s.AddPermits(ctx, n), relock.ErrInvalidCount, name) })
			})
		}
		wantKeys(t, b, side, name)
		// The permit held is still the client's: nothing was taken or given back.
		if err := s.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		wantValue(t, side, name, "2")
	})
}

// A key that holds anything but a whole number (a hash, a list, a set, a sorted set, a
// string that is no whole number) is refused by every method with ErrWrongType naming the
// semaphore, and left as it was; nothing is queued.
//
// Guards against scripts that read a non-number string as 0 (Lua tonumber
// gives nil) or as no count, so that TrySetPermits or AddPermits overwrite it.
func TestWrongType(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b)
		ctx := context.Background()
		var all []string
		for i, data := range [][]string{
			{"HSET", "", "f", "v"},
			{"RPUSH", "", "a", "b"},
			{"SADD", "", "m"},
			{"ZADD", "", "1", "m"},
			{"SET", "", "abc"},
			{"SET", "", "1.5"},
			{"SET", "", ""},
		} {
			name := fmt.Sprintf("sem-wrong:%d", i)
			data[1] = name
			redistest.MustDo(t, side, data...)
			all = append(all, name)
			s := c.Semaphore(name)
			for _, op := range []struct {
				name string
				call func() error
			}{
				{"Acquire", func() error { return s.Acquire(redistest.Context(t, 5*time.Second), 1) }},
				{"TryAcquire", func() error { _, err := s.TryAcquire(ctx, 1); return err }},
				{"TrySetPermits", func() error { _, err := s.TrySetPermits(ctx, 1); return err }},
				{"AddPermits", func() error { return s.AddPermits(ctx, 1) }},
				{"AddPermits(-1)", func() error { return s.AddPermits(ctx, -1) }},
				{"AvailablePermits", func() error { _, err := s.AvailablePermits(ctx); return err }},
				{"Drain", func() error { _, err := s.Drain(ctx); return err }},
			} {
				t.Run(fmt.Sprintf("%s %q/%s", data[0], data[2:], op.name), func(t *testing.T) {
					redistest.Unchanged(t, side, name, func() { wantErr(t, op.call(), relock.ErrWrongType, name) })
				})
			}
		}
		// Release of permits held, after the key changed under them.
		t.Run("Release", func(t *testing.T) {
			const name = "sem-wrong:release"
			s := c.Semaphore(name)
			mustSet(t, s, 2)
			mustTry(t, s, 1, true)
			redistest.MustDo(t, side, "SET", name, "abc")
			redistest.Unchanged(t, side, name, func() { wantErr(t, s.Release(ctx, 1), relock.ErrWrongType, name) })
			redistest.MustDo(t, side, "SET", name, "1")
			// The refused release gave nothing back: the permit is still held.
			if err := s.Release(ctx, 1); err != nil {
				t.Fatalf("Release after the count came back: %v", err)
			}
			wantValue(t, side, name, "2")
		})
		wantKeys(t, b, side, append(all, "sem-wrong:release")...)
	})
}

// The semaphore's queue and deadlines may hold data of another type (an application's key,
// debris). Every acquisition either works, with that data as it was, or is refused with
// ErrWrongType naming the semaphore and changes nothing at all: not the count, not the
// leased permits (a lease that ran out is put back only by a call that goes through), not
// the queue. The semaphore has no permits, so that each acquisition reaches the queue's
// upkeep, and a lease of a crashed client that ran out, which the upkeep would put back.
//
// Guards against semaphore_acquire.lua putting the lease back into the count and only then
// failing on the deadlines: the caller told its Acquire was refused, the count moved.
func TestAuxKeysOfAnotherType(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b)
		ctx := context.Background()
		i := 0
		for _, aux := range []struct {
			what string
			key  func(string) string
		}{{"queue", queueKey}, {"deadlines", deadlinesKey}} {
			for _, data := range [][]string{{"SET", "", "v"}, {"HSET", "", "f", "v"}, {"RPUSH", "", "a"}} {
				s := c.Semaphore("")
				for _, op := range []struct {
					name string
					call func() error
				}{
					{"Acquire", func() error { return s.Acquire(redistest.Context(t, 5*time.Second), 1) }},
					{"TryAcquire", func() error { _, err := s.TryAcquire(ctx, 1); return err }},
					{"AcquireLease", func() error {
						_, err := s.AcquireLease(ctx, 1, semaphore.WithWaitTimeout(time.Second))
						return err
					}},
					{"TryAcquireLease", func() error { _, _, err := s.TryAcquireLease(ctx, 1); return err }},
				} {
					i++
					name := fmt.Sprintf("sem-aux:%d", i)
					s = c.Semaphore(name)
					t.Run(fmt.Sprintf("%s %s/%s", aux.what, data[0], op.name), func(t *testing.T) {
						mustSet(t, s, 0)
						// A crashed client's lease, run out a while ago: an id of 16 bytes.
						redistest.MustDo(t, side, "ZADD", leasesKey(name), "1", "0123456789abcdef")
						k := aux.key(name)
						d := slices.Clone(data)
						d[1] = k
						redistest.MustDo(t, side, d...)
						count, leases := redistest.Snapshot(t, side, name), redistest.Snapshot(t, side, leasesKey(name))
						redistest.Unchanged(t, side, k, func() {
							err := op.call()
							if err == nil {
								t.Fatalf("%s of a semaphore without permits: nil", op.name)
							}
							if errors.Is(err, relock.ErrWrongType) {
								wantErr(t, err, relock.ErrWrongType, name)
								if now := redistest.Snapshot(t, side, name); now != count {
									t.Fatalf("%s refused with %v, but the count went from %s to %s", op.name, err, count, now)
								}
								if now := redistest.Snapshot(t, side, leasesKey(name)); now != leases {
									t.Fatalf("%s refused with %v, but the leased permits went from %s to %s", op.name, err, leases, now)
								}
							}
						})
					})
				}
			}
		}
	})
}

// A string that reads like a number but is not an integer to Redis (INCRBY and DECRBY
// refuse it, so Redisson's release fails on it too): a sign "+", leading zeros, "-0", or
// beyond 64 bits. No method may treat it as a count while another refuses it, answer
// with a raw Redis error, or write over it: each refuses it with ErrWrongType and leaves
// it as it was, AvailablePermits included.
//
// Guards against the counting scripts' count() and the Go reader of AvailablePermits
// accepting other strings than Redis's own integer parser does (the Go reader
// accepting "+5"; S23: count.lua taking leading zeros, which DECRBY then refuses).
func TestCountNotARedisInteger(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b)
		ctx := context.Background()
		var all []string
		for i, v := range []string{"+5", "007", "-0", "99999999999999999999", "-99999999999999999999"} {
			name := fmt.Sprintf("sem-not-int:%d", i)
			all = append(all, name)
			redistest.MustDo(t, side, "SET", name, v)
			s := c.Semaphore(name)
			for _, op := range []struct {
				name string
				call func() error
			}{
				{"AvailablePermits", func() error { _, err := s.AvailablePermits(ctx); return err }},
				{"TryAcquire", func() error { _, err := s.TryAcquire(ctx, 1); return err }},
				{"Acquire", func() error { return s.Acquire(redistest.Context(t, 5*time.Second), 1) }},
				{"TrySetPermits", func() error { _, err := s.TrySetPermits(ctx, 1); return err }},
				{"AddPermits", func() error { return s.AddPermits(ctx, 1) }},
				{"Drain", func() error { _, err := s.Drain(ctx); return err }},
			} {
				t.Run(fmt.Sprintf("%q/%s", v, op.name), func(t *testing.T) {
					redistest.Unchanged(t, side, name, func() { wantErr(t, op.call(), relock.ErrWrongType, name) })
				})
			}
		}
		wantKeys(t, b, side, all...)
	})
}

// Invalid names fail every method with ErrInvalidName naming the name, and nothing is
// written: no name, braces whose keys would not share a slot, "{x}" (which would share
// x's queue and channel), a name that is another semaphore's queue key.
//
// Guards against the semaphore not validating names: "{x}" would wait in x's
// queue and "relock_semaphore_queue:{x}" would write a count into x's queue key; and
// against a count refused before the name, which hides the name's error.
func TestInvalidName(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b)
		ctx := context.Background()
		mustSet(t, c.Semaphore("x"), 1)
		for _, name := range []string{"", "a{b", "a}b", "a{}b", "{x}", "relock_semaphore_queue:{x}", "relock_semaphore_timeout:{x}"} {
			s := c.Semaphore(name)
			if s.Name() != name {
				t.Errorf("Name() = %q; want %q", s.Name(), name)
			}
			for _, op := range []struct {
				name string
				call func() error
			}{
				{"Acquire", func() error { return s.Acquire(redistest.Context(t, 5*time.Second), 1) }},
				{"TryAcquire", func() error { _, err := s.TryAcquire(ctx, 1); return err }},
				{"Release", func() error { return s.Release(ctx, 1) }},
				{"TrySetPermits", func() error { _, err := s.TrySetPermits(ctx, 1); return err }},
				{"AddPermits", func() error { return s.AddPermits(ctx, 1) }},
				{"AvailablePermits", func() error { _, err := s.AvailablePermits(ctx); return err }},
				{"Drain", func() error { _, err := s.Drain(ctx); return err }},
				// A count out of range does not hide the name's error: every method of
				// such a semaphore fails with ErrInvalidName.
				{"Acquire(0)", func() error { return s.Acquire(redistest.Context(t, 5*time.Second), 0) }},
				{"TryAcquire(0)", func() error { _, err := s.TryAcquire(ctx, 0); return err }},
				{"Release(0)", func() error { return s.Release(ctx, 0) }},
				{"TrySetPermits(-1)", func() error { _, err := s.TrySetPermits(ctx, -1); return err }},
				{"AddPermits(0)", func() error { return s.AddPermits(ctx, 0) }},
			} {
				t.Run(fmt.Sprintf("%q/%s", name, op.name), func(t *testing.T) {
					wantErr(t, op.call(), relock.ErrInvalidName, name)
				})
			}
		}
		wantKeys(t, b, side, "x")
		wantValue(t, side, "x", "1")
	})
}

// 7. Contexts.

// An Acquire whose context has ended before the call takes nothing and queues nothing,
// whether permits are free or not, and its error matches ctx.Err().
//
// Guards against an Acquire that tries once before looking at ctx (it would
// take the free permits and return nil).
func TestAcquireEndedContext(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b)
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		expired, cancel2 := context.WithTimeout(context.Background(), -time.Second)
		defer cancel2()
		for _, free := range []int64{3, 0} {
			name := fmt.Sprintf("sem-ended:%d", free)
			s := c.Semaphore(name)
			mustSet(t, s, free)
			for _, ctx := range []context.Context{cancelled, expired} {
				redistest.Unchanged(t, side, name, func() {
					err := s.Acquire(ctx, 1)
					if !errors.Is(err, ctx.Err()) {
						t.Fatalf("%s: Acquire with an ended context (%v) = %v; want errors.Is ctx.Err()", name, ctx.Err(), err)
					}
					wantErr(t, err, ctx.Err(), name)
				})
			}
		}
		wantKeys(t, b, side, "sem-ended:3", "sem-ended:0")
		if st := c.PubSubStats(); st.Waiting != 0 {
			t.Fatalf("stats %+v: a waiter is parked", st)
		}
	})
}

// A waiter whose context ends returns an error matching ctx.Err(), takes nothing, and
// leaves the queue at once: the waiter behind it, which its request for more permits
// than there are was holding back (as x/sync's semaphore does), is served without
// waiting for the gone entry to run out (a minute here; the bound is 15s). Both when the
// two waiters are in different clients (the queue in Redis) and in the same client (the
// queue in memory).
//
// Guards against a waiter that returns on ctx without removing its queue
// entry (or not waking the next), which holds the next waiter back until the entry
// expires.
func TestWaiterContextEnds(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		holder := relocktest.New(t, b)
		ctx := context.Background()
		for _, same := range []bool{false, true} {
			mode := map[bool]string{false: "other client", true: "same client"}[same]
			t.Run(mode, func(t *testing.T) {
				name := "sem-ctx:" + strings.ReplaceAll(mode, " ", "-")
				first := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
				second := first
				if !same {
					second = relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
				}
				mustSet(t, holder.Semaphore(name), 2)
				mustTry(t, holder.Semaphore(name), 2, true)
				firstCtx, cancelFirst := context.WithCancel(redistest.Context(t, time.Minute))
				defer cancelFirst()
				firstDone := acquireAsync(firstCtx, first.Semaphore(name), 5)
				parked(t, first, 1, "the waiter for 5 permits")
				secondDone := acquireAsync(redistest.Context(t, 30*time.Second), second.Semaphore(name), 1)
				if !same {
					parked(t, second, 1, "the waiter for 1 permit")
				}
				// Both permits back: the second waiter must still wait behind the first.
				if err := holder.Semaphore(name).Release(ctx, 2); err != nil {
					t.Fatal(err)
				}
				stillWaiting(t, secondDone, 300*time.Millisecond, "the waiter for 1 permit behind the waiter for 5")
				wantValue(t, side, name, "2")

				cancelFirst()
				err := redistest.Recv(t, firstDone, 15*time.Second, "the first waiter's Acquire after its context ended")
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("first waiter: %v; want errors.Is context.Canceled", err)
				}
				wantErr(t, err, context.Canceled, name)
				if err := redistest.Recv(t, secondDone, 15*time.Second, "the second waiter, held back by a waiter that has gone"); err != nil {
					t.Fatalf("second waiter: %v", err)
				}
				wantValue(t, side, name, "1")
				if err := second.Semaphore(name).Release(ctx, 1); err != nil {
					t.Fatal(err)
				}
				wantValue(t, side, name, "2")
				redistest.Eventually(t, 10*time.Second, "queue "+queueKey(name)+" left behind after both waiters are done",
					func() bool { return !slices.Contains(keys(t, b, side), queueKey(name)) })
			})
		}
		wantKeys(t, b, side, "sem-ctx:other-client", "sem-ctx:same-client")
	})
}

// 8. Redisson.

// redisson is a Java service's Redisson client of the semaphore name, on a raw rueidis
// client.
type redisson struct {
	java *javaside.Java
	rc   rueidis.Client
	name string
}

func newRedisson(b *redistest.Backend, rc rueidis.Client, name string) *redisson {
	// SPUBLISH on a cluster: relock's default on a Redis 7 cluster, and Redisson's sharded mode.
	return &redisson{java: javaside.New(rc, b.Cluster != nil), rc: rc, name: name}
}

// publish is the command r's releases publish with.
func (r *redisson) publish() string {
	if r.java.Sharded() {
		return "spublish"
	}
	return "publish"
}

func (r *redisson) tryAcquire(t testing.TB, n int64) bool {
	t.Helper()
	ok, err := r.java.TryAcquire(redistest.Context(t, 10*time.Second), r.name, n)
	if err != nil {
		t.Fatalf("Redisson tryAcquire(%d): %v", n, err)
	}
	return ok
}

func (r *redisson) releaseN(t testing.TB, n int64) {
	t.Helper()
	if _, err := r.java.Release(redistest.Context(t, 10*time.Second), r.name, n); err != nil {
		t.Fatalf("Redisson release(%d): %v", n, err)
	}
}

// subscribe subscribes a connection of its own to the semaphore's channel, as Redisson's
// waiter does, and returns the messages it hears, once the subscription is confirmed.
func (r *redisson) subscribe(t testing.TB) <-chan string {
	t.Helper()
	msgs := make(chan string, 100)
	subscribed := make(chan struct{})
	var once sync.Once
	dc, cancel := r.rc.Dedicate()
	t.Cleanup(cancel)
	dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) {
			select {
			case msgs <- m.Message:
			default:
			}
		},
		OnSubscription: func(rueidis.PubSubSubscription) { once.Do(func() { close(subscribed) }) },
	})
	cmd := dc.B().Subscribe().Channel(channel(r.name)).Build()
	if r.java.Sharded() {
		cmd = dc.B().Ssubscribe().Channel(channel(r.name)).Build()
	}
	if err := dc.Do(redistest.Context(t, 10*time.Second), cmd).Error(); err != nil {
		t.Fatalf("subscribe %s: %v", channel(r.name), err)
	}
	redistest.Recv(t, subscribed, 10*time.Second, "the confirmation of the subscription to "+channel(r.name))
	return msgs
}

// relock and Redisson share a semaphore by its name: each sees the other's permits taken
// and given back, a relock waiter (whose refresh comes only every 20s) is woken by a
// Redisson release, and a Redisson waiter subscribed to redisson_sc:{name} hears the new
// count that a relock Release publishes, and takes the permits. Also for a name with a
// hash tag, whose channel is redisson_sc:name.
//
// Guards against relock publishing on another channel than Redisson's, and
// relock's release publishing something other than the new count (Redisson reads
// the message as the permits now available).
func TestRedissonShares(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		ctx := context.Background()
		for _, name := range []string{"sem-redisson", "sem-redisson{tag}"} {
			t.Run(name, func(t *testing.T) {
				r := newRedisson(b, b.Client(t), name)
				s := c.Semaphore(name)
				mustSet(t, s, 3)
				if !r.tryAcquire(t, 2) {
					t.Fatal("Redisson tryAcquire(2) of 3 failed")
				}
				if n, err := s.AvailablePermits(ctx); n != 1 || err != nil {
					t.Fatalf("AvailablePermits after Redisson took 2 = %d, %v; want 1", n, err)
				}

				// A relock waiter woken by a Redisson release.
				done := acquireAsync(redistest.Context(t, 30*time.Second), s, 3)
				parked(t, c, 1, "the relock waiter for 3 permits")
				r.releaseN(t, 2)
				if err := redistest.Recv(t, done, 15*time.Second, "the relock waiter after a Redisson release: not woken"); err != nil {
					t.Fatalf("relock waiter: %v", err)
				}
				wantValue(t, side, name, "0")
				if r.tryAcquire(t, 1) {
					t.Fatal("Redisson tryAcquire(1) succeeded while relock holds all 3 permits")
				}

				// A Redisson waiter woken by relock releases, with the count.
				msgs := r.subscribe(t)
				if r.tryAcquire(t, 2) {
					t.Fatal("Redisson tryAcquire(2) succeeded with no permit free")
				}
				if err := s.Release(ctx, 1); err != nil {
					t.Fatal(err)
				}
				if m := redistest.Recv(t, msgs, 10*time.Second, "the Redisson waiter's message after a relock release"); m != "1" {
					t.Fatalf("message after relock's Release(1) from 0: %q; want the new count, 1", m)
				}
				if err := s.Release(ctx, 2); err != nil {
					t.Fatal(err)
				}
				if m := redistest.Recv(t, msgs, 10*time.Second, "the Redisson waiter's message after a relock release"); m != "3" {
					t.Fatalf("message after relock's Release(2) from 1: %q; want the new count, 3", m)
				}
				if !r.tryAcquire(t, 2) {
					t.Fatal("Redisson tryAcquire(2) of 3 failed after relock released them")
				}
				wantValue(t, side, name, "1")
				select {
				case m := <-msgs:
					t.Fatalf("another message %q after the releases", m)
				case <-time.After(100 * time.Millisecond):
				}
			})
		}
		wantKeys(t, b, side, "sem-redisson", "sem-redisson{tag}")
		if st := c.PubSubStats(); st.TimedOut != 0 {
			t.Errorf("stats %+v: a relock wait ended by its time bound, not by Redisson's release", st)
		}
	})
}

// A change of the count that leaves no permit available publishes nothing, as the release
// script promises: Redisson's waiters take the message as that many wake-ups, and a count
// below one wakes none. So the first message a Redisson waiter hears, after a count set to
// 0, taken below 0 and brought back to 0, is the release that leaves one permit free.
func TestNoPermitNoMessage(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-quiet"
		side := b.Client(t)
		s := relocktest.New(t, b).Semaphore(name)
		msgs := newRedisson(b, side, name).subscribe(t)
		mustSet(t, s, 0)
		for _, add := range []int64{-2, 2, 1} {
			if err := s.AddPermits(context.Background(), add); err != nil {
				t.Fatalf("AddPermits(%d): %v", add, err)
			}
		}
		wantValue(t, side, name, "1")
		if m := redistest.Recv(t, msgs, 10*time.Second, "the count published when a permit became free"); m != "1" {
			t.Fatalf("first message on %s = %q; want 1, the first count with a permit free", channel(name), m)
		}
	})
}

// Drain of a count below zero takes nothing and leaves the count as it is: it answers 0,
// and does not raise the count to 0, which would add permits nobody gave back.
func TestDrainBelowZero(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-drain-negative"
		side := b.Client(t)
		s := relocktest.New(t, b).Semaphore(name)
		if err := s.AddPermits(context.Background(), -2); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Drain(context.Background()); n != 0 || err != nil {
			t.Fatalf("Drain of a count of -2 = %d, %v; want 0", n, err)
		}
		wantValue(t, side, name, "-2")
	})
}

// Counts are exact: a semaphore counts from -(2^53-1) to 2^53-1, what the scripts' numbers
// hold exactly, and every answer is the count in Redis to the permit. A call that asks for
// more permits than that is refused with ErrInvalidCount naming the semaphore
// (TestInvalidCount), and so is an AddPermits that would take the count out of that range;
// nothing is written. (A lease given back onto such a count: TestLeaseReturnRefusesForeignCount.) A key that
// holds a whole number beyond the range (written by something else: Redis takes any 64-bit
// number) is refused the same way by every method and left as it is.
//
// Guards against counts read as floating-point numbers: a semaphore set to 2^63-1 that
// reports -2^63 permits, a TrySetPermits(2^63-1) that sets the count and answers false, an
// AddPermits whose sum is checked in doubles with a number beyond the range.
func TestCountsAreExact(t *testing.T) {
	const most = 1<<53 - 1
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b)
		ctx := context.Background()

		t.Run("at the bounds", func(t *testing.T) {
			const name = "sem-exact"
			s := c.Semaphore(name)
			mustSet(t, s, most)
			wantAvail := func(want int64) {
				t.Helper()
				if n := available(t, s); n != want {
					t.Fatalf("AvailablePermits = %d; want %d", n, want)
				}
			}
			wantAvail(most)
			mustTry(t, s, most-1, true)
			wantAvail(1)
			if err := s.Release(ctx, most-1); err != nil {
				t.Fatalf("Release(%d): %v", most-1, err)
			}
			wantValue(t, side, name, "9007199254740991")
			if err := s.AddPermits(ctx, -most); err != nil {
				t.Fatalf("AddPermits(%d): %v", -most, err)
			}
			if err := s.AddPermits(ctx, -most); err != nil {
				t.Fatalf("AddPermits(%d) again: %v", -most, err)
			}
			wantValue(t, side, name, "-9007199254740991")
			wantAvail(-most)
			if err := s.AddPermits(ctx, most); err != nil {
				t.Fatalf("AddPermits(%d): %v", most, err)
			}
			if err := s.AddPermits(ctx, most); err != nil {
				t.Fatalf("AddPermits(%d) again: %v", most, err)
			}
			if n, err := s.Drain(ctx); n != most || err != nil {
				t.Fatalf("Drain = %d, %v; want %d, nil", n, err, most)
			}
			wantValue(t, side, name, "0")
		})

		t.Run("sums", func(t *testing.T) {
			const name = "sem-exact-sums"
			s := c.Semaphore(name)
			add := func(n int64) {
				t.Helper()
				if err := s.AddPermits(ctx, n); err != nil {
					t.Fatalf("AddPermits(%d): %v", n, err)
				}
			}
			// 2^53+1 added to -1 would make 2^53, which doubles read as 2^53-1: a number
			// beyond the range is refused whatever the count.
			add(-1)
			redistest.Unchanged(t, side, name, func() { wantErr(t, s.AddPermits(ctx, most+2), relock.ErrInvalidCount, name) })
			// Sums that would leave the range, at either end.
			add(1)
			add(most)
			redistest.Unchanged(t, side, name, func() { wantErr(t, s.AddPermits(ctx, 1), relock.ErrInvalidCount, name) })
			add(-most)
			add(-most)
			redistest.Unchanged(t, side, name, func() { wantErr(t, s.AddPermits(ctx, -1), relock.ErrInvalidCount, name) })
			wantValue(t, side, name, "-9007199254740991")
		})

		// Whole numbers Redis takes that a semaphore does not count.
		for i, v := range []string{"9007199254740992", "9007199254740993", "-9007199254740992", "9223372036854775807", "-9223372036854775808"} {
			name := fmt.Sprintf("sem-exact-stored:%d", i)
			redistest.MustDo(t, side, "SET", name, v)
			s := c.Semaphore(name)
			for _, op := range []struct {
				name string
				call func() error
			}{
				{"AvailablePermits", func() error { _, err := s.AvailablePermits(ctx); return err }},
				{"TryAcquire", func() error { _, err := s.TryAcquire(ctx, 1); return err }},
				{"Acquire", func() error { return s.Acquire(redistest.Context(t, 5*time.Second), 1) }},
				{"TrySetPermits", func() error { _, err := s.TrySetPermits(ctx, 1); return err }},
				{"AddPermits", func() error { return s.AddPermits(ctx, 1) }},
				{"AddPermits(-1)", func() error { return s.AddPermits(ctx, -1) }},
				{"Drain", func() error { _, err := s.Drain(ctx); return err }},
			} {
				t.Run(fmt.Sprintf("%s/%s", v, op.name), func(t *testing.T) {
					redistest.Unchanged(t, side, name, func() { wantErr(t, op.call(), relock.ErrInvalidCount, name) })
				})
			}
		}
	})
}

// A whole number one past either bound of 64 bits is no count to Redis (INCRBY and DECR
// refuse it), and so none to the semaphore: ErrWrongType, with the key untouched.
func TestCountPastTheBoundsOf64Bits(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b)
		for i, v := range []string{"9223372036854775808", "-9223372036854775809"} {
			name := fmt.Sprintf("sem-past-bound:%d", i)
			redistest.MustDo(t, side, "SET", name, v)
			redistest.Unchanged(t, side, name, func() {
				_, err := c.Semaphore(name).TrySetPermits(context.Background(), 1)
				wantErr(t, err, relock.ErrWrongType, name)
			})
		}
	})
}

// Every call after Close fails with ErrClosed and changes nothing, as relock.Client.Close
// promises: the calls that take permits with one free, AddPermits, a Release of permits
// the client took before closing, TrySetPermits, AvailablePermits and Drain.
//
// Guards against a closed client whose calls still reach Redis, the ones that do not take
// permits included.
func TestCallsAfterCloseChangeNothing(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name, fresh = "sem-closed", "sem-closed:fresh"
		side := b.Client(t)
		c := relocktest.New(t, b)
		ctx := context.Background()
		s := c.Semaphore(name)
		mustSet(t, s, 3)
		mustTry(t, s, 2, true)
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		redistest.Unchanged(t, side, name, func() {
			_, err := s.TryAcquire(ctx, 1)
			wantErr(t, err, relock.ErrClosed, name)
			wantErr(t, s.Acquire(redistest.Context(t, 5*time.Second), 1), relock.ErrClosed, name)
			wantErr(t, s.AddPermits(ctx, 1), relock.ErrClosed, name)
			wantErr(t, s.Release(ctx, 2), relock.ErrClosed, name)
			_, err = s.TrySetPermits(ctx, 5)
			wantErr(t, err, relock.ErrClosed, name)
			_, err = s.AvailablePermits(ctx)
			wantErr(t, err, relock.ErrClosed, name)
			_, err = s.Drain(ctx)
			wantErr(t, err, relock.ErrClosed, name)
		})
		_, err := c.Semaphore(fresh).TrySetPermits(ctx, 5)
		wantErr(t, err, relock.ErrClosed, fresh)
		wantValue(t, side, fresh, "(none)")
		wantValue(t, side, name, "1")
		wantKeys(t, b, side, name)
	})
}

// A waiter queued in memory between two others of its client, whose context ends, leaves
// the queue: the waiter behind it is served in its turn once the first is done, without
// waiting for anything of the one that left.
//
// Guards against a waiter that returns on ctx but stays in its client's queue, where the
// turn handed to it is lost and every waiter behind it waits until its own context ends.
func TestMiddleWaiterContextEnds(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-ctx:middle"
		side := b.Client(t)
		holder := relocktest.New(t, b)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		ctx := context.Background()
		mustSet(t, holder.Semaphore(name), 2)
		mustTry(t, holder.Semaphore(name), 2, true)

		firstDone := acquireAsync(redistest.Context(t, 30*time.Second), c.Semaphore(name), 2)
		parked(t, c, 1, "the first waiter")
		middleCtx, cancelMiddle := context.WithCancel(redistest.Context(t, 30*time.Second))
		defer cancelMiddle()
		middleDone := acquireAsync(middleCtx, c.Semaphore(name), 1)
		stillWaiting(t, middleDone, 200*time.Millisecond, "the middle waiter, behind the first")
		lastDone := acquireAsync(redistest.Context(t, 30*time.Second), c.Semaphore(name), 1)
		stillWaiting(t, lastDone, 200*time.Millisecond, "the last waiter, behind the middle one")

		cancelMiddle()
		err := redistest.Recv(t, middleDone, 15*time.Second, "the middle waiter after its context ended")
		wantErr(t, err, context.Canceled, name)

		if err := holder.Semaphore(name).Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, firstDone, 15*time.Second, "the first waiter after the release"); err != nil {
			t.Fatalf("first waiter: %v", err)
		}
		stillWaiting(t, lastDone, 200*time.Millisecond, "the last waiter with no permit free")
		if err := c.Semaphore(name).Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, lastDone, 15*time.Second, "the last waiter, behind a middle one that left"); err != nil {
			t.Fatalf("last waiter: %v", err)
		}
		wantValue(t, side, name, "1")
		if err := c.Semaphore(name).Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		wantKeys(t, b, side, name)
	})
}

// endsAsItComesFirst is a waiter's context that ends just as the waiter comes first in its
// client's queue: the first time Acquire asks for its Done channel (as it parks behind
// the waiter ahead), turn runs, which lets the one ahead be served, and then the context
// is cancelled. So when the parked waiter looks, both its turn and its context's end are
// there, and it may take either.
type endsAsItComesFirst struct {
	context.Context
	cancel context.CancelFunc
	once   sync.Once
	turn   func()
}

func (c *endsAsItComesFirst) Done() <-chan struct{} {
	c.once.Do(func() {
		c.turn()
		c.cancel()
	})
	return c.Context.Done()
}

// A waiter queued in memory behind another of its client whose context ends as its turn
// comes (the one ahead was served that moment) returns the context's error, and passes its
// turn on: the client's next Acquire, or the waiter of its client already queued behind
// it, is served as soon as a permit is free (package doc: within a client, first come,
// first served). Go's select picks either of two ready cases at random, so the test makes
// that moment a few times.
//
// Guards against a waiter that leaves on its context's end without passing on a turn it
// was given meanwhile: every later waiter of its client would queue behind it for ever
// (and TryAcquire would fail for ever), whatever permits are free; and against one that,
// its turn come, leaves the queue as a waiter still behind others does, so that the one
// behind it is never told its turn has come.
func TestWaiterContextEndsAsItsTurnComes(t *testing.T) {
	for _, behind := range []bool{false, true} {
		t.Run(map[bool]string{false: "next Acquire", true: "waiter behind"}[behind], func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				name := "sem-ctx:turn:" + strconv.FormatBool(behind)
				side := b.Client(t)
				holder := relocktest.New(t, b)
				c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
				ctx := context.Background()
				mustSet(t, holder.Semaphore(name), 0)
				for round := range 8 {
					if t.Failed() {
						return // a round reported from the waiter's goroutine: stop there
					}
					firstDone := acquireAsync(redistest.Context(t, 30*time.Second), c.Semaphore(name), 1)
					parked(t, c, 1, "the first waiter")
					var lastDone <-chan error
					wctx, cancel := context.WithCancel(redistest.Context(t, 30*time.Second))
					// The turn comes on the waiter's goroutine, which must not end the test
					// (FailNow): it reports with Errorf, and the test awaits the waiter.
					ends := &endsAsItComesFirst{Context: wctx, cancel: cancel, turn: func() {
						if behind {
							// The last waiter queues behind this one (its Done is asked
							// for once it is parked in memory); then the first is served.
							queued := make(chan struct{})
							last := &endsAsItComesFirst{Context: redistest.Context(t, 30*time.Second), cancel: func() {}, turn: func() { close(queued) }}
							lastDone = acquireAsync(last, c.Semaphore(name), 1)
							select {
							case <-queued:
							case <-time.After(15 * time.Second):
								t.Errorf("round %d: the last waiter never queued", round)
							}
						}
						if err := holder.Semaphore(name).AddPermits(ctx, 1); err != nil {
							t.Error(err)
						}
						select {
						case err := <-firstDone:
							if err != nil {
								t.Errorf("round %d: first waiter: %v", round, err)
							}
						case <-time.After(15 * time.Second):
							t.Errorf("round %d: the first waiter was not served after a permit was added", round)
						}
					}}
					err := redistest.Recv(t, acquireAsync(ends, c.Semaphore(name), 1), 30*time.Second, "the waiter whose context ended as its turn came")
					wantErr(t, err, context.Canceled, name)

					if err := holder.Semaphore(name).AddPermits(ctx, 1); err != nil {
						t.Fatal(err)
					}
					if behind {
						if err := redistest.Recv(t, lastDone, 15*time.Second, "the waiter behind the one whose context ended, with a permit free"); err != nil {
							t.Fatalf("round %d: last waiter: %v", round, err)
						}
					} else if err := c.Semaphore(name).Acquire(redistest.Context(t, 10*time.Second), 1); err != nil {
						t.Fatalf("round %d: the client's next Acquire with a permit free: %v", round, err)
					}
					if err := c.Semaphore(name).Release(ctx, 2); err != nil {
						t.Fatal(err)
					}
					if n, err := holder.Semaphore(name).Drain(ctx); n != 2 || err != nil {
						t.Fatalf("Drain = %d, %v; want 2, nil", n, err)
					}
				}
				wantValue(t, side, name, "0")
			})
		})
	}
}

// A waiter queued in memory behind another of its client, whose context reaches its
// deadline there, returns an error for which errors.Is(err, context.DeadlineExceeded) holds
// (Weighted.Acquire: errors.Is(err, ctx.Err())), takes nothing, and the waiter ahead of it
// is served as before.
//
// Guards against a waiter that, leaving the in-memory queue, reports a cancellation
// whatever ended its context.
func TestQueuedWaiterEndsWithItsContextsError(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-ctx:queued-deadline"
		side := b.Client(t)
		holder := relocktest.New(t, b)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		ctx := context.Background()
		mustSet(t, holder.Semaphore(name), 0)

		firstDone := acquireAsync(redistest.Context(t, 30*time.Second), c.Semaphore(name), 1)
		parked(t, c, 1, "the first waiter")
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		err := redistest.Recv(t, acquireAsync(wctx, c.Semaphore(name), 1), 15*time.Second, "the waiter queued behind the first, past its deadline")
		wantErr(t, err, context.DeadlineExceeded, name)
		wantValue(t, side, name, "0")

		if err := holder.Semaphore(name).AddPermits(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, firstDone, 15*time.Second, "the first waiter after a permit was added"); err != nil {
			t.Fatalf("first waiter: %v", err)
		}
		wantValue(t, side, name, "0")
		if err := c.Semaphore(name).Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		wantKeys(t, b, side, name)
	})
}

// A live waiter keeps its place in the queue however long it waits: it refreshes its
// entry every third of its watchdog timeout (2s here), so over more than three timeouts a
// smaller request of another client that came after it is not served with the permit
// that is free, and the first waiter is served first once its permits are there.
//
// Guards against a waiter whose entry runs out between its refreshes (a refresh period as
// long as the entry's life): it would be skipped as dead while it waits.
func TestWaiterKeepsItsPlaceAcrossLeases(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-keep-place"
		const timeout = 2 * time.Second
		side := b.Client(t)
		holder := relocktest.New(t, b)
		first := relocktest.New(t, b, relock.WithWatchdogTimeout(timeout))
		second := relocktest.New(t, b, relock.WithWatchdogTimeout(timeout))
		ctx := context.Background()
		mustSet(t, holder.Semaphore(name), 2)
		mustTry(t, holder.Semaphore(name), 1, true)

		firstDone := acquireAsync(redistest.Context(t, time.Minute), first.Semaphore(name), 2)
		parked(t, first, 1, "the waiter for 2 permits")
		secondDone := acquireAsync(redistest.Context(t, time.Minute), second.Semaphore(name), 1)
		parked(t, second, 1, "the waiter for 1 permit")
		stillWaiting(t, secondDone, 3*timeout+timeout/2, "the waiter for 1 permit behind a live waiter for 2")
		wantValue(t, side, name, "1")

		if err := holder.Semaphore(name).Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, firstDone, 15*time.Second, "the waiter for 2 permits after the release"); err != nil {
			t.Fatalf("first waiter: %v", err)
		}
		if err := first.Semaphore(name).Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, secondDone, 15*time.Second, "the waiter for 1 permit"); err != nil {
			t.Fatalf("second waiter: %v", err)
		}
		wantValue(t, side, name, "1")
	})
}

// The order across clients is the clients' places in Redis's queue, and no client passes a
// waiter twice (package doc, Order): with A1 and A2 waiting in client a, then B1 and B2 in
// client b, and permits coming one at a time, A1 is served, then B1 (client b's place came
// before client a queued A2), then A2, then B2, which queued anew behind A2. Within each
// client the waiters are served in the order they came.
//
// Guards against a client that keeps its place for its next waiter when one is served,
// which lets one busy client pass the others' waiters for ever (here: B2 before A2).
func TestClientsServedByTheirPlace(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-order:clients"
		side := b.Client(t)
		ca, cb := relocktest.New(t, b), relocktest.New(t, b)
		ctx := redistest.Context(t, 60*time.Second)
		mustSet(t, ca.Semaphore(name), 0)

		type served struct {
			who string
			err error
		}
		done := make(chan served, 4)
		start := func(c *relock.Client, who string) {
			go func() {
				done <- served{who, c.Semaphore(name).Acquire(ctx, 1)}
			}()
		}
		// The second waiter of a client waits in memory, not on the channel; when it starts
		// does not change the order, since it queues in Redis only once the first is served.
		start(ca, "A1")
		parked(t, ca, 1, "A1")
		start(ca, "A2")
		start(cb, "B1")
		parked(t, cb, 1, "B1")
		start(cb, "B2")

		// inLine waits until both clients have their places in Redis's queue.
		inLine := func() {
			redistest.Eventually(t, 10*time.Second, "both clients in Redis's queue", func() bool {
				n, err := side.Do(ctx, side.B().Zcard().Key(queueKey(name)).Build()).AsInt64()
				return err == nil && n == 2
			})
		}
		var order []string
		for range 4 {
			if len(order) < 3 {
				inLine()
			}
			if err := ca.Semaphore(name).AddPermits(ctx, 1); err != nil {
				t.Fatal(err)
			}
			select {
			case s := <-done:
				if s.err != nil {
					t.Fatalf("%s: %v", s.who, s.err)
				}
				order = append(order, s.who)
			case <-ctx.Done():
				t.Fatalf("served %v; nobody took the next permit", order)
			}
		}
		if want := []string{"A1", "B1", "A2", "B2"}; !slices.Equal(order, want) {
			t.Fatalf("served %v; want %v", order, want)
		}
	})
}
