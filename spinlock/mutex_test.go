package spinlock_test

import (
	"context"
	"errors"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/spinlock"
)

func TestMain(m *testing.M) {
	// Main also stops the Redis Cluster the "cluster" subtests share, and checks for leaked goroutines.
	os.Exit(redistest.Main(m))
}

// Workers on two clients that wait for a spin lock exclude each other and all get in,
// while neither client subscribes to anything and no unlock publishes on the lock's
// channel (a listener of its own hears only the marker published after the last unlock).
// Guards against spin waiters that subscribe like rlock's (the point of the kind is that
// they do not), and against an unlock that publishes anyway.
func TestSpinWaitersNeverSubscribe(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name, workers, rounds = "spin:counter", 4, 5
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		listener := b.Listen(t, "redisson_lock__channel:{"+name+"}")
		clients := []*relock.Client{relocktest.New(t, b), relocktest.New(t, b)}
		var inside, counter int
		var mu sync.Mutex
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := clients[w%2].SpinLock(name, spinlock.WithBackOff(time.Millisecond, 20*time.Millisecond))
				for range rounds {
					err := l.Do(ctx, func(context.Context) error {
						mu.Lock()
						inside++
						n := inside
						mu.Unlock()
						if n > 1 {
							return errors.New("two owners inside at once")
						}
						time.Sleep(5 * time.Millisecond)
						mu.Lock()
						inside--
						counter++
						mu.Unlock()
						return nil
					})
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if counter != workers*rounds {
			t.Errorf("counter %d; want %d", counter, workers*rounds)
		}
		for i, c := range clients {
			if st := c.PubSubStats(); st.Channels != 0 || st.Messages != 0 {
				t.Errorf("client %d subscribed while spinning: %+v", i, st)
			}
		}
		// Publish a marker the way the lock would: everything the unlocks published
		// arrives before it.
		rc := b.Client(t)
		pub := rc.B().Publish().Channel("redisson_lock__channel:{" + name + "}").Message("marker").Build()
		if b.Cluster != nil {
			pub = rc.B().Spublish().Channel("redisson_lock__channel:{" + name + "}").Message("marker").Build()
		}
		if err := rc.Do(ctx, pub).Error(); err != nil {
			t.Fatal(err)
		}
		redistest.Eventually(t, 10*time.Second, "the marker heard", func() bool { return len(listener.Messages()) > 0 })
		if msgs := listener.Messages(); len(msgs) != 1 || msgs[0] != "marker" {
			t.Errorf("the lock's channel carried %q; want only the marker: a spin lock's unlock publishes nothing", msgs)
		}
	})
}

// A spin lock has rlock's data: an rlock.Mutex and a spin lock of one name exclude each
// other both ways, a spin waiter gets the lock once an rlock holder unlocks, and the hash
// holds the owner's count as an RLock's does. Guards against a spin lock with data of its
// own, which would let both in.
func TestSpinSharesRLockData(t *testing.T) {
	// One name in each shard of the test cluster (slots 15224, 2843 and 6970).
	for _, name := range []string{"{s1}:spin", "{s2}:spin", "{s3}:spin"} {
		t.Run(name, func(t *testing.T) { spinSharesRLockData(t, name) })
	}
}

func spinSharesRLockData(t *testing.T, name string) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		a, c := relocktest.New(t, b), relocktest.New(t, b)
		held, err := a.Lock(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.SpinLock(name).TryLock(ctx); !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("spin TryLock while an rlock holds it: %v; want ErrLocked", err)
		}
		got := make(chan error, 1)
		go func() {
			h, err := c.SpinLock(name, spinlock.WithBackOff(time.Millisecond, 10*time.Millisecond)).Lock(ctx)
			if err == nil {
				var n int
				if n, err = c.SpinLock(name).HoldCount(h); err == nil && n != 1 {
					err = errors.New("hold count not 1")
				}
				if err == nil {
					fields, herr := b.Client(t).Do(ctx, b.Client(t).B().Hgetall().Key(name).Build()).AsStrMap()
					if herr != nil || len(fields) != 1 {
						err = errors.Join(herr, errors.New("the spin hold's hash is not one owner's count"))
					}
					for f, v := range fields {
						if v != "1" || len(f) < 38 || f[:36] != c.ID() {
							err = errors.New("the spin hold's field is not " + c.ID() + ":<n> → 1: " + f + " → " + v)
						}
					}
				}
				if _, terr := a.Lock(name).TryLock(ctx); !errors.Is(terr, relock.ErrLocked) {
					err = errors.Join(err, errors.New("an rlock TryLock got in beside the spin hold"))
				}
				err = errors.Join(err, c.SpinLock(name).Unlock(h))
			}
			got <- err
		}()
		time.Sleep(50 * time.Millisecond) // the spin waiter tries a few times meanwhile
		if err := a.Lock(name).Unlock(held); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, got, 20*time.Second, "the spin waiter"); err != nil {
			t.Fatal(err)
		}
	})
}

// A waiter's back-off grows: behind a hold of a second, a spin waiter starting at 1ms and
// growing to 128ms tries a few dozen times at most (a waiter that kept trying every 1ms
// would try hundreds of times), and more than a few. Guards against a back-off that does
// not grow, and against one that sleeps the whole lease.
func TestSpinBackOffGrows(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		tries, _ := spinBehind(t, b, "spin:backoff", time.Second)
		if tries < 4 || tries > 40 {
			t.Errorf("the spin waiter tried %d times over about a second; want a back-off from 1ms growing to 128ms (about 15 tries)", tries)
		}
	})
}

// spinBehind has a spin waiter with opts wait behind a hold of name with a lease of a
// minute, which is unlocked after about hold, and returns how many times the waiter tried
// (its acquire calls, counted on the server) and how long its Lock took.
func spinBehind(t *testing.T, b *redistest.Backend, name string, hold time.Duration, opts ...spinlock.Option) (int64, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	holder, waiter := relocktest.New(t, b), relocktest.New(t, b)
	held, err := holder.Lock(name).Lock(ctx, rlock.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	cc := b.Commands(t)
	before := cc.Calls(t)["evalsha"]
	type result struct {
		took time.Duration
		err  error
	}
	got := make(chan result, 1)
	go func() {
		l := waiter.SpinLock(name, opts...)
		start := time.Now()
		h, err := l.Lock(ctx)
		took := time.Since(start)
		if err == nil {
			err = l.Unlock(h)
		}
		got <- result{took, err}
	}()
	time.Sleep(hold)
	if err := holder.Lock(name).Unlock(held); err != nil {
		t.Fatal(err)
	}
	r := redistest.Recv(t, got, hold+40*time.Second, "the spin waiter")
	if r.err != nil {
		t.Fatal(r.err)
	}
	// The waiter's tries, its unlock and the holder's unlock.
	return cc.Calls(t)["evalsha"] - before - 2, r.took
}

// A back-off out of range fails the call with ErrInvalidOption naming the lock, and
// nothing is written. Guards against a zero back-off (a waiter that hammers Redis) and a
// most below the first being taken.
func TestSpinBadBackOff(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := relocktest.New(t, b)
		for _, o := range []spinlock.Option{
			spinlock.WithBackOff(0, time.Second),
			spinlock.WithBackOff(time.Microsecond, time.Second),
			spinlock.WithBackOff(10*time.Millisecond, time.Millisecond),
		} {
			_, err := c.SpinLock("spin:bad").Lock(ctx, o)
			var e *relock.Error
			if !errors.Is(err, relock.ErrInvalidOption) || !errors.As(err, &e) || e.Name != "spin:bad" {
				t.Errorf("Lock with a bad back-off: %v; want ErrInvalidOption naming spin:bad", err)
			}
		}
		if n, err := b.Client(t).Do(ctx, b.Client(t).B().Exists().Key("spin:bad").Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("the refused calls left the key (EXISTS %d, %v)", n, err)
		}
	})
}

// A spin waiter never sleeps past the holder's remaining lease as its last try saw it:
// behind a hold with a fixed lease of 2s that is never unlocked (a crashed holder), a
// waiter whose back-off starts at a minute tries again when the lease runs out, and gets
// the lock well within the 20s bound. Guards against a back-off that ignores the
// holder's lease, which would sleep the whole minute.
func TestSpinSleepsNoLongerThanTheLease(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "spin:lease-bound"
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		holder, waiter := relocktest.New(t, b), relocktest.New(t, b)
		held, err := holder.Lock(name).Lock(ctx, rlock.WithLease(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer runtime.KeepAlive(held) // never unlocked: the hold ends with its lease
		got := make(chan error, 1)
		go func() {
			l := waiter.SpinLock(name, spinlock.WithBackOff(time.Minute, time.Minute))
			h, err := l.Lock(ctx)
			if err == nil {
				err = l.Unlock(h)
			}
			got <- err
		}()
		if err := redistest.Recv(t, got, 20*time.Second, "the spin waiter behind a 2s lease (its back-off is a minute)"); err != nil {
			t.Fatal(err)
		}
	})
}

// A back-off of any length the option accepts is slept without arithmetic overflow: a
// waiter whose back-off starts at half the longest duration (doubled, with its random
// part, it would overflow) spins behind a hold that the watchdog renews every third of a
// second, each sleep bounded by the holder's remaining lease, and gets the lock when the
// holder unlocks about 2.5s later. Guards against the doubling overflowing, which turned
// the back-off negative and panicked inside Lock on the next try.
func TestSpinHugeBackOff(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "spin:huge"
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		holder := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second))
		waiter := relocktest.New(t, b)
		held, err := holder.Lock(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			l := waiter.SpinLock(name, spinlock.WithBackOff(math.MaxInt64/2, math.MaxInt64))
			h, err := l.Lock(ctx)
			if err == nil {
				err = l.Unlock(h)
			}
			got <- err
		}()
		time.Sleep(2500 * time.Millisecond)
		if err := holder.Lock(name).Unlock(held); err != nil && !errors.Is(err, relock.ErrNotHeld) {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, got, 20*time.Second, "the spin waiter with a huge back-off"); err != nil {
			t.Fatal(err)
		}
	})
}

// A waiter's back-off doubles: each sleep is at least twice the one before (up to most),
// so that a waiter starting at 100ms has tried at most 1+log2(E/100ms+1) times by the
// time E it got the lock, however slow the machine (a slower machine only sleeps longer).
// Behind a hold of about 4s (its lease a minute, far beyond the sleeps), that is 6 tries;
// a back-off that grew by half at most each time would try about 10 times. Guards against
// a back-off that grows, but slower than it promises.
func TestSpinBackOffDoubles(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		tries, took := spinBehind(t, b, "spin:doubles", 4*time.Second, spinlock.WithBackOff(100*time.Millisecond, time.Minute))
		most := 1 + int64(math.Floor(math.Log2(float64(took)/float64(100*time.Millisecond)+1)))
		if tries > most {
			t.Errorf("the spin waiter tried %d times in %v; a back-off from 100ms that doubles tries at most %d times", tries, took.Round(time.Millisecond), most)
		}
	})
}

// A waiter's back-off grows up to its most and no further: behind a hold of about 3s (its
// lease a minute, far beyond the sleeps), a waiter whose back-off is 10ms to 20ms sleeps at
// most 20ms a time, about 150 tries; 30 leaves room for a loaded machine (100ms a try). A
// back-off that kept doubling past its most would have slept the 3s in about 8 tries.
// Guards against the most being ignored.
func TestSpinBackOffStopsAtItsMost(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		tries, took := spinBehind(t, b, "spin:most", 3*time.Second, spinlock.WithBackOff(10*time.Millisecond, 20*time.Millisecond))
		t.Logf("%d tries in %v", tries, took.Round(time.Millisecond))
		if tries < 30 {
			t.Errorf("the spin waiter tried %d times in %v; a back-off of at most 20ms tries about 150 times", tries, took.Round(time.Millisecond))
		}
	})
}

// A spin waiter's context ends its wait in the middle of a back-off: behind a hold with a
// lease of a minute, a waiter whose back-off is a minute returns with the context's error
// once it is cancelled, well within the 15s bound, not when its sleep is over. Guards
// against a back-off sleep that does not watch the context.
func TestSpinWaiterContextEndsTheSleep(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "spin:ctx"
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		holder, waiter := relocktest.New(t, b), relocktest.New(t, b)
		held, err := holder.Lock(name).Lock(ctx, rlock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithCancel(ctx)
		defer wcancel()
		got := make(chan error, 1)
		go func() {
			_, err := waiter.SpinLock(name, spinlock.WithBackOff(time.Minute, time.Minute)).Lock(wctx)
			got <- err
		}()
		time.Sleep(500 * time.Millisecond) // the waiter has tried once and sleeps
		wcancel()
		if err := redistest.Recv(t, got, 15*time.Second, "the spin waiter after its context was cancelled (its back-off is a minute)"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock = %v; want errors.Is context.Canceled", err)
		}
		if err := holder.Lock(name).Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// spinWoken is an observer that hands on what ended each acquisition's wait.
type spinWoken struct {
	observe.Base
	woken chan observe.Woken
}

func (o spinWoken) Acquired(a observe.Acquisition) { o.woken <- a.Woken }

// An observer hears how a spin waiter got the lock: NotWaited for a first attempt that
// got it, ByBackOff for a waiter that got it on a try after a back-off (behind a hold
// whose lease of 5s runs out). Guards against a
// spin acquisition reported with another cause than the one package observe names for it.
func TestSpinObserverHearsBackOff(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "spin:observed"
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rec := spinWoken{woken: make(chan observe.Woken, 4)}
		holder, waiter := relocktest.New(t, b), relocktest.New(t, b, relock.WithObserver(rec))
		l := waiter.SpinLock(name, spinlock.WithBackOff(10*time.Millisecond, 50*time.Millisecond))
		h, err := l.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if w := redistest.Recv(t, rec.woken, 10*time.Second, "the observer's Acquired"); w != observe.NotWaited {
			t.Errorf("uncontended Lock observed as woken %v; want %v", w, observe.NotWaited)
		}
		if err := l.Unlock(h); err != nil {
			t.Fatal(err)
		}
		// A hold that is never unlocked, with a lease of 5s: the waiter finds it held and
		// gets the lock on a try after the lease has run out.
		held, err := holder.Lock(name).Lock(ctx, rlock.WithLease(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer runtime.KeepAlive(held)
		if h, err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		} else if err := l.Unlock(h); err != nil {
			t.Fatal(err)
		}
		if w := redistest.Recv(t, rec.woken, 10*time.Second, "the observer's Acquired"); w != observe.ByBackOff {
			t.Errorf("a spin waiter's Lock observed as woken %v; want %v", w, observe.ByBackOff)
		}
	})
}

// The spin lock answers as Redisson's RSpinLock does, and as an RLock: its tests' sequences
// (getHoldCount, isHeldByCurrentThread and isLocked seen by the owner and by another,
// re-entry through tryLock refused to another owner, unlock by a non-owner, forceUnlock,
// remainTimeToLive of a fixed lease and of the watchdog's, a fixed lease that runs out
// under its holder, and RFencedLock's tokens 1, 2, 3... for every first-level
// acquisition). Guards against a spin layout whose calls differ from rlock's where they
// must not: a release that counts or checks the owner otherwise, a ForceUnlock that
// deletes nothing, an acquisition that drops its lease or its token.
func TestSpinHoldsLikeRLock(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "spin:like-rlock"
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b) // watchdog timeout: the default 30s
		side := b.Client(t)
		redistest.MustDo(t, side, "DEL", name, "redisson_lock_token:{"+name+"}")
		mu, other := c1.SpinLock(name, rlock.WithFencing()), c2.SpinLock(name, rlock.WithFencing())
		ctx := redistest.Context(t, time.Minute)
		owner, stranger := relock.NewOwner(ctx), relock.NewOwner(ctx)
		var last int64
		token := func(m *spinlock.Mutex, held context.Context) {
			t.Helper()
			tok, ok := m.Token(held)
			if !ok || tok != last+1 {
				t.Errorf("token %d (ok %v); want %d, one above the last first-level acquisition's", tok, ok, last+1)
			}
			last = tok
		}
		state := func(what string, count int, locked bool) {
			t.Helper()
			relocktest.CheckHolds(t, what, mu, owner, count, other, stranger, locked)
		}

		state("free", 0, false)
		held, err := mu.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		token(mu, held)
		state("held", 1, true)
		again, err := mu.TryLock(held)
		if err != nil {
			t.Fatalf("re-entry by TryLock: %v", err)
		}
		if tok, _ := mu.Token(again); tok != last {
			t.Errorf("re-entry's token %d; want its hold's %d", tok, last)
		}
		state("re-entered", 2, true)
		if _, err := other.TryLock(stranger); !errors.Is(err, relock.ErrLocked) {
			t.Errorf("TryLock by another owner: %v; want ErrLocked", err)
		}
		if err := other.Unlock(stranger); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock by another owner: %v; want ErrNotHeld", err)
		}
		state("after a stranger's unlock", 2, true)
		if err := mu.Unlock(again); err != nil {
			t.Fatal(err)
		}
		state("one unlock", 1, true)
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		state("unlocked", 0, false)
		if err := mu.Unlock(owner); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock of a free lock: %v; want ErrNotHeld", err)
		}

		// remainTimeToLive: a fixed lease of an hour, then the watchdog's 30s.
		held, err = mu.Lock(owner, rlock.WithLease(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		token(mu, held)
		if d, err := mu.TTL(held); err != nil || d <= 59*time.Minute || d > time.Hour {
			t.Errorf("TTL of an hour's lease = %v, %v; want within a minute below an hour", d, err)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if d, err := mu.TTL(owner); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("TTL after the unlock = %v, %v; want ErrNotHeld", d, err)
		}
		held, err = mu.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		token(mu, held)
		if d, err := mu.TTL(held); err != nil || d <= 20*time.Second || d > 30*time.Second {
			t.Errorf("TTL under the watchdog = %v, %v; want near its 30s", d, err)
		}

		// forceUnlock, by another client.
		if ok, err := other.ForceUnlock(ctx); !ok || err != nil {
			t.Errorf("ForceUnlock = %v, %v; want true", ok, err)
		}
		state("forced", 0, false)
		if ok, err := other.ForceUnlock(ctx); ok || err != nil {
			t.Errorf("ForceUnlock of a free lock = %v, %v; want false", ok, err)
		}
		if err := mu.Unlock(held); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock after ForceUnlock: %v; want ErrNotHeld", err)
		}

		// A fixed lease runs out under its holder: another client's waiter gets the lock,
		// and the holder's unlock is refused.
		const lease = time.Second
		held, err = mu.Lock(owner, rlock.WithLease(lease))
		if err != nil {
			t.Fatal(err)
		}
		token(mu, held)
		wctx, cancel := context.WithTimeout(stranger, 20*time.Second)
		defer cancel()
		theirs, err := other.Lock(wctx)
		if err != nil {
			t.Fatalf("a waiter behind a %v lease that runs out: %v", lease, err)
		}
		if err := held.Err(); err == nil {
			t.Error("the holder's context is live while another owner holds the lock")
		}
		token(other, theirs)
		if err := mu.Unlock(held); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock after the lease ran out: %v; want ErrNotHeld", err)
		}
		if err := other.Unlock(theirs); err != nil {
			t.Fatal(err)
		}

		// tryLockAndGetToken: one above every token before it, taken by any client.
		if held, err = mu.TryLock(owner); err != nil {
			t.Fatal(err)
		}
		token(mu, held)
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if last != 6 {
			t.Errorf("%d tokens handed out; want 6", last)
		}
	})
}

// A spin lock's ForceUnlock publishes the unlock message, "0", on the lock's channel, so
// that a pub/sub waiter on the name (rlock's, Redisson's RLock's, which acts on that
// message only) looks at once: behind a spin hold with a lease of a minute, an rlock
// waiter of another client gets the lock within seconds of the ForceUnlock, not when the
// lease it saw would have run out, and the first message on the channel is "0". Guards
// against a ForceUnlock that publishes nothing, or another message than Redisson's
// waiters act on, as though it were the spin lock's Unlock.
func TestSpinForceUnlockWakesPubSubWaiters(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "spin:forced"
		ctx := redistest.Context(t, 30*time.Second)
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		listener := b.Listen(t, keys.Of(name).Channel)
		if _, err := c.SpinLock(name, rlock.WithLease(time.Minute)).Lock(ctx); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		taken := make(chan struct{})
		go func() {
			held, err := other.Lock(name).Lock(ctx)
			if err == nil {
				<-taken
				err = other.Lock(name).Unlock(held)
			}
			got <- err
		}()
		defer close(taken)
		redistest.Eventually(t, 10*time.Second, "the rlock waiter never parked", func() bool { return relocktest.Waiting(other) == 1 })
		if ok, err := c.SpinLock(name).ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v; want true", ok, err)
		}
		redistest.Eventually(t, 5*time.Second, "the rlock waiter did not get the lock after the spin lock's ForceUnlock (the lease is a minute)", func() bool {
			ok, err := other.Lock(name).IsLocked(ctx)
			return ok && err == nil && relocktest.Waiting(other) == 0
		})
		// The listener is a connection of its own: its copy of the message may come after
		// the waiter's, on a loaded machine.
		redistest.Eventually(t, 5*time.Second, "nothing on the lock's channel after ForceUnlock", func() bool { return len(listener.Messages()) > 0 })
		if msgs := listener.Messages(); msgs[0] != "0" {
			t.Errorf("the lock's channel carried %q; want the unlock message \"0\" first, from ForceUnlock", msgs)
		}
		taken <- struct{}{}
		if err := redistest.Recv(t, got, 10*time.Second, "the rlock waiter's Unlock"); err != nil {
			t.Fatalf("the rlock waiter: %v", err)
		}
	})
}

// A spin waiter registers its client nowhere to be woken: behind another owner's hold, after
// five tries or more, the lock's wake registry (where rlock's waiters register their
// client for an unlock to pick) does not exist, and once the waiter has taken and released
// the lock no key of the name is left. Guards against a spin attempt that sends its
// client's wake code, as rlock's waiting attempts do: the client would be registered for
// wake-ups it never listens for, and the registry left behind to run out.
func TestSpinWaitersRegisterNowhere(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "spin:unregistered"
		ctx := redistest.Context(t, 30*time.Second)
		calls := &countingClient{Client: b.Client(t)}
		c := relocktest.On(t, calls)
		other := relocktest.New(t, b)
		side := b.Client(t)
		held, err := other.Lock(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			mu := c.SpinLock(name, spinlock.WithBackOff(10*time.Millisecond, 20*time.Millisecond))
			h, err := mu.Lock(ctx)
			if err == nil {
				err = mu.Unlock(h)
			}
			got <- err
		}()
		// Look only once the waiter has tried a few times: a fixed pause could end before it
		// tried at all on a loaded machine, and the check below would then pass whatever the
		// waiter does.
		from := calls.n.Load()
		redistest.Eventually(t, 10*time.Second, "five attempts of the spin waiter", func() bool { return calls.n.Load() >= from+5 })
		wake := keys.Of(name).Wake
		if n := redistest.Do(t, side, "EXISTS", wake); n.Error() != nil {
			t.Fatal(n.Error())
		} else if v, _ := n.AsInt64(); v != 0 {
			t.Errorf("while a spin waiter waits, the wake registry %s exists: the spin client registered to be woken", wake)
		}
		if err := other.Lock(name).Unlock(held); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, got, 10*time.Second, "the spin waiter"); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{name, wake} {
			if v, _ := redistest.Do(t, side, "EXISTS", key).AsInt64(); v != 0 {
				t.Errorf("%s left behind (PTTL %dms)", key, redistest.PTTL(t, side, key))
			}
		}
	})
}

// countingClient counts the commands a relock client sends through it.
type countingClient struct {
	rueidis.Client
	n atomic.Int64
}

func (c *countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.Do(ctx, cmd)
}

// Close ends a spin waiter's wait with ErrClosed, naming the lock, as it ends a subscribed
// waiter's: behind another client's hold, renewed by its watchdog, a waiter with the
// default back-off and one whose back-off is a minute return within the 10s bound of
// Close, and send nothing more (the first used to try again every back-off for as long as
// its context lived, on a client that was closed).
func TestSpinWaiterEndsAtClose(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "spin:close"
		ctx := redistest.Context(t, time.Minute)
		holder, waiter := relocktest.New(t, b), relocktest.New(t, b)
		held, err := holder.Lock(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Lock(name).Unlock(held)
		got := make(chan error, 2)
		for _, most := range []time.Duration{spinlock.DefaultMostBackOff, time.Minute} {
			go func() {
				_, err := waiter.SpinLock(name, spinlock.WithBackOff(spinlock.DefaultFirstBackOff, most)).Lock(ctx)
				got <- err
			}()
		}
		time.Sleep(500 * time.Millisecond) // both waiters have tried, and sleep
		if err := waiter.Close(); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			err := redistest.Recv(t, got, 10*time.Second, "a spin waiter after its client closed")
			var le *relock.Error
			if !errors.Is(err, relock.ErrClosed) || !errors.As(err, &le) || le.Name != name {
				t.Fatalf("Lock = %v; want ErrClosed naming %q", err, name)
			}
		}
	})
}
