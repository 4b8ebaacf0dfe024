// Package relocktest makes relock clients for tests on the Redis servers of the
// redistest harness.
//
// It is a package of its own because redistest cannot import relock: the lock
// packages' own tests (package watchdog, for one) use redistest, and relock imports
// them, so the import would be a cycle.
package relocktest

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// Source is what hands out rueidis clients of its own: a redistest.Backend,
// Server, Cluster or Sentinel.
type Source interface {
	Client(t testing.TB) rueidis.Client
}

// New returns a relock client with opts on a new rueidis client of src, so that it
// shares no connection with any other client of the test, and closes it at t's
// cleanup. It fails t if relock.New fails.
func New(t testing.TB, src Source, opts ...relock.Option) *relock.Client {
	t.Helper()
	return On(t, src.Client(t), opts...)
}

// On returns a relock client with opts on rc (a client of the test's own making: one that
// holds requests back, or counts them), and closes it at t's cleanup. It fails t if
// relock.New fails.
func On(t testing.TB, rc rueidis.Client, opts ...relock.Option) *relock.Client {
	t.Helper()
	c, err := relock.New(rc, opts...)
	if err != nil {
		t.Fatalf("relock.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Waiting returns how many waiters the clients have parked now, all together.
func Waiting(clients ...*relock.Client) int {
	n := 0
	for _, c := range clients {
		n += c.PubSubStats().Waiting
	}
	return n
}

// Holds is what every kind of lock answers about its holds, as Redisson's RLock does
// (getHoldCount, isHeldByCurrentThread, isLocked).
type Holds interface {
	HoldCount(ctx context.Context) (int, error)
	IsHeld(ctx context.Context) (bool, error)
	IsLocked(ctx context.Context) (bool, error)
}

// CheckHolds checks, at the step what, that mu counts count holds of owner (and so holds
// the lock when count is above 0), and that other, the same lock through another client,
// finds stranger holding nothing and the lock locked as locked says.
func CheckHolds(t testing.TB, what string, mu Holds, owner context.Context, count int, other Holds, stranger context.Context, locked bool) {
	t.Helper()
	if n, err := mu.HoldCount(owner); n != count || err != nil {
		t.Errorf("%s: HoldCount = %d, %v; want %d", what, n, err, count)
	}
	if ok, err := mu.IsHeld(owner); ok != (count > 0) || err != nil {
		t.Errorf("%s: IsHeld = %v, %v; want %v", what, ok, err, count > 0)
	}
	if ok, err := other.IsHeld(stranger); ok || err != nil {
		t.Errorf("%s: IsHeld by another owner = %v, %v; want false", what, ok, err)
	}
	if ok, err := other.IsLocked(owner); ok != locked || err != nil {
		t.Errorf("%s: IsLocked seen by another client = %v, %v; want %v", what, ok, err, locked)
	}
}

// Named returns, sorted, the names of the locks that the *relock.Error values joined in err
// (by errors.Join, at any depth) name, each with the cause want found in it or not: "name"
// when errors.Is finds want in that error, "name: <error>" otherwise. It is how a test
// reads a call that reports several locks' failures at once (Close, a MultiLock's Unlock).
func Named(err error, want error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		var e *relock.Error
		switch j := err.(type) {
		case nil:
		case interface{ Unwrap() []error }:
			for _, err := range j.Unwrap() {
				walk(err)
			}
		default:
			if !errors.As(err, &e) {
				out = append(out, "not a *relock.Error: "+err.Error())
			} else if errors.Is(err, want) {
				out = append(out, e.Name)
			} else {
				out = append(out, e.Name+": "+err.Error())
			}
		}
	}
	walk(err)
	sort.Strings(out)
	return out
}

// CloseAmidCalls closes c while its goroutines (wg) are busy: once they have made more than
// 200 calls (calls) and some wait, parked (CloseWhen).
func CloseAmidCalls(t testing.TB, c *relock.Client, calls *atomic.Int64, wg *sync.WaitGroup) {
	t.Helper()
	CloseWhen(t, c, "the goroutines never got going", wg, func() bool {
		return calls.Load() > 200 && Waiting(c) > 0
	})
}

// CloseWhen closes c once ready (failing t with never if that takes 20 s) while its
// goroutines (wg) are at their calls: Close must return nil, and then every goroutine must
// return. Each step is bounded (20 s), so that a call or a Close that never ends fails the
// test instead of hanging it.
func CloseWhen(t testing.TB, c *relock.Client, never string, wg *sync.WaitGroup, ready func() bool) {
	t.Helper()
	redistest.Eventually(t, 20*time.Second, never, ready)
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	if err := redistest.Recv(t, closed, 20*time.Second, "Close's return"); err != nil {
		t.Errorf("Close: %v", err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	redistest.Recv(t, done, 20*time.Second, "the calls' return after Close")
}

// InTurns runs, in a goroutine for each of each (a lock or semaphore, through one client or
// several), rounds of enter (a Lock or Acquire, which returns how to leave), a stay of
// hold, a count and the leave. It fails t unless every round of every goroutine completes
// within 90 s and no two goroutines were ever inside at once.
func InTurns[T any](t testing.TB, each []T, rounds int, hold time.Duration, enter func(ctx context.Context, x T) (leave func() error, err error)) {
	t.Helper()
	var inside, over, counter atomic.Int64
	errs := make(chan error, len(each))
	ctx := redistest.Context(t, 2*time.Minute)
	for _, x := range each {
		go func() {
			for range rounds {
				leave, err := enter(ctx, x)
				if err != nil {
					errs <- err
					return
				}
				if inside.Add(1) > 1 {
					over.Add(1)
				}
				time.Sleep(hold)
				counter.Add(1)
				inside.Add(-1)
				if err := leave(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range each {
		if err := redistest.Recv(t, errs, 90*time.Second, "a goroutine's rounds of entering and leaving"); err != nil {
			t.Fatalf("entering or leaving: %v", err)
		}
	}
	if n := over.Load(); n != 0 {
		t.Fatalf("%d times two goroutines were inside at once", n)
	}
	if n, want := counter.Load(), int64(len(each)*rounds); n != want {
		t.Fatalf("counted %d; want %d", n, want)
	}
}
