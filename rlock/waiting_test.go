package rlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// commands is how many times the server ran the named commands between two INFO
// commandstats, the scripts' own included.
func commands(before, after map[string]int64, names ...string) int64 {
	var n int64
	for _, name := range names {
		n += after[name] - before[name]
	}
	return n
}

// scriptCalls is the number of script calls in the difference of two INFO commandstats.
func scriptCalls(before, after map[string]int64) int64 {
	return commands(before, after, "evalsha", "eval")
}

// subscriptions is the number of SUBSCRIBE and SSUBSCRIBE (or, with un, UNSUBSCRIBE and
// SUNSUBSCRIBE) commands in the difference of two INFO commandstats.
func subscriptions(before, after map[string]int64, un string) int64 {
	return commands(before, after, un+"subscribe", "s"+un+"subscribe")
}

// lockInBackground runs mu.Lock with a context bounded by d, unlocks at once when it got
// the lock, and reports the result.
func lockInBackground(mu *rlock.Mutex, d time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		held, err := mu.Lock(ctx)
		if err == nil {
			err = mu.Unlock(held)
		}
		done <- err
	}()
	return done
}

// A waiter that comes while other waiters of its client are in line for the lock joins
// them without an attempt of its own: the lock goes to them in turn, each handing it to
// the next (see TestUnlockHandsToWaiterOfItsClient), so an attempt could only fail, or
// take the lock from under the waiter it was meant for. They get it in the order they came.
func TestJoiningWaiterWaitsInLine(t *testing.T) {
	redistest.RealWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		holder, waiter := relocktest.New(t, b), relocktest.New(t, b)
		held, err := holder.Lock("joined").Lock(redistest.Context(t, time.Minute), rlock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		var order sync.Mutex
		var got []string
		wait := func(name string) <-chan error {
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				mu := waiter.Lock("joined")
				h, err := mu.Lock(ctx)
				if err == nil {
					order.Lock()
					got = append(got, name)
					order.Unlock()
					err = mu.Unlock(h)
				}
				done <- err
			}()
			return done
		}
		first := wait("first")
		redistest.Eventually(t, 10*time.Second, "the first waiter never parked", func() bool { return waiter.PubSubStats().Waiting == 1 })

		stats := b.Commands(t)
		before := stats.Calls(t)
		second := wait("second")
		redistest.Eventually(t, 10*time.Second, "the second waiter never parked", func() bool { return waiter.PubSubStats().Waiting == 2 })
		if n := scriptCalls(before, stats.Calls(t)); n != 0 {
			t.Errorf("the waiter that joined its client's waiter sent %d script calls before it parked; want 0", n)
		}

		if err := holder.Lock("joined").Unlock(held); err != nil {
			t.Fatal(err)
		}
		for _, d := range []<-chan error{first, second} {
			if err := redistest.Recv(t, d, 20*time.Second, "a waiter's acquisition"); err != nil {
				t.Errorf("waiter: %v", err)
			}
		}
		if want := []string{"first", "second"}; !slices.Equal(got, want) {
			t.Errorf("the waiters got the lock in the order %v; want %v", got, want)
		}
	})
}

// A lock contended in bursts keeps its channel subscribed between them: a waiter that
// comes within the linger reuses the subscription, and needs no second attempt. After the
// linger the channel is unsubscribed.
func TestChannelLingersBetweenBursts(t *testing.T) {
	t.Parallel()
	redistest.RealWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		holder, waiter := relocktest.New(t, b), relocktest.New(t, b)
		stats := b.Commands(t)
		start := stats.Calls(t)
		held, err := holder.Lock("bursty").Lock(redistest.Context(t, time.Minute), rlock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		// First burst: the waiter subscribes and gets the lock at the unlock.
		mu := waiter.Lock("bursty")
		got := make(chan context.Context, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			h, err := mu.Lock(relock.NewOwner(ctx))
			if err != nil {
				t.Errorf("first waiter: %v", err)
			}
			got <- h
		}()
		redistest.Eventually(t, 10*time.Second, "the first waiter never parked", func() bool { return waiter.PubSubStats().Waiting == 1 })
		if err := holder.Lock("bursty").Unlock(held); err != nil {
			t.Fatal(err)
		}
		firstHeld := redistest.Recv(t, got, 20*time.Second, "the first waiter's acquisition")

		// A waiting client subscribes to the lock's channel and to its presence channel
		// (see lua/wake.lua): in one or two SUBSCRIBEs, as the hub's loop takes them, or
		// one SSUBSCRIBE each on a cluster. The second burst must add none.
		first := subscriptions(start, stats.Calls(t), "")
		if first < 1 || first > 2 {
			t.Errorf("%d subscriptions for the first burst; want 1 or 2", first)
		}

		// Second burst, right after: nobody of the waiter's client waits, the channel
		// lingers, and the next waiter joins it.
		before := stats.Calls(t)
		second := lockInBackground(waiter.Lock("bursty"), 30*time.Second)
		redistest.Eventually(t, 10*time.Second, "the second waiter never parked", func() bool { return waiter.PubSubStats().Waiting == 1 })
		after := stats.Calls(t)
		if n := subscriptions(start, after, ""); n != first {
			t.Errorf("%d subscriptions for two bursts within the linger; want the first burst's %d", n, first)
		}
		if n := subscriptions(start, after, "un"); n != 0 {
			t.Errorf("%d unsubscriptions within the linger; want 0", n)
		}
		if n := scriptCalls(before, after); n != 1 {
			t.Errorf("the waiter joining the lingering channel sent %d script calls before it parked; want 1", n)
		}
		if err := mu.Unlock(firstHeld); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, second, 20*time.Second, "the second waiter's acquisition"); err != nil {
			t.Fatalf("second waiter: %v", err)
		}
		redistest.Eventually(t, 10*time.Second, "the channel was not unsubscribed after the linger", func() bool {
			return waiter.PubSubStats().Channels == 0
		})
		if n := subscriptions(start, stats.Calls(t), "un"); n < 1 || n > first {
			t.Errorf("%d unsubscriptions after the linger; want 1 to %d, as many as it took to subscribe at most", n, first)
		}
	})
}

// A waiter behind a lock without expiry (left by hand, with PERSIST or a bare HSET: neither
// relock nor Redisson makes one) looks at it again once a lease, not at once and again
// (docs/design.md, "Waiting without polling": every wait is bounded by the TTL, and by the
// lease when there is none). With the default 30s lease, it sends no script call in 1.5s
// of waiting. Guards against a waiter that takes the missing TTL (-1) for a lock about to
// run out, which would poll Redis for as long as the lock stays.
func TestWaiterBehindALockWithoutExpiryDoesNotPoll(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		const name = "no-expiry"
		side := b.Client(t)
		redistest.MustDo(t, side, "HSET", name, "0a1b2c3d-0000-4000-8000-00000000abcd:1", "1")
		waiter := relocktest.New(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := waiter.Lock(name).Lock(ctx)
			done <- err
		}()
		redistest.Eventually(t, 10*time.Second, "the waiter never parked", func() bool { return waiter.PubSubStats().Waiting == 1 })

		stats := b.Commands(t)
		before := stats.Calls(t)
		time.Sleep(1500 * time.Millisecond)
		if n := scriptCalls(before, stats.Calls(t)); n != 0 {
			t.Errorf("%d script calls in 1.5s from a waiter behind a lock without expiry; want none before a lease has passed", n)
		}
		cancel()
		if err := redistest.Recv(t, done, 10*time.Second, "the waiter's Lock"); !errors.Is(err, context.Canceled) {
			t.Errorf("the waiter's Lock after its context was cancelled: %v; want context.Canceled", err)
		}
	})
}

// 5,000 waiters of one process on a lock held for three leases check the lock about once
// per lease between them, not each at its own bound.
func TestOneCheckPerLease(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		const (
			waiters = 5000
			lease   = time.Second
			leases  = 3
		)
		holder, waiter := relocktest.New(t, b), relocktest.New(t, b)
		side, stats := b.Client(t), b.Commands(t)
		// A fixed lease that the test extends by hand, every tenth of it, so that no script
		// call but the waiters' reaches the server while it counts, and a loaded machine
		// that runs the extension late does not let the lease run out.
		if _, err := holder.Lock("crowded").Lock(redistest.Context(t, time.Minute), rlock.WithLease(lease)); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var extended sync.WaitGroup
		extended.Add(1)
		go func() {
			defer extended.Done()
			tick := time.NewTicker(lease / 10)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					redistest.Do(t, side, "PEXPIRE", "crowded", "1000")
				case <-stop:
					return
				}
			}
		}()
		defer func() { close(stop); extended.Wait() }()

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		var wrong atomic.Int64
		mu := waiter.Lock("crowded")
		for i := 0; i < waiters; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := mu.Lock(relock.NewOwner(ctx)); !errors.Is(err, context.Canceled) {
					wrong.Add(1)
				}
			}()
		}
		redistest.Eventually(t, 60*time.Second, "the waiters never all parked", func() bool { return waiter.PubSubStats().Waiting == waiters })

		before, begin := stats.Calls(t), time.Now()
		time.Sleep(leases * lease)
		after, elapsed := stats.Calls(t), time.Since(begin)
		calls := scriptCalls(before, after)
		t.Logf("%d script calls from %d waiters in %v (%v leases)", calls, waiters, elapsed.Round(time.Millisecond), leases)
		// The lock is extended every tenth of its lease, so a check finds at least two
		// thirds of a lease left (the extension may run late): up to one and a half
		// checks per lease, and one more for a check in flight at either end.
		if limit := int64(elapsed/lease)*3/2 + 2; calls > limit {
			t.Errorf("%d script calls in %v from %d waiters; want at most %d, about one per lease", calls, elapsed, waiters, limit)
		}
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		redistest.Recv(t, done, 60*time.Second, "the cancelled waiters' return")
		if n := wrong.Load(); n != 0 {
			t.Errorf("%d waiters ended otherwise than by their cancelled context", n)
		}
	})
}

// With no unlock message ever (every hold's fixed lease runs out), the waiters still get
// the lock one after the other: the channel's timer wakes one waiter, which takes the lock
// and passes the wake-up on, or learns the new lease and sets the timer for it. Waiters
// that give up on the way do not break the chain.
func TestTimerChainWithoutMessages(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const waiters = 12
		holder, waiter := relocktest.New(t, b), relocktest.New(t, b)
		if _, err := holder.Lock("expiring").Lock(redistest.Context(t, time.Minute), rlock.WithLease(300*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		mu := waiter.Lock("expiring")
		results := make(chan error, waiters)
		var quitters atomic.Int64
		for i := 0; i < waiters; i++ {
			go func() {
				// Every third waiter gives up early; the others wait long enough for all.
				d := 60 * time.Second
				if i%3 == 2 {
					d = time.Duration(100+50*i) * time.Millisecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), d)
				defer cancel()
				// Never unlocked: the hold ends when its lease runs out, publishing nothing.
				_, err := mu.Lock(relock.NewOwner(ctx), rlock.WithLease(150*time.Millisecond))
				if errors.Is(err, context.DeadlineExceeded) && i%3 == 2 {
					quitters.Add(1)
					err = nil
				}
				results <- err
			}()
		}
		for i := 0; i < waiters; i++ {
			if err := redistest.Recv(t, results, 90*time.Second, "a waiter's acquisition"); err != nil {
				t.Errorf("waiter: %v", err)
			}
		}
		t.Logf("%d waiters gave up; hub %+v", quitters.Load(), waiter.PubSubStats())
	})
}

// Goroutines of two clients take a lock in turns, holding it briefly; every release
// publishes, so no wait may end by its time bound, the holder's minute-long lease: a
// waiter that joined a subscription, skipped its second attempt and missed the unlock
// would sleep for it, and the test would run out of time.
func TestNoLostWakeUpUnderContention(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const (
			perClient = 4
			rounds    = 40
		)
		clients := []*relock.Client{
			relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute)),
			relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute)),
		}
		errs := make(chan error, 2*perClient)
		for _, c := range clients {
			mu := c.Lock("turns")
			for i := 0; i < perClient; i++ {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
					defer cancel()
					for r := 0; r < rounds; r++ {
						held, err := mu.Lock(relock.NewOwner(ctx))
						if err != nil {
							errs <- err
							return
						}
						if err := mu.Unlock(held); err != nil {
							errs <- err
							return
						}
					}
					errs <- nil
				}()
			}
		}
		for i := 0; i < 2*perClient; i++ {
			if err := redistest.Recv(t, errs, 60*time.Second, "a goroutine's rounds"); err != nil {
				t.Errorf("rounds: %v", err)
			}
		}
		for i, c := range clients {
			if st := c.PubSubStats(); st.TimedOut != 0 {
				t.Errorf("client %d: %+v: a wait ended by its bound although every release published", i, st)
			}
		}
	})
}

// A holder kept by its watchdog renews every third of its lease, so the moment its lease was
// due to end, as a waiter last saw it, is also a moment it renews. The waiters' channel timer
// looks a little after that moment, so it finds the renewal landed and sleeps a whole lease
// again: between two looks of the waiting client there is a whole lease, never the two thirds
// of one that a look just before the renewal would leave. Here every renewal lands 20ms
// late, as a busy holder's may, which the look's margin (a sixty-fourth of the lease,
// 62ms) covers: a look at the very moment the lease was due would find the old expiry.
func TestRenewedHolderIsLookedAtOncePerLease(t *testing.T) {
	// Not in parallel with the others: the look's margin over a late renewal is 62ms, which
	// the others' load can take.
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		const (
			waiters = 50
			lease   = 4 * time.Second
			late    = 20 * time.Millisecond
			looks   = 3 // timed looks to see, after the first
		)
		holder, err := relock.New(lateBatches{Client: b.Client(t), late: late}, relock.WithWatchdogTimeout(lease))
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close()
		waiter := relocktest.New(t, b)
		hctx, hcancel := context.WithTimeout(context.Background(), time.Minute)
		defer hcancel()
		mu := holder.Lock("renewed")
		held, err := mu.Lock(hctx)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		wmu := waiter.Lock("renewed")
		for range waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := wmu.Lock(relock.NewOwner(ctx)); !errors.Is(err, context.Canceled) {
					t.Errorf("a waiter's Lock: %v; want context.Canceled", err)
				}
			}()
		}
		redistest.Eventually(t, 30*time.Second, "the waiters never all parked", func() bool {
			return waiter.PubSubStats().Waiting == waiters
		})

		// Every timed look is one waiter woken by the channel's timer; note when each lands.
		var at []time.Time
		last := waiter.PubSubStats().TimedOut
		deadline := time.Now().Add(time.Duration(looks+2) * lease)
		for len(at) < looks+1 && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
			if n := waiter.PubSubStats().TimedOut; n != last {
				if n-last > 1 {
					t.Fatalf("%d timed looks at once; want one for the client", n-last)
				}
				last = n
				at = append(at, time.Now())
			}
		}
		if len(at) < looks+1 {
			t.Fatalf("%d timed looks in %v; want %d, one per lease", len(at), time.Duration(looks+2)*lease, looks+1)
		}
		gaps := make([]time.Duration, 0, looks)
		for i := 1; i < len(at); i++ {
			gaps = append(gaps, at[i].Sub(at[i-1]).Round(time.Millisecond))
		}
		t.Logf("gaps between timed looks: %v", gaps)
		for i, gap := range gaps {
			// A look that beat the renewal leaves two thirds of a lease to the next one.
			if gap < lease*5/6 {
				t.Errorf("look %d came %v after the one before; want about a lease, %v", i+1, gap, lease)
			}
		}
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		redistest.Recv(t, done, 30*time.Second, "the cancelled waiters' return")
		if err := held.Err(); err != nil {
			t.Fatalf("the holder's hold ended while it was renewed: %v", err)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// lateBatches delays every pipelined batch it sends, which in a client that holds one lock
// and does nothing else is the watchdog's renewals.
type lateBatches struct {
	rueidis.Client
	late time.Duration
}

func (c lateBatches) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	time.Sleep(c.late)
	return c.Client.DoMulti(ctx, cmds...)
}
