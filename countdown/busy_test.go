package countdown_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// Close while goroutines of one client set, count down, read and await a latch that opens
// and closes again and again, and others await a latch that never opens: every call returns
// within a bound, each with nil or ErrClosed naming its latch; no goroutine of the client
// is left running; the latch that never opens keeps its count.
func TestCloseDuringLatchCallsOfManyGoroutines(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const busy, shut = "latch-close-busy", "latch-close-busy:shut"
		rc := b.Client(t)
		side := b.Client(t)
		leaks := goleak.IgnoreCurrent()
		c := relocktest.On(t, rc, relock.WithWatchdogTimeout(3*time.Second))
		if ok, err := c.CountDownLatch(shut).TrySetCount(context.Background(), 1000); !ok || err != nil {
			t.Fatalf("TrySetCount(1000) = %v, %v", ok, err)
		}
		var (
			wg    sync.WaitGroup
			calls atomic.Int64
		)
		check := func(what, name string, err error) bool {
			var le *relock.Error
			switch {
			case err == nil:
				return true
			case !errors.Is(err, relock.ErrClosed):
				t.Errorf("%s %s during Close: %v; want nil or ErrClosed", what, name, err)
			case !errors.As(err, &le) || le.Name != name:
				t.Errorf("%s: %v does not name the latch %s", what, err, name)
			}
			return false
		}
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := c.CountDownLatch(shut).Await(redistest.Context(t, time.Minute))
				if check("Await", shut, err) {
					t.Errorf("Await of %s, which never opens, returned nil at Close; want ErrClosed", shut)
				}
			}()
		}
		l := c.CountDownLatch(busy)
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					var err error
					switch w % 3 {
					case 0:
						_, err = l.TrySetCount(context.Background(), 2)
					case 1:
						err = l.CountDown(context.Background())
					case 2:
						err = l.Await(redistest.Context(t, time.Minute))
					}
					calls.Add(1)
					if !check("call", busy, err) {
						return
					}
				}
			}()
		}
		relocktest.CloseAmidCalls(t, c, &calls, &wg)
		if got := state(t, side, shut); got != counted(1000) {
			t.Errorf("after Close the latch %s is %q; want %q", shut, got, counted(1000))
		}
		redistest.NoGoroutinesLeft(t, leaks)
	})
}

// Goroutines of one client set a latch's count, count it down and await it, all at once
// and over and over: the latch opens exactly once per count set, so that its channel
// carries "1" and "0" by turns, as many of each as TrySetCounts that reported true; every
// Await returns once the latch is open at the end, and a count down of the open latch
// changes nothing.
//
// Guards against a count down that opens a latch twice (a second "0" for one count, on
// which Redisson's waiters and relock's wake), and against TrySetCount setting a count over
// a live one.
func TestTrySetCountRacingCountDownsOpensOncePerCount(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "latch-race"
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(3*time.Second))
		side := b.Client(t)
		heard := b.Listen(t, channelOf(name))
		l := c.CountDownLatch(name)
		var (
			stop     atomic.Bool
			sets     atomic.Int64
			awaits   atomic.Int64
			wg, wait sync.WaitGroup
		)
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					switch w % 3 {
					case 0:
						ok, err := l.TrySetCount(context.Background(), 2)
						if err != nil {
							t.Errorf("TrySetCount: %v", err)
							return
						}
						if ok {
							sets.Add(1)
						}
					default:
						if err := l.CountDown(context.Background()); err != nil {
							t.Errorf("CountDown: %v", err)
							return
						}
					}
				}
			}()
		}
		for range 2 {
			wait.Add(1)
			go func() {
				defer wait.Done()
				for !stop.Load() {
					if err := l.Await(redistest.Context(t, time.Minute)); err != nil {
						t.Errorf("Await: %v", err)
						return
					}
					awaits.Add(1)
				}
			}()
		}
		redistest.Eventually(t, 20*time.Second, "the latch never opened 50 times", func() bool { return sets.Load() > 50 })
		stop.Store(true)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		redistest.Recv(t, done, 20*time.Second, "the setters' and counters' end")
		for range 2 {
			if err := l.CountDown(context.Background()); err != nil {
				t.Fatalf("CountDown: %v", err)
			}
		}
		if got := state(t, side, name); got != noKey {
			t.Fatalf("after two count downs the latch is %q; want open (no key)", got)
		}
		awaited := make(chan struct{})
		go func() { wait.Wait(); close(awaited) }()
		redistest.Recv(t, awaited, 20*time.Second, "every Await's return once the latch is open")

		n := sets.Load()
		want := 2 * int(n)
		redistest.Eventually(t, 10*time.Second, "the latch's messages", func() bool { return len(heard.Messages()) >= want })
		// Anything published late would come before a marker set now.
		if ok, err := l.TrySetCount(context.Background(), 1); !ok || err != nil {
			t.Fatalf("TrySetCount(1) on the open latch = %v, %v", ok, err)
		}
		redistest.Eventually(t, 10*time.Second, "the marker's \"1\"", func() bool { return len(heard.Messages()) > want })
		msgs := heard.Messages()
		for i, m := range msgs {
			if m != [2]string{"1", "0"}[i%2] {
				t.Fatalf("message %d of %d is %q (%d counts set): the latch's channel must carry \"1\" and \"0\" by turns, one \"0\" per count", i, len(msgs), m, n)
			}
		}
		if len(msgs) != want+1 {
			t.Fatalf("%d messages for %d counts set; want %d and the marker's", len(msgs), n, want)
		}
		t.Logf("%d counts set, %d Awaits returned", n, awaits.Load())
	})
}

// Goroutines of one client await a latch while their contexts are cancelled without
// pause, before the count is read, while they subscribe and while they wait, and the latch
// is set and opened again and again beside them: each Await returns nil or its context's
// error naming the latch; once they stop, no waiter is parked, the client lets go of the
// latch's channel (after its linger) and Redis counts no subscriber of it.
func TestAwaitCancelStormLeavesNoSubscription(t *testing.T) {
	const workers = 6
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "latch-await-storm"
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(3*time.Second))
		side := b.Client(t)
		l := c.CountDownLatch(name)
		var (
			stop              atomic.Bool
			cancels           [workers]atomic.Pointer[context.CancelFunc]
			opened, cancelled atomic.Int64
			wg                sync.WaitGroup
		)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					ctx, cancel := context.WithCancel(context.Background())
					cancels[w].Store(&cancel)
					err := l.Await(ctx)
					cancel()
					var le *relock.Error
					switch {
					case err == nil:
						opened.Add(1)
					case errors.Is(err, context.Canceled) && errors.As(err, &le) && le.Name == name:
						cancelled.Add(1)
					default:
						t.Errorf("Await: %v; want nil or context.Canceled naming %s", err, name)
						return
					}
				}
			}()
		}
		// The latch is set and opened beside the waiters, and their contexts cancelled.
		setter := relocktest.New(t, b)
		sl := setter.CountDownLatch(name)
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
			if _, err := sl.TrySetCount(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			for w := range cancels {
				if cancel := cancels[w].Load(); cancel != nil && w%2 == 0 {
					(*cancel)()
				}
			}
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			if err := sl.CountDown(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		stop.Store(true)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		redistest.Recv(t, done, 20*time.Second, "the waiters' end with the latch open")
		t.Logf("%d Awaits woken, %d cancelled", opened.Load(), cancelled.Load())
		if opened.Load() == 0 || cancelled.Load() == 0 {
			t.Error("no Await was woken, or none cancelled: the run proved nothing")
		}
		redistest.Eventually(t, 10*time.Second, "the latch's channel still subscribed, or a waiter parked, after the storm", func() bool {
			st := c.PubSubStats()
			return st.Waiting == 0 && st.Channels == 0 && redistest.Subscribers(t, side, "NUMSUB", channelOf(name)) <= 0
		})
	})
}
