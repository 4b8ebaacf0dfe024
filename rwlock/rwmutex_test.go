package rwlock_test

import (
	"context"
	"errors"
	"os"
	"runtime"
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
	"github.com/relock-go/relock/rwlock"
)

func TestMain(m *testing.M) {
	// Main also stops the Redis Cluster the "cluster" subtests share, and checks for leaked goroutines.
	os.Exit(redistest.Main(m))
}

// 8 readers hold at once; a writer waits for all of them and then excludes everyone.
func TestSharedReadersExclusiveWriter(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
		var inside, most atomic.Int32
		release := make(chan struct{})
		ctx := redistest.Context(t, time.Minute)
		var readers sync.WaitGroup
		for i := 0; i < 8; i++ {
			mu := []*relock.Client{c1, c2}[i%2].RWLock("shared")
			readers.Add(1)
			go func() {
				defer readers.Done()
				held, err := mu.RLock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				select {
				case <-release:
				case <-time.After(30 * time.Second):
					t.Error("the reader was never released")
				}
				inside.Add(-1)
				if err := mu.RUnlock(held); err != nil {
					t.Error(err)
				}
			}()
		}
		redistest.Eventually(t, 10*time.Second, "readers did not all get in", func() bool { return inside.Load() == 8 })

		wrote := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			mu := c1.RWLock("shared")
			held, err := mu.Lock(ctx)
			if err == nil {
				if n := inside.Load(); n != 0 {
					err = errors.New("the writer got in with readers inside")
				}
				// While the writer holds it, a reader and another writer are refused.
				if _, rerr := c2.RWLock("shared").TryRLock(context.Background()); !errors.Is(rerr, relock.ErrLocked) {
					err = errors.Join(err, errors.New("a reader got in beside the writer"))
				}
				if _, werr := c2.RWLock("shared").TryLock(context.Background()); !errors.Is(werr, relock.ErrLocked) {
					err = errors.Join(err, errors.New("a second writer got in"))
				}
				err = errors.Join(err, mu.Unlock(held))
			}
			wrote <- err
		}()
		time.Sleep(100 * time.Millisecond)
		select {
		case err := <-wrote:
			t.Fatalf("the writer finished while 8 readers held the lock: %v", err)
		default:
		}
		close(release)
		readers.Wait()
		if err := redistest.Recv(t, wrote, 30*time.Second, "the writer's turn"); err != nil {
			t.Fatal(err)
		}
		if m := most.Load(); m != 8 {
			t.Errorf("at most %d readers inside at once; want 8", m)
		}
	})
}

// 16 goroutines on 2 clients, 500 sections each, a fifth of them writes: whenever a writer
// is inside, nobody else is. Each section stays open for a moment (see hold) and checks
// the invariant on entry and again just before it leaves, so that an overlap has time to
// happen and to be seen. (miniredis runs every script in a fresh Lua interpreter, a
// millisecond or more a call: it gets 100 sections each.)
func TestTorture(t *testing.T) {
	t.Parallel()
	const goroutines = 16
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		sections := 500
		if b.Mini != nil {
			sections = 100
		}
		clients := []*relock.Client{relocktest.New(t, b), relocktest.New(t, b)}
		var readers, writers atomic.Int32
		var violations, reads, writes atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < goroutines; g++ {
			mu := clients[g%2].RWLock("tortured")
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				for s := 0; s < sections; s++ {
					if (g+s)%5 == 0 {
						held, err := mu.Lock(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						if writers.Add(1) != 1 || readers.Load() != 0 {
							violations.Add(1)
						}
						hold()
						if writers.Load() != 1 || readers.Load() != 0 {
							violations.Add(1)
						}
						writes.Add(1)
						writers.Add(-1)
						if err := mu.Unlock(held); err != nil {
							t.Error(err)
							return
						}
						continue
					}
					held, err := mu.RLock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					readers.Add(1)
					if writers.Load() != 0 {
						violations.Add(1)
					}
					hold()
					if writers.Load() != 0 {
						violations.Add(1)
					}
					reads.Add(1)
					readers.Add(-1)
					if err := mu.RUnlock(held); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		t.Logf("%d reads, %d writes, %d violations; waits %+v / %+v", reads.Load(), writes.Load(), violations.Load(), clients[0].PubSubStats(), clients[1].PubSubStats())
		if violations.Load() != 0 || reads.Load()+writes.Load() != int64(goroutines*sections) || writes.Load() != int64(goroutines*sections/5) {
			t.Errorf("%d violations in %d sections; want 0 in %d", violations.Load(), reads.Load()+writes.Load(), goroutines*sections)
		}
	})
}

// hold keeps a critical section open for about 20µs of work, yielding the processor
// between rounds so that other goroutines run meanwhile. It is bounded in rounds, so a
// loaded machine makes it longer, never endless.
func hold() {
	start := time.Now()
	for i := 0; i < 1000 && time.Since(start) < 20*time.Microsecond; i++ {
		runtime.Gosched()
	}
}

// A writer may take read holds and, after releasing the write hold, is a reader; a reader
// asking for the write lock gets ErrUpgrade at once.
func TestDowngradeAndUpgrade(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		mu := c.RWLock("graded")
		ctx := redistest.Context(t, time.Minute)
		held, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if held, err = mu.RLock(held); err != nil {
			t.Fatalf("a writer taking a read hold: %v", err)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if mode, _ := redistest.Do(t, side, "HGET", "graded", "mode").ToString(); mode != "read" {
			t.Errorf("mode after the downgrade = %q; want read", mode)
		}
		if n, _ := mu.RHoldCount(held); n != 1 {
			t.Errorf("read holds after the downgrade = %d; want 1", n)
		}
		// Another reader may join now; another writer may not.
		other, err := c.RWLock("graded").TryRLock(ctx)
		if err != nil {
			t.Errorf("a second reader after the downgrade: %v", err)
		} else if err := c.RWLock("graded").RUnlock(other); err != nil {
			t.Error(err)
		}

		// "At once": a regression that waits instead ends with the context, not with the
		// go test timeout.
		upctx, cancel := context.WithTimeout(held, 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err = mu.Lock(upctx)
		if !errors.Is(err, relock.ErrUpgrade) {
			t.Fatalf("a reader asking for the write lock: %v; want ErrUpgrade", err)
		}
		if !strings.Contains(err.Error(), `"graded"`) {
			t.Errorf("error %q does not name the lock", err)
		}
		t.Logf("ErrUpgrade after %v", time.Since(start).Round(time.Microsecond))
		if _, err := mu.TryLock(held); !errors.Is(err, relock.ErrUpgrade) {
			t.Errorf("TryLock by a reader: %v; want ErrUpgrade", err)
		}
		if err := mu.RUnlock(held); err != nil {
			t.Fatal(err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", "graded").AsInt64(); n != 0 {
			t.Error("the lock is left after its last hold was released")
		}
	})
}

// A reader whose key is deleted behind its back learns it from its context.
func TestReaderLeaseLost(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		// A lease of 1.5s leaves a loaded machine a second to renew: renewals go out every
		// 0.5s, and a hold is lost only when none succeeds for a whole lease.
		const lease = 1500 * time.Millisecond
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(lease))
		side := b.Client(t)
		mu := c.RWLock("fragile")
		held, err := mu.RLock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		before := c.WatchdogStats()
		time.Sleep(lease * 5 / 3) // past the lease: renewed
		if held.Err() != nil {
			t.Fatalf("read hold lost while renewed: %v", context.Cause(held))
		}
		if st := c.WatchdogStats(); st.Renewed == before.Renewed {
			t.Fatalf("watchdog %+v: no renewal in %v", st, lease*5/3)
		}
		redistest.Do(t, side, "DEL", "fragile")
		select {
		case <-held.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the reader was not told its hold was lost")
		}
		if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
			t.Errorf("cause %v; want ErrLeaseLost", context.Cause(held))
		}
		if err := mu.RUnlock(held); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("RUnlock after the loss: %v; want ErrNotHeld", err)
		}
	})
}

func TestRedissonLayout(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		const java = "5df8512c-e096-4359-bc82-07efb0bc9d8e:7"
		channel := "redisson_rwlock:{layout}"
		// On a cluster of Redis 7 Redisson, like relock, sends wake-ups by sharded pub/sub.
		j := javaside.New(side, b.Cluster != nil)
		mu := c.RWLock("layout")

		// A Go reader: the layout Redisson writes for a read hold.
		held, err := mu.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fields, _ := redistest.Do(t, side, "HGETALL", "layout").AsStrMap()
		var goOwner string
		for f := range fields {
			if f != "mode" {
				goOwner = f
			}
		}
		if len(fields) != 2 || fields["mode"] != "read" || fields[goOwner] != "1" || !strings.HasPrefix(goOwner, c.ID()+":") {
			t.Fatalf("hash after a Go read hold = %v; want mode=read and <uuid>:<n>=1", fields)
		}
		timeout := "{layout}:" + goOwner + ":rwlock_timeout:1"
		if p, _ := redistest.Do(t, side, "PTTL", timeout).AsInt64(); p <= 0 {
			t.Errorf("the read hold's timeout key %s: PTTL %d", timeout, p)
		}
		// A Java reader joins it; a Java writer must wait.
		if ok, _, err := j.ReadLock(ctx, "layout", java, 30*time.Second); !ok || err != nil {
			t.Fatalf("Java reader beside a Go reader: %v, %v; want acquired", ok, err)
		}
		if ok, p, err := j.WriteLock(ctx, "layout", java, 30*time.Second); ok || err != nil || p <= 0 {
			t.Fatalf("Java writer while readers hold: %v, %v, %v; want refused, with the PTTL", ok, p, err)
		}
		// The Go reader leaves: the Java reader still holds, the lock lives on.
		if err := mu.RUnlock(held); err != nil {
			t.Fatal(err)
		}
		if n, _ := redistest.Do(t, side, "HGET", "layout", java).AsInt64(); n != 1 {
			t.Fatal("the Java reader's hold was disturbed")
		}
		if u, err := j.ReadUnlock(ctx, "layout", java); u != javaside.Released || err != nil {
			t.Fatalf("Java read unlock = %v, %v; want released", u, err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", "layout").AsInt64(); n != 0 {
			t.Fatal("the last reader's unlock left the lock")
		}

		// A Java writer makes a Go reader wait; its unlock publishes "1" and wakes it.
		if ok, _, err := j.WriteLock(ctx, "layout", java, 30*time.Second); !ok || err != nil {
			t.Fatalf("Java writer: %v, %v; want acquired", ok, err)
		}
		got := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			h, err := mu.RLock(wctx)
			if err == nil {
				err = mu.RUnlock(h)
			}
			got <- err
		}()
		redistest.Eventually(t, 5*time.Second, "Go reader not waiting", func() bool { return c.PubSubStats().Waiting == 1 })
		if u, err := j.WriteUnlock(ctx, "layout", java); u != javaside.Released || err != nil {
			t.Fatalf("Java write unlock = %v, %v; want released", u, err)
		}
		if err := redistest.Recv(t, got, 30*time.Second, "the Go reader's turn"); err != nil {
			t.Fatalf("Go reader after the Java writer: %v", err)
		}
		if st := c.PubSubStats(); st.TimedOut != 0 {
			t.Errorf("stats %+v: the Go reader was not woken by the Java writer's message", st)
		}

		// A Go writer: mode=write, field <owner>:write; its unlock publishes "1".
		msgs := make(chan string, 4)
		dc, cancel := b.Client(t).Dedicate()
		defer cancel()
		var once sync.Once
		ready := make(chan struct{})
		dc.SetPubSubHooks(rueidis.PubSubHooks{
			OnMessage:      func(m rueidis.PubSubMessage) { msgs <- m.Message },
			OnSubscription: func(rueidis.PubSubSubscription) { once.Do(func() { close(ready) }) },
		})
		subscribe := dc.B().Subscribe().Channel(channel).Build()
		if b.Cluster != nil { // the Go unlocks publish with SPUBLISH
			subscribe = dc.B().Ssubscribe().Channel(channel).Build()
		}
		if err := dc.Do(ctx, subscribe).Error(); err != nil {
			t.Fatal(err)
		}
		redistest.Recv(t, ready, 10*time.Second, "the subscription's confirmation")
		w, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fields, _ = redistest.Do(t, side, "HGETALL", "layout").AsStrMap()
		if fields["mode"] != "write" || fields[goOwner] == "" && len(fields) != 2 {
			t.Errorf("hash under a Go writer = %v", fields)
		}
		var writeField string
		for f := range fields {
			if strings.HasSuffix(f, ":write") {
				writeField = f
			}
		}
		if !strings.HasPrefix(writeField, c.ID()+":") {
			t.Errorf("write field %q; want <uuid>:<n>:write", writeField)
		}
		if err := mu.Unlock(w); err != nil {
			t.Fatal(err)
		}
		if m := redistest.Recv(t, msgs, 10*time.Second, "the writer's unlock message"); m != "1" {
			t.Errorf("the Go writer's unlock published %q; want 1", m)
		}
		// The last reader's unlock publishes "0".
		r, err := mu.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := mu.RUnlock(r); err != nil {
			t.Fatal(err)
		}
		if m := redistest.Recv(t, msgs, 10*time.Second, "the last reader's unlock message"); m != "0" {
			t.Errorf("the last reader's unlock published %q; want 0", m)
		}
	})
}

// With writer preference a waiting writer gets in while 8 readers re-acquire in a tight
// loop, before any reader has made 10 more round trips. An anchor reader holds the lock
// while the writer arrives, so that the writer surely waits: the readers' round trips are
// counted from the moment its entry is seen in the writers' zset.
func TestWriterPreference(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
		pref := rwlock.WithWriterPreference()
		stop := make(chan struct{})
		var writerWaiting atomic.Bool
		var sinceWriter [8]atomic.Int32
		var loops atomic.Int64
		var wg sync.WaitGroup
		side := b.Client(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		// On every way out, the readers stop before the test ends.
		var stopOnce sync.Once
		halt := func() { stopOnce.Do(func() { close(stop) }) }
		defer wg.Wait()
		defer cancel()
		defer halt()
		anchor, err := c2.RWLock("preferred", pref).RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 8; i++ {
			mu := []*relock.Client{c1, c2}[i%2].RWLock("preferred", pref)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					held, err := mu.RLock(ctx)
					if err != nil {
						select {
						case <-stop: // the test is over, or failed
						default:
							t.Error(err)
						}
						return
					}
					if writerWaiting.Load() {
						sinceWriter[i].Add(2) // the acquisition and the release below
					}
					loops.Add(1)
					if err := mu.RUnlock(held); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		redistest.Eventually(t, 10*time.Second, "the readers are not going", func() bool { return loops.Load() >= 8 })

		type result struct {
			held context.Context
			err  error
		}
		wrote := make(chan result, 1)
		go func() {
			held, err := c1.RWLock("preferred", pref).Lock(ctx)
			wrote <- result{held, err}
		}()
		// The writer waits from the moment its entry is in the writers' zset.
		for start, n := time.Now(), int64(0); n == 0; {
			if time.Since(start) > 10*time.Second {
				t.Fatal("the writer never registered as waiting")
			}
			select {
			case r := <-wrote:
				t.Fatalf("the writer got in beside the anchor reader: %v", r.err)
			default:
			}
			time.Sleep(time.Millisecond)
			n, _ = redistest.Do(t, side, "ZCARD", "relock_rwlock_writers:{preferred}").AsInt64()
		}
		writerWaiting.Store(true)
		time.Sleep(20 * time.Millisecond) // the readers show whether they give way
		if err := c2.RWLock("preferred").RUnlock(anchor); err != nil {
			t.Fatal(err)
		}
		r := redistest.Recv(t, wrote, 30*time.Second, "the preferred writer's turn")
		writerWaiting.Store(false)
		if r.err != nil {
			t.Fatalf("the writer: %v", r.err)
		}
		most := int32(0)
		for i := range sinceWriter {
			most = max(most, sinceWriter[i].Load())
		}
		t.Logf("most round trips by one reader while the writer waited: %d (%d read sections in all)", most, loops.Load())
		if most >= 10 {
			t.Errorf("a reader made %d round trips while the writer waited; want fewer than 10", most)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", "relock_rwlock_writers:{preferred}").AsInt64(); n != 0 {
			t.Error("the writers' zset is left after the only waiting writer got in")
		}
		halt()
		if err := c1.RWLock("preferred").Unlock(r.held); err != nil {
			t.Fatal(err)
		}
	})
}

// When every hold is released no key of the lock is left: the hash, the read holds'
// timeout keys, the writers' zset, which a writer that waited made; and no unlock leaves a
// key of its own (relock writes no unlock latch).
func TestNoKeysLeft(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		mu := c.RWLock("tidy", rwlock.WithWriterPreference())
		// Every wait below is bounded: a reader that cannot join fails instead of hanging.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		w, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.RWLock("tidy").TryRLock(relock.NewOwner(ctx)); !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("reader beside a writer: %v", err)
		}
		// The writer downgrades; another reader joins it.
		if w, err = mu.RLock(w); err != nil {
			t.Fatal(err)
		}
		if err := mu.Unlock(w); err != nil {
			t.Fatal(err)
		}
		other, err := mu.RLock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		// A second writer waits, registered in the writers' zset.
		wrote := startWaitingWriter(t, mu, side)
		for _, release := range []func() error{func() error { return mu.RUnlock(w) }, func() error { return mu.RUnlock(other) }} {
			if err := release(); err != nil {
				t.Fatal(err)
			}
		}
		if err := redistest.Recv(t, wrote, 30*time.Second, "the waiting writer's turn"); err != nil {
			t.Fatalf("the waiting writer: %v", err)
		}
		if left := b.Keys(t, side, "*tidy*"); len(left) != 0 {
			t.Errorf("keys left after every hold was released: %q", left)
		}
	})
}

// A Java reader's unlock (Redisson's read unlock) on a lock it shares with Go
// (docs/migration-from-redisson.md, "Sharing locks with Java services"): beside a Go
// reader it takes its own hold only, and the Go reader's hold goes on keeping writers out;
// as the last reader it frees the lock and publishes "0", which wakes a Go writer parked
// behind it at once, not when the Java reader's minute of lease would have run out.
func TestRedissonReadUnlockWakesGoWriter(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, 2*time.Minute)
		const name, java, other = "read-shared", "5df8512c-e096-4359-bc82-07efb0bc9d8e:7", "5df8512c-e096-4359-bc82-07efb0bc9d8e:8"
		// On a cluster of Redis 7 Redisson, like relock, sends wake-ups by sharded pub/sub.
		j := javaside.New(b.Client(t), b.Cluster != nil)
		mu := c.RWLock(name)
		type took struct {
			held context.Context
			err  error
		}
		writer := func() <-chan took {
			ch := make(chan took, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
				defer cancel()
				h, err := mu.Lock(relock.NewOwner(wctx))
				ch <- took{h, err}
			}()
			return ch
		}

		// A Go reader and a Java reader; a Go writer waits for both.
		reader, err := mu.RLock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		if ok, _, err := j.ReadLock(ctx, name, java, time.Minute); !ok || err != nil {
			t.Fatalf("Java reader beside a Go reader: %v, %v; want acquired", ok, err)
		}
		wrote := writer()
		redistest.Eventually(t, 10*time.Second, "the Go writer never parked behind the readers", func() bool { return c.PubSubStats().Waiting == 1 })
		if u, err := j.ReadUnlock(ctx, name, java); u != javaside.Released || err != nil {
			t.Fatalf("Java read unlock beside a Go reader = %v, %v; want released", u, err)
		}
		if n, err := mu.RHoldCount(reader); n != 1 || err != nil {
			t.Fatalf("the Go reader's holds after the Java reader left: %d, %v; want 1", n, err)
		}
		if ok, _, err := j.WriteLock(ctx, name, other, time.Minute); ok || err != nil {
			t.Fatalf("Java writer while the Go reader holds: %v, %v; want refused", ok, err)
		}
		select {
		case w := <-wrote:
			t.Fatalf("the Go writer got the lock (%v) while the Go reader held it", w.err)
		default:
		}
		if err := mu.RUnlock(reader); err != nil {
			t.Fatal(err)
		}
		w := redistest.Recv(t, wrote, 30*time.Second, "the Go writer, after the last reader left")
		if w.err != nil {
			t.Fatal(w.err)
		}
		if err := mu.Unlock(w.held); err != nil {
			t.Fatal(err)
		}

		// A Java reader alone: its unlock is the lock's last, and its message wakes the writer.
		if ok, _, err := j.ReadLock(ctx, name, java, time.Minute); !ok || err != nil {
			t.Fatalf("Java reader: %v, %v; want acquired", ok, err)
		}
		wrote = writer()
		redistest.Eventually(t, 10*time.Second, "the Go writer never parked behind the Java reader", func() bool { return c.PubSubStats().Waiting == 1 })
		before := c.PubSubStats()
		if u, err := j.ReadUnlock(ctx, name, java); u != javaside.Released || err != nil {
			t.Fatalf("Java read unlock = %v, %v; want released", u, err)
		}
		w = redistest.Recv(t, wrote, 30*time.Second, "the Go writer, after the Java reader's unlock")
		if w.err != nil {
			t.Fatal(w.err)
		}
		if st := c.PubSubStats(); st.TimedOut != before.TimedOut || st.Woken == before.Woken {
			t.Errorf("stats %+v, before the unlock %+v: want the writer woken by the Java unlock's message", st, before)
		}
		if err := mu.Unlock(w.held); err != nil {
			t.Fatal(err)
		}
	})
}

// A read unlock sets the lock's expiry to the longest read hold that remains, counting
// every timeout key of every reader, as Redisson's read unlock does: a Redisson reader's
// re-entry with a shorter lease leaves its first hold the longest, and the lock must live
// as long as that hold.
func TestReadUnlockKeepsTheLongestReadHold(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		const java = "5df8512c-e096-4359-bc82-07efb0bc9d8e:7"
		j := javaside.New(side, b.Cluster != nil)
		prefix := "{longest}:" + java + ":rwlock_timeout"
		// A Java reader: a hold of 60s, then a re-entry of 5s.
		for _, lease := range []time.Duration{time.Minute, 5 * time.Second} {
			if ok, _, err := j.ReadLock(ctx, "longest", java, lease); !ok || err != nil {
				t.Fatalf("Java reader, lease %v: %v, %v; want acquired", lease, ok, err)
			}
		}
		mu := c.RWLock("longest")
		held, err := mu.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := mu.RUnlock(held); err != nil {
			t.Fatal(err)
		}
		// The lock is read before the hold's key: the key's PTTL can only have dropped since.
		lock, _ := redistest.Do(t, side, "PTTL", "longest").AsInt64()
		hold, _ := redistest.Do(t, side, "PTTL", prefix+":1").AsInt64()
		if hold < 30000 {
			t.Fatalf("the Java reader's first hold has PTTL %dms; want most of its 60s", hold)
		}
		if lock+2 < hold {
			t.Errorf("after a read unlock the lock expires in %dms, before the Java reader's first hold (%dms)", lock, hold)
		}
	})
}

// Under writer preference, new readers wait while a writer is waiting; a writer that only
// tries (TryLock) does not wait, so its failed attempt holds no reader back and leaves no
// entry in the writers' zset.
func TestTryLockWriterHoldsNoReaderBack(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.RWLock("try-writer", rwlock.WithWriterPreference())
		ctx := redistest.Context(t, time.Minute)
		r1, err := mu.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mu.TryLock(ctx); !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("writer's TryLock while a reader holds: %v; want ErrLocked", err)
		}
		if n, err := redistest.Do(t, b.Client(t), "ZCARD", "relock_rwlock_writers:{try-writer}").AsInt64(); err != nil || n != 0 {
			t.Errorf("writers registered after a failed TryLock: %d %v; want none", n, err)
		}
		r2, err := mu.TryRLock(ctx)
		if err != nil {
			t.Fatalf("another reader's TryRLock after a writer's failed TryLock: %v; want it in beside the first", err)
		}
		for _, r := range []context.Context{r2, r1} {
			if err := mu.RUnlock(r); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Writer preference is decided on both sides (WithWriterPreference: readers decide to
// give way, writers decide to register): a writer that waits without the option registers
// nowhere, so a reader that has it still enters beside the reader holding the lock.
func TestWriterWithoutPreferenceHoldsNoReaderBack(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		plain := c.RWLock("plain-writer")
		r1, err := plain.RLock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		wrote := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			w, err := plain.Lock(relock.NewOwner(wctx))
			if err == nil {
				err = plain.Unlock(w)
			}
			wrote <- err
		}()
		redistest.Eventually(t, 10*time.Second, "the writer did not park", func() bool { return c.PubSubStats().Waiting == 1 })
		if n, err := redistest.Do(t, b.Client(t), "EXISTS", "relock_rwlock_writers:{plain-writer}").AsInt64(); err != nil || n != 0 {
			t.Errorf("writers zset while a writer without preference waits: EXISTS %d %v; want 0", n, err)
		}
		r2, err := c.RWLock("plain-writer", rwlock.WithWriterPreference()).TryRLock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatalf("a preferring reader's TryRLock while a writer without preference waits: %v; want it in beside the first reader", err)
		}
		for _, r := range []context.Context{r2, r1} {
			if err := plain.RUnlock(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := redistest.Recv(t, wrote, 30*time.Second, "the writer's turn"); err != nil {
			t.Fatalf("writer: %v", err)
		}
	})
}
