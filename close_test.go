package relock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// Close releases every hold of the client, as etcd's Session.Close revokes its lease: a
// restarted program must not wait out its previous run's leases. Each kind's hold is freed
// through its unlock path, so a waiter in another client is woken at once, and the holds'
// contexts end with cause ErrClosed.
func TestCloseReleasesHolds(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		closing := relocktest.New(t, b)
		other := relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)

		mu := closing.Lock("close:plain")
		plain, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if plain, err = mu.Lock(plain); err != nil { // re-entered: two holds
			t.Fatal(err)
		}
		fixed, err := closing.Lock("close:fixed", rlock.WithLease(time.Minute)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		read, err := closing.RWLock("close:rw").RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fair, err := closing.FairLock("close:fair").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}

		// A waiter in the other client, behind the re-entered hold.
		got := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			held, err := other.Lock("close:plain").Lock(wctx)
			if err == nil {
				err = other.Lock("close:plain").Unlock(held)
			}
			got <- err
		}()
		redistest.Eventually(t, 10*time.Second, "the waiter never parked", func() bool { return relocktest.Waiting(other) == 1 })

		if err := closing.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		// Released when Close returns: no lease has to run out.
		for _, try := range []struct {
			name string
			try  func() (context.Context, error)
		}{
			{"fixed lease", func() (context.Context, error) { return other.Lock("close:fixed").TryLock(ctx) }},
			{"read hold", func() (context.Context, error) { return other.RWLock("close:rw").TryLock(ctx) }},
			{"fair lock", func() (context.Context, error) { return other.FairLock("close:fair").TryLock(ctx) }},
		} {
			if _, err := try.try(); err != nil {
				t.Errorf("%s: TryLock after Close: %v; want the hold released", try.name, err)
			}
		}
		if err := redistest.Recv(t, got, time.Second, "the other client's waiter, within a second of Close"); err != nil {
			t.Fatal(err)
		}
		for name, held := range map[string]context.Context{"plain": plain, "fixed": fixed, "read": read, "fair": fair} {
			if held.Err() == nil || !errors.Is(context.Cause(held), relock.ErrClosed) {
				t.Errorf("%s hold's context: err %v, cause %v; want ended with ErrClosed", name, held.Err(), context.Cause(held))
			}
		}
		if err := closing.Close(); err != nil {
			t.Errorf("second Close: %v; want nil", err)
		}
	})
}

// WithReleaseOnClose(false) keeps the old behaviour: the holds run out their leases.
func TestCloseCanLeaveHolds(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		closing := relocktest.New(t, b, relock.WithReleaseOnClose(false))
		other := relocktest.New(t, b)
		held, err := closing.Lock("close:kept").Lock(redistest.Context(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := closing.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Lock("close:kept").TryLock(context.Background()); !errors.Is(err, relock.ErrLocked) {
			t.Errorf("TryLock after Close: %v; want ErrLocked, the hold left to its lease", err)
		}
		if !errors.Is(context.Cause(held), relock.ErrClosed) {
			t.Errorf("hold's context cause %v; want ErrClosed", context.Cause(held))
		}
	})
}

// Close frees the client's holds for the other clients' waiters even while waiters of its
// own are parked on the same locks: those end with ErrClosed and take nothing, and the
// release wakes another client's waiter at once, for the plain lock and both sides of the
// read-write lock. Guards against a Close whose release woke (through the wake registry)
// its own client, which no longer acted on it, or whose own waiter took the lock as the
// client closed, leaving it held by nobody for a lease: either way the other client's
// waiter slept out the 30s lease.
func TestCloseWithWaitersOfItsOwn(t *testing.T) {
	type kind struct {
		name string
		lock func(c *relock.Client, ctx context.Context) (context.Context, error)
	}
	kinds := []kind{
		{"rlock", func(c *relock.Client, ctx context.Context) (context.Context, error) {
			return c.Lock("close:own").Lock(ctx)
		}},
		{"write", func(c *relock.Client, ctx context.Context) (context.Context, error) {
			return c.RWLock("close:own").Lock(ctx)
		}},
		{"read", func(c *relock.Client, ctx context.Context) (context.Context, error) {
			return c.RWLock("close:own").RLock(ctx)
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				closing, other := relocktest.New(t, b), relocktest.New(t, b)
				ctx := redistest.Context(t, time.Minute)
				// The closing client holds the lock exclusively (a read-write lock's write side);
				// the waiters want what they cannot share with it.
				hold := kinds[0].lock
				if k.name != "rlock" {
					hold = kinds[1].lock
				}
				first, err := hold(closing, relock.NewOwner(ctx))
				if err != nil {
					t.Fatal(err)
				}
				// Kept to the end: a hold nothing can name is abandoned, and Close does not
				// release it.
				defer runtime.KeepAlive(first)
				own := make(chan error, 1)
				go func() {
					_, err := k.lock(closing, relock.NewOwner(ctx))
					own <- err
				}()
				redistest.Eventually(t, 10*time.Second, "the closing client's waiter never parked", func() bool { return closing.PubSubStats().Waiting == 1 })
				theirs := make(chan error, 1)
				go func() {
					held, err := k.lock(other, relock.NewOwner(ctx))
					if err == nil && held.Err() != nil {
						err = context.Cause(held)
					}
					theirs <- err
				}()
				redistest.Eventually(t, 10*time.Second, "the other client's waiter never parked", func() bool { return other.PubSubStats().Waiting == 1 })

				if err := closing.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				if err := redistest.Recv(t, own, 10*time.Second, "the closing client's own waiter"); !errors.Is(err, relock.ErrClosed) {
					t.Errorf("the closing client's waiter: %v; want ErrClosed", err)
				}
				if err := redistest.Recv(t, theirs, 5*time.Second, "the other client's waiter after the holder's client closed (the lease is 30s)"); err != nil {
					t.Errorf("the other client's waiter: %v", err)
				}
			})
		})
	}
}

// Close returns the errors of the releases that failed, joined, each naming its lock, and
// releases the other holds all the same. Two of the client's three holds were overwritten
// with strings behind its back, which the unlock script refuses (ErrWrongType) and leaves
// as they are. Guards against a Close that drops its releases' errors (its caller would
// take every lock for free while those run out their leases) or reports only one of them.
func TestCloseReportsWhatItCouldNotRelease(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		closing := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		spoilt := []string{"close:spoilt-a", "close:spoilt-b"}
		const freed = "close:freed"
		for _, name := range append([]string{freed}, spoilt...) {
			if _, err := closing.Lock(name).Lock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range spoilt {
			redistest.MustDo(t, side, "SET", name, "spoilt")
		}

		err := closing.Close()
		if got := relocktest.Named(err, relock.ErrWrongType); !slices.Equal(got, spoilt) {
			t.Errorf("Close = %v: it names %q; want ErrWrongType naming each of %q", err, got, spoilt)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", freed).AsInt64(); n != 0 {
			t.Errorf("%s is still held after Close (PTTL %dms)", freed, redistest.PTTL(t, side, freed))
		}
		for _, name := range spoilt {
			if v, _ := redistest.Do(t, side, "GET", name).ToString(); v != "spoilt" {
				t.Errorf("%s became %q", name, v)
			}
		}
	})
}

// Close's releases run within the client's timeout (WithTimeout): when Redis runs no
// writes (CLIENT PAUSE WRITE for a minute), Close gives up on the release after about the
// timeout of 500ms and returns its error naming the lock, whose hold then runs out its
// lease; it does not wait for Redis. Guards against releases bounded by nothing, which
// block Close, and a program's shutdown, for as long as Redis does not answer.
func TestCloseReleasesWithinItsTimeout(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		const name = "close:paused"
		closing := relocktest.New(t, b, relock.WithTimeout(500*time.Millisecond))
		// The hold's context is kept until Close has returned: a hold whose owner nothing
		// names is abandoned, and Close would have nothing to release.
		held, err := closing.Lock(name, rlock.WithLease(time.Minute)).Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer runtime.KeepAlive(held)
		side := b.Client(t)
		redistest.MustDo(t, side, "CLIENT", "PAUSE", "60000", "WRITE")
		t.Cleanup(func() { redistest.MustDo(t, side, "CLIENT", "UNPAUSE") })
		closed := make(chan error, 1)
		go func() { closed <- closing.Close() }()
		err = redistest.Recv(t, closed, 15*time.Second, "Close while Redis runs no writes for a minute (the client's timeout is 500ms)")
		if got := relocktest.Named(err, context.DeadlineExceeded); !slices.Equal(got, []string{name}) {
			t.Errorf("Close = %v: it names %q for a deadline; want %s", err, got, name)
		}
	})
}

// An acquisition whose reply is on its way when Close runs is released by its taker, as
// Close promises: the lock is free once Lock has returned (with ErrClosed), not held for a
// lease that nobody renews or releases. The acquire script takes the lock at once; its
// reply comes 2s late, after Close. Guards against an acquisition that the closing client
// refuses (ErrClosed) but leaves in Redis for the whole 30s lease.
func TestCloseReleasesAnAcquisitionInFlight(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "close:in-flight"
		side := b.Client(t)
		c := relocktest.On(t, redistest.LateReply(b.Client(t), name, 2*time.Second))
		ctx := redistest.Context(t, time.Minute)
		got := make(chan error, 1)
		go func() {
			held, err := c.Lock(name).Lock(ctx)
			if err == nil {
				err = fmt.Errorf("Lock took the lock after Close (its context: %v)", context.Cause(held))
			}
			got <- err
		}()
		redistest.Eventually(t, 10*time.Second, "the acquisition never took the lock", func() bool {
			n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64()
			return n == 1
		})
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := redistest.Recv(t, got, 15*time.Second, "Lock, whose reply came after Close"); !errors.Is(err, relock.ErrClosed) {
			t.Errorf("Lock whose reply came after Close: %v; want ErrClosed", err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
			t.Errorf("the lock taken while the client closed is still held (PTTL %dms): nobody will release it", redistest.PTTL(t, side, name))
		}
	})
}

// Close while goroutines lock, wait for and unlock locks of every kind on the client, some
// of them behind another client's hold: every call returns within a bound, each with nil
// or ErrClosed naming its lock; no goroutine of the client is left running; the client's
// holds are released, so the lock keys it held are gone; and every call after Close fails
// with ErrClosed naming the lock.
func TestCloseDuringCallsOfManyGoroutines(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		other := relocktest.New(t, b)
		blocked, err := other.Lock("close-busy:blocked").Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Lock("close-busy:blocked").Unlock(blocked)
		leaks := goleak.IgnoreCurrent()
		c := relocktest.On(t, rc)
		kinds := []holdKind{kindRLock, kindSpin, kindFair, kindWrite, kindRead}
		var (
			wg    sync.WaitGroup
			calls atomic.Int64
		)
		check := func(what, name string, err error) {
			var le *relock.Error
			switch {
			case err == nil:
			case !errors.Is(err, relock.ErrClosed):
				t.Errorf("%s %s during Close: %v; want nil or ErrClosed", what, name, err)
			case !errors.As(err, &le) || le.Name != name:
				t.Errorf("%s %s: %v does not name the lock", what, name, err)
			}
		}
		for _, k := range kinds {
			for _, name := range []string{"close-busy:" + k.name, "close-busy:blocked"} {
				if name == "close-busy:blocked" && k.name != "rlock" && k.name != "spin" {
					continue // another kind on the plain lock's name is ErrWrongType
				}
				for range 3 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						owner := relock.NewOwner(context.Background())
						for {
							held, err := k.lock(c, owner, name, 0)
							calls.Add(1)
							check("Lock", name, err)
							if err != nil {
								return
							}
							if rand.IntN(2) == 0 { // a re-entry
								again, err := k.lock(c, held, name, 0)
								check("re-entry", name, err)
								if err == nil {
									check("Unlock", name, k.unlock(c, again, name))
								}
							}
							check("Unlock", name, k.unlock(c, held, name))
						}
					}()
				}
			}
		}
		m := c.MultiLock(relock.Member(c.Lock("close-busy:multi:a")), relock.WriteMember(c.RWLock("close-busy:multi:b")),
			relock.Member(c.FairLock("close-busy:multi:c")))
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := relock.NewOwner(context.Background())
				for {
					held, err := m.Lock(owner)
					if err != nil {
						if !errors.Is(err, relock.ErrClosed) {
							t.Errorf("MultiLock.Lock during Close: %v; want nil or ErrClosed", err)
						}
						return
					}
					if err := m.Unlock(held); err != nil && !errors.Is(err, relock.ErrClosed) {
						t.Errorf("MultiLock.Unlock during Close: %v", err)
					}
				}
			}()
		}
		relocktest.CloseAmidCalls(t, c, &calls, &wg)

		for _, k := range kinds {
			name := "close-busy:" + k.name
			_, err := k.lock(c, context.Background(), name, 0)
			var le *relock.Error
			if !errors.Is(err, relock.ErrClosed) || !errors.As(err, &le) || le.Name != name {
				t.Errorf("%s Lock after Close: %v; want ErrClosed naming %s", k.name, err, name)
			}
		}
		side := b.Client(t)
		for _, name := range []string{"close-busy:rlock", "close-busy:spin", "close-busy:fair", "close-busy:write", "close-busy:read",
			"close-busy:multi:a", "close-busy:multi:b", "close-busy:multi:c"} {
			if n, err := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 || err != nil {
				t.Errorf("EXISTS %s after Close = %d, %v; want 0: the closed client's holds released", name, n, err)
			}
		}
		if h, err := other.Lock("close-busy:blocked").IsHeld(blocked); !h || err != nil {
			t.Errorf("the other client's hold after Close: held %v, %v; want held", h, err)
		}
		// The rueidis client's connections, and miniredis's ends of them, belong to rc,
		// which Close leaves open.
		redistest.NoGoroutinesLeft(t, leaks)
	})
}

// Close reports only the holds it could not release. A hold that another client forced
// meanwhile (ForceUnlock), before this client heard of it, left nothing to release: Close
// returns nil for it, and releases the client's other hold all the same. Guards against a
// Close that reports ErrNotHeld for such a hold, which its caller would take for a lock
// still held that must run out its lease.
func TestCloseOfAHoldForcedMeanwhileReportsNothing(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		closing, other := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		const forced, kept = "close:forced", "close:kept"
		var held []context.Context
		for _, name := range []string{forced, kept} {
			h, err := closing.Lock(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, h)
		}
		// Kept to the end: a hold nothing can name is abandoned, and Close does not
		// release it.
		defer runtime.KeepAlive(held)
		if ok, err := other.Lock(forced).ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v; want true", ok, err)
		}
		if err := closing.Close(); err != nil {
			t.Errorf("Close after one of its holds was forced: %v; want nil (nothing was left to release)", err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", kept).AsInt64(); n != 0 {
			t.Errorf("%s is still held after Close (PTTL %dms)", kept, redistest.PTTL(t, side, kept))
		}
	})
}
