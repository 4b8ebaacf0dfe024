package semaphore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// ReleaseLease after Close fails with ErrClosed naming the semaphore, as every call after
// Close does, and sends nothing: with the client's leases given back by Close, the count
// stays as Close left it; with WithReleaseOnClose(false), the lease stays leased, to run
// out its lease.
//
// Guards against a ReleaseLease that reaches Redis after Close and reports the lease
// "lost" (ErrNotHeld) when Close gave it back, or gives back a lease that Close was told
// to leave.
func TestReleaseLeaseAfterCloseIsErrClosed(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		for _, release := range []bool{true, false} {
			t.Run("release on close "+strconv.FormatBool(release), func(t *testing.T) {
				name := "lease-closed:" + strconv.FormatBool(release)
				c := relocktest.New(t, b, relock.WithReleaseOnClose(release))
				s := c.Semaphore(name)
				mustSet(t, s, 3)
				held := acquireLease(t, s, 2)
				if err := c.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				want, ids := "3", 0
				if !release {
					want, ids = "1", 2
				}
				redistest.Unchanged(t, side, leasesKey(name), func() {
					wantErr(t, s.ReleaseLease(held), relock.ErrClosed, name)
				})
				wantValue(t, side, name, want)
				if got := len(leased(t, side, name)); got != ids {
					t.Fatalf("%d permits leased after ReleaseLease on a closed client; want %d", got, ids)
				}
			})
		}
	})
}

// Close while goroutines of one client acquire and release permits, plain and leased, one
// or several at a time, on a semaphore with too few for them all, and others wait on one
// with none (the first in Redis, the others in memory): every call returns
// within a bound, each with nil or ErrClosed naming the semaphore; no goroutine of the
// client is left running; the leases are given back, and the count is the initial one less
// the plain permits still held when Close came (those stay taken, as documented); the
// queue and its deadlines are gone; the waiters end with ErrClosed, having taken nothing.
//
// Guards against a Close that reports a lease as lost ("lock not held") when a
// ReleaseLease of its owner gave it back as Close ran.
func TestCloseDuringSemaphoreCallsOfManyGoroutines(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name, initial = "sem-close-busy", 4
		rc := b.Client(t)
		side := b.Client(t)
		leaks := goleak.IgnoreCurrent()
		c := relocktest.On(t, rc, relock.WithWatchdogTimeout(3*time.Second))
		s := c.Semaphore(name)
		mustSet(t, s, initial)
		var (
			wg    sync.WaitGroup
			calls atomic.Int64
			plain atomic.Int64 // plain permits taken and not given back
		)
		check := func(what string, err error) {
			var le *relock.Error
			switch {
			case err == nil:
			case !errors.Is(err, relock.ErrClosed):
				t.Errorf("%s during Close: %v; want nil or ErrClosed", what, err)
			case !errors.As(err, &le) || le.Name != name:
				t.Errorf("%s: %v does not name the semaphore", what, err)
			}
		}
		for w := range 8 {
			n := int64(1 + w%3)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					ctx := redistest.Context(t, time.Minute)
					if w%2 == 0 {
						err := s.Acquire(ctx, n)
						calls.Add(1)
						check("Acquire", err)
						if err != nil {
							return
						}
						plain.Add(n)
						err = s.Release(context.Background(), n)
						check("Release", err)
						if err != nil {
							return
						}
						plain.Add(-n)
						continue
					}
					held, err := s.AcquireLease(ctx, n)
					calls.Add(1)
					check("AcquireLease", err)
					if err != nil {
						return
					}
					if err := s.ReleaseLease(held); err != nil && !errors.Is(err, relock.ErrClosed) {
						t.Errorf("ReleaseLease during Close: %v; want nil or ErrClosed", err)
						return
					}
				}
			}()
		}
		// Waiters of a semaphore with no permits: the first waits in Redis, the others in
		// memory behind it.
		empty := c.Semaphore(name + ":empty")
		mustSet(t, empty, 0)
		for i := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if i == 1 {
					_, err = empty.AcquireLease(redistest.Context(t, time.Minute), 1)
				} else {
					err = empty.Acquire(redistest.Context(t, time.Minute), 1)
				}
				if !errors.Is(err, relock.ErrClosed) {
					t.Errorf("waiter of %s at Close: %v; want ErrClosed", empty.Name(), err)
				}
			}()
		}
		relocktest.CloseAmidCalls(t, c, &calls, &wg)

		wantValue(t, side, name, strconv.FormatInt(initial-plain.Load(), 10))
		if zs := leased(t, side, name); len(zs) != 0 {
			t.Errorf("%d permits still leased after Close: nobody renews or gives them back", len(zs))
		}
		wantValue(t, side, empty.Name(), "0")
		wantKeys(t, b, side, name, empty.Name())
		redistest.NoGoroutinesLeft(t, leaks)
	})
}

// Goroutines of one client acquire one to three permits, plain or leased, of a semaphore
// with too few for them all, while their contexts are cancelled without pause: before an
// attempt is sent, while it runs, while they wait in memory or in Redis, and as they are
// served. An Acquire that fails returns the context's error naming the semaphore and takes
// nothing; every permit taken is given back. Once they stop, the count is the initial one,
// no permit is leased, the queue and its deadlines are gone, the watchdog knows no lease,
// and the client lets go of every channel (after its linger); the whole count is taken at
// once.
func TestCancelStormKeepsTheCount(t *testing.T) {
	const (
		workers = 6
		initial = 3
		storm   = 2 * time.Second
	)
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-cancel-storm"
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(2*time.Second))
		side := b.Client(t)
		s := c.Semaphore(name)
		mustSet(t, s, initial)
		var (
			stop               atomic.Bool
			cancels            [workers]atomic.Pointer[context.CancelFunc]
			taken, interrupted atomic.Int32
			wg                 sync.WaitGroup
		)
		for w := range workers {
			n := int64(1 + w%3)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					ctx, cancel := context.WithCancel(context.Background())
					cancels[w].Store(&cancel)
					var err error
					if w%2 == 0 {
						if err = s.Acquire(ctx, n); err == nil {
							taken.Add(1)
							if err := s.Release(ctx, n); err != nil {
								t.Errorf("Release of permits Acquire took: %v", err)
							}
						}
					} else {
						var held context.Context
						if held, err = s.AcquireLease(ctx, n); err == nil {
							taken.Add(1)
							// The lease's context derives from ctx: it may have ended already.
							if err := s.ReleaseLease(held); err != nil && held.Err() == nil {
								t.Errorf("ReleaseLease of a live lease: %v", err)
							}
						}
					}
					cancel()
					switch {
					case err == nil:
					case errors.Is(err, context.Canceled):
						interrupted.Add(1)
						var le *relock.Error
						if !errors.As(err, &le) || le.Name != name {
							t.Errorf("cancelled acquisition's error %v does not name the semaphore", err)
						}
					default:
						t.Errorf("acquisition: %v", err)
					}
				}
			}()
		}
		redistest.CancelStorm(storm, cancels[:])
		stop.Store(true)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		// A worker may wait for permits that a lost count never brings: end its wait.
		for ended := false; !ended; {
			redistest.CancelAll(cancels[:])
			select {
			case <-done:
				ended = true
			case <-time.After(10 * time.Millisecond):
			}
		}
		t.Logf("%d acquisitions, %d cancelled", taken.Load(), interrupted.Load())
		if interrupted.Load() == 0 || taken.Load() == 0 {
			t.Error("no acquisition was cancelled, or none took permits: the run proved nothing")
		}
		// A lease whose context was cancelled before ReleaseLease is lost, and its permits come
		// back when it runs out: within a lease.
		redistest.Eventually(t, 10*time.Second, "the count never came back to "+strconv.Itoa(initial), func() bool {
			n, err := s.AvailablePermits(context.Background())
			return err == nil && n == initial
		})
		wantValue(t, side, name, strconv.Itoa(initial))
		wantKeys(t, b, side, name)
		if st := c.WatchdogStats(); st.Holds != 0 {
			t.Errorf("the watchdog knows %d leases; want none", st.Holds)
		}
		redistest.Eventually(t, 10*time.Second, "a channel still subscribed, or a waiter parked, after the storm", func() bool {
			st := c.PubSubStats()
			return st.Waiting == 0 && st.Channels == 0
		})
		mustTry(t, s, initial, true)
	})
}
