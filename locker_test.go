package relock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// A Locker is a sync.Locker: goroutines that share one, and goroutines of another client
// with their own, exclude each other; it is not reentrant, even when made from a context
// that carries an owner, and it leaves nothing behind.
func TestLockerExcludes(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		base, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ctx := relock.NewOwner(base)
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
		kinds := map[string]func(c *relock.Client) (sync.Locker, error){
			"lock":     func(c *relock.Client) (sync.Locker, error) { return c.Lock("locker:lock").Locker(ctx) },
			"fairlock": func(c *relock.Client) (sync.Locker, error) { return c.FairLock("locker:fair").Locker(ctx) },
			"rwlock":   func(c *relock.Client) (sync.Locker, error) { return c.RWLock("locker:rw").Locker(ctx) },
			"spinlock": func(c *relock.Client) (sync.Locker, error) { return c.SpinLock("locker:spin").Locker(ctx) },
		}
		for kind, make := range kinds {
			t.Run(kind, func(t *testing.T) {
				l1, err := make(c1)
				if err != nil {
					t.Fatal(err)
				}
				l2, err := make(c2)
				if err != nil {
					t.Fatal(err)
				}
				var inside, most atomic.Int32
				count := 0 // guarded by the lock alone
				var wg sync.WaitGroup
				for i := range 4 {
					l := []sync.Locker{l1, l2}[i%2] // two goroutines per Locker
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 5 {
							l.Lock()
							n := inside.Add(1)
							if n > most.Load() {
								most.Store(n)
							}
							v := count
							time.Sleep(time.Millisecond)
							count = v + 1
							inside.Add(-1)
							l.Unlock()
						}
					}()
				}
				wg.Wait()
				if most.Load() != 1 || count != 20 {
					t.Fatalf("at most %d inside at once, count %d; want 1 and 20", most.Load(), count)
				}
			})
		}
		// The locks' keys are gone at the last Unlock. A wake registry may outlive it a
		// moment: the clients take their entries out in the background (a wake-up passed
		// on, a channel's linger ending), and an entry left runs out by itself. So the
		// registries are looked at until they are gone too, within a bound.
		side := b.Client(t)
		left := func(registries bool) []string {
			var keys []string
			for _, key := range b.Keys(t, side, "*") {
				if strings.HasPrefix(key, "relock_wake") == registries {
					keys = append(keys, key)
				}
			}
			return keys
		}
		report := func(keys []string) {
			for _, key := range keys {
				typ, _ := redistest.Do(t, side, "TYPE", key).ToString()
				t.Errorf("%s (%s, PTTL %dms) left behind", key, typ, redistest.PTTL(t, side, key))
			}
		}
		report(left(false))
		if !redistest.Await(15*time.Second, func() bool { return len(left(true)) == 0 }) {
			report(left(true))
		}
	})
}

// An RLocker's goroutines read together; the write Locker excludes them.
func TestRLockerShares(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rw := relocktest.New(t, b).RWLock("locker:read")
		rl, err := rw.RLocker(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wl, err := rw.Locker(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rl.Lock()
		both := make(chan struct{})
		go func() { rl.Lock(); close(both) }() // a second reader through the same RLocker
		redistest.Recv(t, both, 10*time.Second, "a second read lock while one is held")

		wrote := make(chan struct{})
		go func() { wl.Lock(); close(wrote) }()
		select {
		case <-wrote:
			t.Fatal("the write Locker locked while two readers held the lock")
		case <-time.After(300 * time.Millisecond):
		}
		rl.Unlock()
		rl.Unlock()
		redistest.Recv(t, wrote, 10*time.Second, "the write lock after the readers left")
		wl.Unlock()
	})
}

// Misuse is reported as sync.Mutex reports it, or as an error: an invalid name is an error
// at once; Unlock of a Locker that holds nothing panics naming the lock, and leaves the
// Locker usable: its Lock and Unlock work after the panic. (A Lock that cannot take the
// lock, its context ended, panics with the *Error, which errors.Is finds:
// TestLockerLockEndsWithItsContext.) Guards against a misuse panic that leaves the
// Locker's own state locked, so that its next Lock blocks forever.
func TestLockerMisuse(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		if _, err := c.Lock("").Locker(context.Background()); !errors.Is(err, relock.ErrInvalidName) {
			t.Errorf("Locker of an empty name: %v; want ErrInvalidName", err)
		}
		l, err := c.Lock("locker:misuse").Locker(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := recovered(l.Unlock); !strings.Contains(fmt.Sprint(got), `"locker:misuse"`) {
			t.Errorf("Unlock of an unlocked Locker: panic %v; want one naming the lock", got)
		}
		ctx := redistest.Context(t, 30*time.Second)
		done := make(chan error, 1)
		go func() {
			l.Lock()
			locked, err := c.Lock("locker:misuse").IsLocked(ctx)
			if err == nil && !locked {
				err = errors.New("the lock is free while the Locker holds it")
			}
			l.Unlock()
			done <- err
		}()
		if err := redistest.Recv(t, done, 10*time.Second, "Lock and Unlock of a Locker after its Unlock panicked"); err != nil {
			t.Error(err)
		}
	})
}

// A Locker's Lock waits only as long as the ctx the Locker was made with, for every kind
// of mutex: behind another owner's hold it panics with the *Error of ctx's deadline, naming
// the lock. Guards against a Locker that drops ctx's end and waits for the lock unbounded.
func TestLockerLockEndsWithItsContext(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		for name, locker := range map[string]func(ctx context.Context) (sync.Locker, error){
			"locker:ctx:lock": func(ctx context.Context) (sync.Locker, error) { return c.Lock("locker:ctx:lock").Locker(ctx) },
			"locker:ctx:fair": func(ctx context.Context) (sync.Locker, error) { return c.FairLock("locker:ctx:fair").Locker(ctx) },
			"locker:ctx:spin": func(ctx context.Context) (sync.Locker, error) { return c.SpinLock("locker:ctx:spin").Locker(ctx) },
		} {
			other, err := locker(relock.NewOwner(redistest.Context(t, 30*time.Second)))
			if err != nil {
				t.Fatal(err)
			}
			other.Lock()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			l, err := locker(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan any, 1)
			go func() { got <- recovered(l.Lock) }()
			v := redistest.Recv(t, got, 10*time.Second, "a Locker's Lock with a context of 200ms behind another owner's hold")
			cancel()
			var e *relock.Error
			if err, _ := v.(error); !errors.As(err, &e) || e.Name != name || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: a Locker's Lock whose context ended: panic %v; want the *Error of the deadline", name, v)
			}
			other.Unlock()
		}
	})
}

// A Locker's Unlock panics when the Locker holds nothing, not when its release fails: a
// hold lost under the Locker (another client force-unlocked it) is let go without a panic,
// and the Locker then holds nothing, so a second Unlock panics as sync.Mutex's does.
// Guards against an Unlock that panics on a failed release, which would crash the code
// that took the Locker (a sync.Cond's Wait, say) over a lock that is free anyway.
func TestLockerUnlockOfALostHold(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		const name = "locker:lost"
		l, err := c.Lock(name).Locker(redistest.Context(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		l.Lock()
		if ok, err := other.Lock(name).ForceUnlock(context.Background()); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v; want true", ok, err)
		}
		if got := recovered(l.Unlock); got != nil {
			t.Errorf("Unlock of a Locker whose hold was lost: panic %v; want none", got)
		}
		if got := recovered(l.Unlock); !strings.Contains(fmt.Sprint(got), `"`+name+`"`) {
			t.Errorf("a second Unlock: panic %v; want one naming the lock, the Locker holding nothing", got)
		}
		locked := make(chan struct{})
		go func() { l.Lock(); close(locked) }() // the Locker works on
		redistest.Recv(t, locked, 10*time.Second, "Lock of the Locker after a second Unlock panicked")
		if locked, err := other.Lock(name).IsLocked(context.Background()); !locked || err != nil {
			t.Errorf("IsLocked while the Locker holds the lock again = %v, %v; want true", locked, err)
		}
		l.Unlock()
		if locked, err := other.Lock(name).IsLocked(context.Background()); locked || err != nil {
			t.Errorf("IsLocked after the Locker's Unlock = %v, %v; want false", locked, err)
		}
	})
}

// recovered calls f and returns what it panicked with, or nil.
func recovered(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// A Locker takes the lock with the options the lock was made with, as every acquisition
// through the lock does: a fixed lease (WithLease) is the hold's expiry, with no renewal,
// for each kind of mutex, and a wait bound (WithWaitTimeout) ends a Lock behind another
// owner's hold with a panic of the *Error of context.DeadlineExceeded, long before ctx's
// own end. Guards against a Locker that takes the lock with default settings: a watchdog
// lease of the client's timeout, and a wait bounded only by ctx.
func TestLockerTakesTheLocksOptions(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := redistest.Context(t, 30*time.Second)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		side := b.Client(t)
		const lease = 5 * time.Second
		for name, make := range map[string]func() (sync.Locker, error){
			"locker:opts:lock": func() (sync.Locker, error) {
				return c.Lock("locker:opts:lock", rlock.WithLease(lease)).Locker(ctx)
			},
			"locker:opts:fair": func() (sync.Locker, error) {
				return c.FairLock("locker:opts:fair", rlock.WithLease(lease)).Locker(ctx)
			},
			"locker:opts:spin": func() (sync.Locker, error) {
				return c.SpinLock("locker:opts:spin", rlock.WithLease(lease)).Locker(ctx)
			},
		} {
			l, err := make()
			if err != nil {
				t.Fatal(err)
			}
			l.Lock()
			if ms := redistest.PTTL(t, side, name); ms <= 0 || ms > lease.Milliseconds() {
				t.Errorf("%s taken through its Locker expires in %dms; want within the lock's lease of %v", name, ms, lease)
			}
			l.Unlock()
		}

		const name = "locker:opts:wait"
		held, err := c.Lock(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.Lock(name, rlock.WithWaitTimeout(300*time.Millisecond)).Locker(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan any, 1)
		go func() { got <- recovered(l.Lock) }()
		v := redistest.Recv(t, got, 10*time.Second, "a Locker's Lock with a wait bound of 300ms behind another owner's hold")
		var e *relock.Error
		if err, _ := v.(error); !errors.As(err, &e) || e.Name != name || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a Locker's Lock whose lock's wait bound ran out: panic %v; want the *Error of the deadline", v)
		}
		if err := c.Lock(name).Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// Lockers keep goroutines out of each other's sections through a stall of Redis: four
// goroutines on two clients take and release the lock over and over while Redis stops
// running writes (CLIENT PAUSE WRITE) for 2s, a stall shorter than the client timeout of
// 5s and the lease of 3s. No two are ever inside at once, no Lock panics (every call held
// up by the stall gets its answer once it ends, within the timeout), every section is
// counted, and the lock is free at the end. Guards against a Locker whose Lock returns
// without the lock, or panics, when an attempt or a release is held up by a stall. (A
// stall longer than the timeout would fail a call's first attempt, as WithTimeout says,
// and so panic a Locker's Lock that makes one.)
func TestLockerExcludesThroughAStall(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		ctx := redistest.Context(t, 60*time.Second)
		const name = "locker:stall"
		var lockers []sync.Locker
		for range 2 {
			c := relocktest.New(t, pipelined(t, b), relock.WithTimeout(5*time.Second), relock.WithWatchdogTimeout(3*time.Second))
			l, err := c.Lock(name).Locker(ctx)
			if err != nil {
				t.Fatal(err)
			}
			lockers = append(lockers, l)
		}
		var inside, most atomic.Int32
		count, sections := 0, atomic.Int32{} // count is guarded by the lock alone
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 4 {
			l := lockers[i%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					if v := recover(); v != nil {
						t.Errorf("Lock panicked in the stall: %v", v)
					}
				}()
				for {
					select {
					case <-stop:
						return
					default:
					}
					l.Lock()
					if n := inside.Add(1); n > most.Load() {
						most.Store(n)
					}
					v := count
					time.Sleep(5 * time.Millisecond)
					count = v + 1
					sections.Add(1)
					inside.Add(-1)
					l.Unlock()
				}
			}()
		}
		time.Sleep(300 * time.Millisecond)
		before := sections.Load()
		redistest.MustDo(t, b.Client(t), "CLIENT", "PAUSE", "2000", "WRITE")
		time.Sleep(3 * time.Second) // the stall and a second after it
		close(stop)
		wg.Wait()
		if most.Load() != 1 || count != int(sections.Load()) {
			t.Fatalf("at most %d inside at once, count %d of %d sections; want 1 and every section", most.Load(), count, sections.Load())
		}
		if sections.Load() <= before {
			t.Errorf("%d sections before the stall and %d in all: none ran after it", before, sections.Load())
		}
		if n, err := redistest.Do(t, b.Client(t), "EXISTS", name).AsInt64(); err != nil || n != 0 {
			t.Errorf("after the last Unlock, EXISTS %s = %d, %v; want 0", name, n, err)
		}
	})
}
