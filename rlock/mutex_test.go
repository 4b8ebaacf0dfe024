package rlock_test

import (
	"context"
	"errors"
	"os"
	"runtime"
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
	"github.com/relock-go/relock/rlock"
)

// Every goroutine relock starts is owned and stopped: none may outlive the tests.
func TestMain(m *testing.M) {
	// Main also stops the Redis Cluster the "cluster" subtests share, and checks for leaked goroutines.
	os.Exit(redistest.Main(m))
}

func TestReentrancy(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		mu := c.Lock("reentrant")
		ctx := redistest.Context(t, time.Minute)

		held := ctx
		for i := 0; i < 3; i++ {
			var err error
			if held, err = mu.Lock(held); err != nil {
				t.Fatalf("lock %d: %v", i+1, err)
			}
		}
		if n, err := mu.HoldCount(held); err != nil || n != 3 {
			t.Fatalf("HoldCount = %d, %v; want 3", n, err)
		}
		fields, err := redistest.Do(t, side, "HGETALL", "reentrant").AsStrMap()
		if err != nil {
			t.Fatal(err)
		}
		if len(fields) != 1 {
			t.Fatalf("hash fields = %v; want exactly one", fields)
		}
		for field, count := range fields {
			n, ok := strings.CutPrefix(field, c.ID()+":")
			if _, err := strconv.ParseUint(n, 10, 64); !ok || err != nil {
				t.Errorf("field %q is not <client uuid>:<n> with uuid %s", field, c.ID())
			}
			if count != "3" {
				t.Errorf("hold count in Redis = %s; want 3", count)
			}
		}

		for i := 0; i < 3; i++ {
			if err := mu.Unlock(held); err != nil {
				t.Fatalf("unlock %d: %v", i+1, err)
			}
		}
		if n, _ := redistest.Do(t, side, "EXISTS", "reentrant").AsInt64(); n != 0 {
			t.Errorf("lock key still exists after three unlocks")
		}
		if err := mu.Unlock(held); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("fourth unlock: %v; want ErrNotHeld", err)
		}
	})
}

func TestMutualExclusion(t *testing.T) {
	const clients, goroutines, sections = 2, 16, 50
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		var (
			counter int // read and written without atomics: only the lock protects it
			inside  atomic.Int32
			wg      sync.WaitGroup
		)
		for i := 0; i < clients; i++ {
			mu := relocktest.New(t, b).Lock("exclusive")
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					for s := 0; s < sections; s++ {
						held, err := mu.Lock(ctx)
						if err != nil {
							t.Errorf("lock: %v", err)
							return
						}
						if n := inside.Add(1); n != 1 {
							t.Errorf("%d holders inside the critical section", n)
						}
						v := counter
						runtime.Gosched() // widen the window a broken lock would show in
						counter = v + 1
						inside.Add(-1)
						if err := mu.Unlock(held); err != nil {
							t.Errorf("unlock: %v", err)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		if want := clients * goroutines * sections; counter != want {
			t.Errorf("counter = %d; want %d", counter, want)
		}
	})
}

func TestOtherOwner(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		held, err := c1.Lock("contested").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		others := map[string]struct {
			mu  *rlock.Mutex
			ctx context.Context
		}{
			"same client, fresh context": {c1.Lock("contested"), ctx},
			"same client, NewOwner":      {c1.Lock("contested"), relock.NewOwner(held)},
			"other client":               {c2.Lock("contested"), ctx},
			"other client, holder's ctx": {c2.Lock("contested"), held},
		}
		for name, o := range others {
			if _, err := o.mu.TryLock(o.ctx); !errors.Is(err, relock.ErrLocked) {
				t.Errorf("%s: TryLock: %v; want ErrLocked", name, err)
			}
			if err := o.mu.Unlock(o.ctx); !errors.Is(err, relock.ErrNotHeld) {
				t.Errorf("%s: Unlock: %v; want ErrNotHeld", name, err)
			}
			if ok, err := o.mu.IsHeld(o.ctx); ok || err != nil {
				t.Errorf("%s: IsHeld = %v, %v; want false", name, ok, err)
			}
		}
		mu := c1.Lock("contested")
		if n, err := mu.HoldCount(held); n != 1 || err != nil {
			t.Fatalf("holder's HoldCount = %d, %v; want 1", n, err)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatalf("holder's Unlock: %v", err)
		}
	})
}

func TestLockContextTimeout(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
		if _, err := c1.Lock("busy").Lock(redistest.Context(t, time.Minute), rlock.WithLease(time.Minute)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := c2.Lock("busy").Lock(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock: %v; want context.DeadlineExceeded", err)
		}
		if !strings.Contains(err.Error(), `"busy"`) {
			t.Errorf("error %q does not name the lock", err)
		}
		redistest.Eventually(t, 5*time.Second, "hub still holds a subscription", func() bool {
			return c2.PubSubStats().Channels == 0
		})
		const channel = "redisson_lock__channel:{busy}"
		var n []rueidis.RedisMessage
		switch {
		case b.Server != nil:
			n, err = redistest.Do(t, b.Client(t), "PUBSUB", "NUMSUB", channel).ToArray()
		case b.Cluster != nil: // sharded pub/sub: the channel's subscribers are on its slot's master
			n, err = b.Cluster.MasterOf(b.Cluster.Slot(channel)).Do(t, "PUBSUB", "SHARDNUMSUB", channel).ToArray()
		}
		if b.Mini == nil {
			if err != nil || len(n) != 2 {
				t.Fatalf("PUBSUB NUMSUB: %v %v", n, err)
			}
			if subs, _ := n[1].AsInt64(); subs != 0 {
				t.Errorf("server still counts %d subscribers on the lock channel", subs)
			}
		}
	})
}

// A waiter behind a long lease sends nothing while it waits and is woken by the unlock
// message, not by its TTL bound.
func TestWaiterDoesNotPoll(t *testing.T) {
	t.Parallel()
	redistest.RealWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		holder, waiter := relocktest.New(t, b), relocktest.New(t, b)
		held, err := holder.Lock("long").Lock(redistest.Context(t, time.Minute), rlock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		acquired := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			h, err := waiter.Lock("long").Lock(ctx)
			if err == nil {
				err = waiter.Lock("long").Unlock(h)
			}
			acquired <- err
		}()
		redistest.Eventually(t, 5*time.Second, "waiter never parked", func() bool { return waiter.PubSubStats().Waiting == 1 })

		// Connections made before the window, so that their HELLO is not counted.
		stats := b.Commands(t)
		before := stats.Calls(t)
		time.Sleep(1500 * time.Millisecond)
		after := stats.Calls(t)
		for cmd, n := range after {
			// INFO is this test's own; PING is rueidis's keep-alive on idle connections
			// and REPLCONF a cluster replica's acknowledgements to its master: not lock
			// traffic.
			if cmd == "info" || cmd == "ping" || cmd == "replconf" {
				continue
			}
			if d := n - before[cmd]; d != 0 {
				t.Errorf("%d %s commands sent while the waiter waited", d, cmd)
			}
		}

		if err := holder.Lock("long").Unlock(held); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-acquired:
			if err != nil {
				t.Fatalf("waiter: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("waiter not woken by the unlock")
		}
		if st := waiter.PubSubStats(); st.Woken != 1 || st.TimedOut != 0 {
			t.Errorf("waiter stats %+v: want one wake-up by message and no TTL timeout", st)
		}
	})
}

// The subscriber connection is killed just before the unlock, so the unlock message is
// lost; the waiter must still acquire (woken after the reconnect, or by its TTL bound).
func TestLostWakeup(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		holder, waiter := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		held, err := holder.Lock("lossy").Lock(redistest.Context(t, time.Minute), rlock.WithLease(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		acquired := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := waiter.Lock("lossy").Lock(ctx)
			acquired <- err
		}()
		redistest.Eventually(t, 5*time.Second, "waiter never parked", func() bool { return waiter.PubSubStats().Waiting == 1 })
		if err := redistest.Do(t, side, "CLIENT", "KILL", "TYPE", "pubsub").Error(); err != nil {
			t.Fatal(err)
		}
		if err := holder.Lock("lossy").Unlock(held); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, acquired, 30*time.Second, "the waiter's Lock"); err != nil {
			t.Fatalf("waiter after lost wake-up: %v", err)
		}
		if st := waiter.PubSubStats(); st.Reconnects == 0 {
			t.Errorf("stats %+v: the hub did not notice its connection was killed", st)
		}
	})
}

// The same on both backends with the waiter's connections cut by a proxy just before the
// unlock: the hub reconnects, subscribes again and wakes the waiter.
func TestLostWakeupConnectionCut(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		holder := relocktest.New(t, b)
		proxy := redistest.StartProxy(t, b.Addr)
		waiter := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()})
		held, err := holder.Lock("cut").Lock(redistest.Context(t, time.Minute), rlock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		acquired := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := waiter.Lock("cut").Lock(ctx)
			acquired <- err
		}()
		redistest.Eventually(t, 5*time.Second, "waiter never parked", func() bool { return waiter.PubSubStats().Waiting == 1 })
		proxy.Cut()
		if err := holder.Lock("cut").Unlock(held); err != nil {
			t.Fatal(err)
		}
		// The lease is a minute: only the reconnect's wake-up can let the waiter in in time.
		if err := redistest.Recv(t, acquired, 30*time.Second, "the waiter's Lock"); err != nil {
			t.Fatalf("waiter after its connections were cut: %v", err)
		}
		if st := waiter.PubSubStats(); st.Reconnects == 0 || st.TimedOut != 0 {
			t.Errorf("stats %+v: want a reconnect and no TTL timeout", st)
		}
	})
}

func TestRedissonLayout(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := context.Background()
		javaOwner := "5df8512c-e096-4359-bc82-07efb0bc9d8e:1"
		channel := "redisson_lock__channel:{shared}"
		// On a cluster of Redis 7 Redisson, like relock, sends wake-ups by sharded pub/sub.
		java := javaside.New(side, b.Cluster != nil)

		// A Java holder makes the Go waiter wait; its unlock wakes the waiter.
		if ok, _, err := java.Lock(ctx, "shared", javaOwner, 30*time.Second); !ok || err != nil {
			t.Fatalf("Java lock = %v, %v; want acquired", ok, err)
		}
		acquired := make(chan error, 1)
		var held context.Context
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			var err error
			held, err = c.Lock("shared").Lock(wctx)
			acquired <- err
		}()
		redistest.Eventually(t, 5*time.Second, "Go waiter never parked behind the Java holder", func() bool { return c.PubSubStats().Waiting == 1 })
		if u, err := java.Unlock(ctx, "shared", javaOwner); err != nil || u != javaside.Released {
			t.Fatalf("Java unlock = %v, %v; want released", u, err)
		}
		if err := redistest.Recv(t, acquired, 30*time.Second, "the Go waiter's Lock"); err != nil {
			t.Fatalf("Go waiter: %v", err)
		}
		if st := c.PubSubStats(); st.Woken != 1 || st.TimedOut != 0 {
			t.Errorf("stats %+v: want the waiter woken by the Java unlock's message", st)
		}

		// The Go hold is exactly what Redisson writes: a hash of one owner field "<uuid>:<n>"
		// with the hold count, expiring with the lease.
		if typ, _ := redistest.Do(t, side, "TYPE", "shared").ToString(); typ != "hash" {
			t.Fatalf("TYPE = %q; want hash", typ)
		}
		fields, _ := redistest.Do(t, side, "HGETALL", "shared").AsStrMap()
		if len(fields) != 1 {
			t.Fatalf("fields = %v; want one", fields)
		}
		var goOwner string
		for f, v := range fields {
			goOwner = f
			if !strings.HasPrefix(f, c.ID()+":") || v != "1" {
				t.Errorf("field %q = %q; want <client uuid>:<n> = 1", f, v)
			}
		}
		if pttl, _ := redistest.Do(t, side, "PTTL", "shared").AsInt64(); pttl <= 0 || pttl > relock.DefaultWatchdogTimeout.Milliseconds() {
			t.Errorf("PTTL = %d; want a lease of at most the watchdog timeout", pttl)
		}
		// The Java side sees the Go owner as another owner: its lock reports the PTTL.
		if ok, pttl, err := java.Lock(ctx, "shared", javaOwner, 30*time.Second); ok || err != nil || pttl <= 0 {
			t.Errorf("Java lock while Go holds = %v, %v, %v; want refused, with the PTTL", ok, pttl, err)
		}
		// Redisson's unlock by the Go owner's name proves the field is what Redisson reads.
		if n, err := redistest.Do(t, side, "HGET", "shared", goOwner).AsInt64(); n != 1 || err != nil {
			t.Errorf("HGET owner = %d, %v", n, err)
		}

		// The Go unlock publishes "0" on Redisson's channel.
		l := b.Listen(t, channel)
		if err := c.Lock("shared").Unlock(held); err != nil {
			t.Fatal(err)
		}
		redistest.Eventually(t, 10*time.Second, "no unlock message on Redisson's channel", func() bool { return len(l.Messages()) > 0 })
		if msgs := l.Messages(); msgs[0] != "0" {
			t.Errorf("messages %q on %q; want \"0\"", msgs, channel)
		}
	})
}

// Re-entry works on each side of a shared lock (docs/migration-from-redisson.md, "Sharing
// locks with Java services"): a Java owner that locked twice keeps Go owners out until its
// second unlock, and only that unlock, which publishes, wakes a Go waiter; a Go owner that
// locked twice keeps the Java owner out until its second unlock.
func TestRedissonReentryShared(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := context.Background()
		const name = "reentered"
		javaOwner := "5df8512c-e096-4359-bc82-07efb0bc9d8e:7"
		java := javaside.New(side, false)
		javaLock := func() (time.Duration, error) {
			ok, pttl, err := java.Lock(ctx, name, javaOwner, 30*time.Second)
			if ok {
				return 0, err // acquired
			}
			return pttl, err
		}
		mu := c.Lock(name)

		for i := 0; i < 2; i++ {
			if pttl, err := javaLock(); pttl != 0 || err != nil {
				t.Fatalf("Java lock #%d = %v, %v; want acquired", i+1, pttl, err)
			}
		}
		if _, err := mu.TryLock(ctx); !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("TryLock while the Java owner holds twice: %v; want ErrLocked", err)
		}
		acquired := lockInBackground(mu, 30*time.Second)
		redistest.Eventually(t, 5*time.Second, "Go waiter never parked behind the Java holder", func() bool { return c.PubSubStats().Waiting == 1 })
		if u, err := java.Unlock(ctx, name, javaOwner); err != nil || u != javaside.StillHeld {
			t.Fatalf("first Java unlock = %v, %v; want still held", u, err)
		}
		if _, err := mu.TryLock(ctx); !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("TryLock after one of the Java owner's two unlocks: %v; want ErrLocked", err)
		}
		select {
		case err := <-acquired:
			t.Fatalf("the Go waiter's Lock returned (%v) while the Java owner still held the lock", err)
		default:
		}
		if u, err := java.Unlock(ctx, name, javaOwner); err != nil || u != javaside.Released {
			t.Fatalf("second Java unlock = %v, %v; want released", u, err)
		}
		if err := redistest.Recv(t, acquired, 30*time.Second, "the Go waiter's Lock"); err != nil {
			t.Fatalf("Go waiter: %v", err)
		}
		if st := c.PubSubStats(); st.Woken != 1 || st.TimedOut != 0 {
			t.Errorf("stats %+v: want the waiter woken once, by the Java owner's last unlock", st)
		}

		held, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		again, err := mu.Lock(held)
		if err != nil {
			t.Fatal(err)
		}
		if pttl, err := javaLock(); pttl <= 0 || err != nil {
			t.Fatalf("Java lock while the Go owner holds twice = %v, %v; want its PTTL", pttl, err)
		}
		if err := mu.Unlock(again); err != nil {
			t.Fatal(err)
		}
		if pttl, err := javaLock(); pttl <= 0 || err != nil {
			t.Fatalf("Java lock after one of the Go owner's two unlocks = %v, %v; want its PTTL", pttl, err)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if pttl, err := javaLock(); pttl != 0 || err != nil {
			t.Fatalf("Java lock after the Go owner's last unlock = %v, %v; want acquired", pttl, err)
		}
	})
}

func TestUnlockWithCancelledContext(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		mu := relocktest.New(t, b).Lock("cancelled")
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(held)
		cancel()
		if err := mu.Unlock(cctx); err != nil {
			t.Fatalf("Unlock with a cancelled context: %v", err)
		}
		if locked, err := mu.IsLocked(context.Background()); locked || err != nil {
			t.Errorf("IsLocked = %v, %v after unlock; want false", locked, err)
		}
	})
}

func TestBadInput(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)

		for _, name := range []string{"", "a{}b", "a{b", "{", "a}b"} {
			mu := c.Lock(name)
			_, err := mu.Lock(ctx)
			if !errors.Is(err, relock.ErrInvalidName) {
				t.Errorf("Lock(%q): %v; want ErrInvalidName", name, err)
			}
			if err := mu.Unlock(ctx); !errors.Is(err, relock.ErrInvalidName) {
				t.Errorf("Unlock(%q): %v; want ErrInvalidName", name, err)
			}
			if _, err := mu.HoldCount(ctx); !errors.Is(err, relock.ErrInvalidName) {
				t.Errorf("HoldCount(%q): %v; want ErrInvalidName", name, err)
			}
		}

		for _, lease := range []time.Duration{0, -time.Second, time.Microsecond} {
			mu := c.Lock("lease")
			if _, err := mu.Lock(ctx, rlock.WithLease(lease)); !errors.Is(err, relock.ErrInvalidLease) {
				t.Errorf("Lock with lease %v: %v; want ErrInvalidLease", lease, err)
			}
			if _, err := c.Lock("lease", rlock.WithLease(lease)).TryLock(ctx); !errors.Is(err, relock.ErrInvalidLease) {
				t.Errorf("TryLock on a lock made with lease %v: %v; want ErrInvalidLease", lease, err)
			}
		}
		if n, _ := redistest.Do(t, side, "EXISTS", "lease").AsInt64(); n != 0 {
			t.Errorf("an invalid lease wrote the lock key")
		}
		if _, err := c.Lock("nil-option").TryLock(ctx, nil); err != nil {
			t.Errorf("a nil option: %v", err)
		}

		// A key holding a string is refused by every call and left as it was.
		if err := redistest.Do(t, side, "SET", "foreign", "precious").Error(); err != nil {
			t.Fatal(err)
		}
		mu := c.Lock("foreign")
		held, err := mu.TryLock(ctx)
		if !errors.Is(err, relock.ErrWrongType) || !strings.Contains(err.Error(), `"foreign"`) {
			t.Errorf("TryLock on a string: %v; want ErrWrongType naming the lock", err)
		}
		if _, err := mu.Lock(ctx); !errors.Is(err, relock.ErrWrongType) {
			t.Errorf("Lock on a string: %v; want ErrWrongType", err)
		}
		if _, err := mu.HoldCount(held); !errors.Is(err, relock.ErrWrongType) {
			t.Errorf("HoldCount on a string: %v; want ErrWrongType", err)
		}
		if _, err := mu.IsLocked(held); !errors.Is(err, relock.ErrWrongType) {
			t.Errorf("IsLocked on a string: %v; want ErrWrongType", err)
		}
		if _, err := mu.ForceUnlock(ctx); !errors.Is(err, relock.ErrWrongType) {
			t.Errorf("ForceUnlock on a string: %v; want ErrWrongType", err)
		}
		owned, err := c.Lock("elsewhere").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := mu.Unlock(owned); !errors.Is(err, relock.ErrWrongType) {
			t.Errorf("Unlock on a string: %v; want ErrWrongType", err)
		}
		if v, _ := redistest.Do(t, side, "GET", "foreign").ToString(); v != "precious" {
			t.Errorf("the string became %q", v)
		}
		if ttl, _ := redistest.Do(t, side, "PTTL", "foreign").AsInt64(); ttl != -1 {
			t.Errorf("the string got an expiry: PTTL %d", ttl)
		}

		// Unlock with a context that carries no owner.
		if err := c.Lock("elsewhere").Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock with no owner: %v; want ErrNotHeld", err)
		}
		if _, err := c.Lock("elsewhere").TTL(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("TTL with no owner: %v; want ErrNotHeld", err)
		}
		if err := c.Lock("elsewhere").Unlock(owned); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCallsAfterClose(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		holder, c := relocktest.New(t, b), relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		if _, err := holder.Lock("closing").Lock(ctx, rlock.WithLease(time.Minute)); err != nil {
			t.Fatal(err)
		}
		waited := make(chan error, 1)
		go func() {
			_, err := c.Lock("closing").Lock(ctx)
			waited <- err
		}()
		redistest.Eventually(t, 5*time.Second, "waiter never parked", func() bool { return c.PubSubStats().Waiting == 1 })
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, waited, 10*time.Second, "the parked waiter's return at Close"); !errors.Is(err, relock.ErrClosed) {
			t.Errorf("parked waiter at Close: %v; want ErrClosed", err)
		}
		mu := c.Lock("closing")
		if _, err := mu.Lock(ctx); !errors.Is(err, relock.ErrClosed) {
			t.Errorf("Lock after Close: %v", err)
		}
		if _, err := mu.TryLock(ctx); !errors.Is(err, relock.ErrClosed) {
			t.Errorf("TryLock after Close: %v", err)
		}
		if err := mu.Unlock(ctx); !errors.Is(err, relock.ErrClosed) {
			t.Errorf("Unlock after Close: %v", err)
		}
		if _, err := mu.IsLocked(ctx); !errors.Is(err, relock.ErrClosed) {
			t.Errorf("IsLocked after Close: %v", err)
		}
		if _, err := mu.ForceUnlock(ctx); !errors.Is(err, relock.ErrClosed) {
			t.Errorf("ForceUnlock after Close: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if locked, _ := holder.Lock("closing").IsLocked(ctx); !locked {
			t.Errorf("the other client's hold was disturbed by Close")
		}
	})
}

// When the holder never unlocks, the waiter gets the lock when the lease runs out: its
// wait is bounded by the holder's TTL, with no message needed.
func TestWaitBoundedByLease(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		holder, waiter := relocktest.New(t, b), relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		if _, err := holder.Lock("expiring").Lock(ctx, rlock.WithLease(300*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		held, err := waiter.Lock("expiring").Lock(wctx)
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
		if st := waiter.PubSubStats(); st.TimedOut == 0 {
			t.Errorf("stats %+v: want the wait ended by its TTL bound", st)
		}
		if ok, _ := waiter.Lock("expiring").IsHeld(held); !ok {
			t.Errorf("waiter does not hold the lock")
		}
	})
}

func TestOwnerAcrossLocks(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		held, err := c.Lock("first").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held, err = c.Lock("second").Lock(held)
		if err != nil {
			t.Fatal(err)
		}
		f1, _ := redistest.Do(t, side, "HKEYS", "first").AsStrSlice()
		f2, _ := redistest.Do(t, side, "HKEYS", "second").AsStrSlice()
		if len(f1) != 1 || len(f2) != 1 || f1[0] != f2[0] {
			t.Errorf("owners %v and %v; want one owner holding both locks", f1, f2)
		}
		// A goroutine spawned with the holding context but a new owner is excluded.
		if _, err := c.Lock("first").TryLock(relock.NewOwner(held)); !errors.Is(err, relock.ErrLocked) {
			t.Errorf("NewOwner TryLock: %v; want ErrLocked", err)
		}
		// Ownership travels with the context: another goroutine may unlock.
		done := make(chan error)
		go func() { done <- c.Lock("second").Unlock(held) }()
		if err := redistest.Recv(t, done, 10*time.Second, "the unlock from another goroutine"); err != nil {
			t.Errorf("unlock from another goroutine: %v", err)
		}
		if err := c.Lock("first").Unlock(held); err != nil {
			t.Error(err)
		}
	})
}

func TestDo(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		mu := relocktest.New(t, b).Lock("guarded")
		ctx := redistest.Context(t, time.Minute)
		boom := errors.New("boom")
		err := mu.Do(ctx, func(ctx context.Context) error {
			if ok, err := mu.IsHeld(ctx); !ok || err != nil {
				t.Errorf("inside Do: IsHeld = %v, %v", ok, err)
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Errorf("Do returned %v; want fn's error", err)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("the panic in fn did not reach the caller")
				}
			}()
			_ = mu.Do(ctx, func(context.Context) error { panic("fn panics") })
		}()
		if locked, err := mu.IsLocked(ctx); locked || err != nil {
			t.Errorf("after Do: IsLocked = %v, %v; want false", locked, err)
		}
	})
}

// Do returns fn's error joined with Unlock's: when the hold is gone by the time fn returns
// (another client force-unlocked it), Do's error says so (ErrNotHeld, naming the lock),
// beside fn's own error if it had one. Guards against a Do that drops Unlock's error and
// reports a section that ran under a lock it had lost as a success.
func TestDoReportsTheUnlock(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		const name = "guarded:lost"
		mu := c.Lock(name)
		ctx := redistest.Context(t, time.Minute)
		boom := errors.New("boom")
		for _, ret := range []error{nil, boom} {
			err := mu.Do(ctx, func(context.Context) error {
				if ok, err := other.Lock(name).ForceUnlock(ctx); !ok || err != nil {
					t.Errorf("ForceUnlock inside Do = %v, %v; want true", ok, err)
				}
				return ret
			})
			if !errors.Is(err, relock.ErrNotHeld) || !strings.Contains(err.Error(), `"`+name+`"`) {
				t.Errorf("Do whose hold was lost under fn (fn returned %v) = %v; want ErrNotHeld naming the lock", ret, err)
			}
			if ret != nil && !errors.Is(err, ret) {
				t.Errorf("Do = %v; want fn's error %v too", err, ret)
			}
		}
	})
}

// Do's fn runs with the hold's context, which ends when the lease is lost under fn: with a
// watchdog timeout of 1s, a ForceUnlock by another client under fn ends fn's context with
// cause ErrLeaseLost within a few renewal periods, so that fn can stop; Do then returns
// fn's error joined with ErrNotHeld naming the lock. Guards against a Do that runs fn with
// the caller's context (which lives on), or with one that the hold's loss does not end.
func TestDoContextEndsWhenTheLeaseIsLost(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c, other := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second)), relocktest.New(t, b)
		const name = "guarded:forced"
		ctx := redistest.Context(t, time.Minute)
		stopped := errors.New("fn stopped")
		var cause error
		err := c.Lock(name).Do(ctx, func(held context.Context) error {
			if ok, err := other.Lock(name).ForceUnlock(ctx); !ok || err != nil {
				t.Errorf("ForceUnlock inside Do = %v, %v; want true", ok, err)
			}
			select {
			case <-held.Done():
				cause = context.Cause(held)
				return stopped
			case <-time.After(10 * time.Second):
				return errors.New("fn's context still live 10s after the lock was forced")
			}
		})
		if !errors.Is(cause, relock.ErrLeaseLost) {
			t.Errorf("fn's context ended with %v; want ErrLeaseLost", cause)
		}
		if !errors.Is(err, stopped) || !errors.Is(err, relock.ErrNotHeld) || !strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("Do = %v; want fn's error and ErrNotHeld naming the lock", err)
		}
		if ctx.Err() != nil {
			t.Errorf("the caller's context ended with the hold's: %v", ctx.Err())
		}
	})
}

func TestQueries(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.Lock("queried")
		ctx := redistest.Context(t, time.Minute)
		if locked, err := mu.IsLocked(ctx); locked || err != nil {
			t.Fatalf("IsLocked on a free lock = %v, %v", locked, err)
		}
		held, err := mu.Lock(ctx, rlock.WithLease(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if ttl, err := mu.TTL(held); err != nil || ttl <= 0 || ttl > 10*time.Second {
			t.Errorf("TTL = %v, %v; want within the 10s lease", ttl, err)
		}
		if ok, err := mu.ForceUnlock(ctx); !ok || err != nil {
			t.Errorf("ForceUnlock = %v, %v; want true", ok, err)
		}
		if ok, err := mu.ForceUnlock(ctx); ok || err != nil {
			t.Errorf("second ForceUnlock = %v, %v; want false", ok, err)
		}
		if err := mu.Unlock(held); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock after ForceUnlock: %v; want ErrNotHeld", err)
		}
	})
}
