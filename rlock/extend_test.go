package rlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// Extend carries a fixed-lease hold past its lease, in Redis and in the hold's context, as
// redislock's Refresh does: past the first lease the hold's context is live, the owner
// still holds the lock, and another owner is kept out.
func TestExtendCarriesAFixedLease(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.Lock("extend:fixed", rlock.WithLease(time.Second))
		start := time.Now()
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := mu.Extend(held, 30*time.Second); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		// Past the first lease, with room.
		time.Sleep(time.Until(start.Add(1500 * time.Millisecond)))
		if err := held.Err(); err != nil {
			t.Fatalf("the hold's context ended at its first lease (%v); want it carried by Extend", context.Cause(held))
		}
		if ok, err := mu.IsHeld(held); err != nil || !ok {
			t.Fatalf("IsHeld after the first lease: %v %v; want held", ok, err)
		}
		if _, err := mu.TryLock(context.Background()); !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("another owner's TryLock: %v; want ErrLocked", err)
		}
		if d, err := mu.TTL(held); err != nil || d < 20*time.Second {
			t.Errorf("TTL %v (%v); want about 30s", d, err)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// Extend never shortens a lease; asked by an owner that holds nothing, or with a lease
// under a millisecond, it fails with an error that names the lock.
func TestExtendEdges(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.Lock("extend:edges", rlock.WithLease(time.Minute))
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := mu.Extend(held, time.Second); err != nil {
			t.Fatal(err)
		}
		if d, err := mu.TTL(held); err != nil || d < 50*time.Second {
			t.Errorf("TTL after a shorter Extend: %v (%v); want the minute kept", d, err)
		}
		for _, tc := range []struct {
			name string
			ctx  context.Context
			d    time.Duration
			want error
		}{
			{"no owner", context.Background(), time.Second, relock.ErrNotHeld},
			{"another owner", relock.NewOwner(held), time.Second, relock.ErrNotHeld},
			{"zero lease", held, 0, relock.ErrInvalidLease},
			{"negative lease", held, -time.Second, relock.ErrInvalidLease},
			{"lease under a millisecond", held, 999 * time.Microsecond, relock.ErrInvalidLease},
		} {
			err := mu.Extend(tc.ctx, tc.d)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "extend:edges") {
				t.Errorf("%s: %v; want %v naming the lock", tc.name, err, tc.want)
			}
		}
		if held.Err() != nil {
			t.Errorf("the hold ended after refused Extends: %v", context.Cause(held))
		}
	})
}

// A hold whose lease ran out cannot be extended: ErrNotHeld, and the lock stays free.
func TestExtendAfterTheLeaseRanOut(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.Lock("extend:late", rlock.WithLease(200*time.Millisecond))
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		redistest.Eventually(t, 10*time.Second, "the lease never ran out", func() bool {
			locked, err := mu.IsLocked(context.Background())
			return err == nil && !locked
		})
		if err := mu.Extend(held, time.Minute); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("Extend after the lease: %v; want ErrNotHeld", err)
		}
		if locked, err := mu.IsLocked(context.Background()); err != nil || locked {
			t.Errorf("IsLocked after a late Extend: %v %v; want free", locked, err)
		}
	})
}

// Extend of a hold that Redis no longer has, though the client has not noticed yet (its key
// was deleted, as by another client's ForceUnlock), is ErrNotHeld, and the hold's context
// ends then, with ErrLeaseLost, as Extend promises: it is not left live until the next
// renewal round.
func TestExtendOfAHoldGoneEndsItsContext(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b) // a 30s watchdog: the next renewal round is 10s off
		mu := c.Lock("extend:gone")
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		redistest.MustDo(t, b.Client(t), "DEL", "extend:gone")
		if err := mu.Extend(held, time.Minute); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("Extend of a hold Redis no longer has: %v; want ErrNotHeld", err)
		}
		if held.Err() == nil {
			t.Fatal("the hold's context is live after Extend found the hold gone; want it ended")
		}
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Errorf("the hold's context ended with cause %v; want ErrLeaseLost", cause)
		}
	})
}

// An Extend shorter than what the hold was promised shortens nothing, in the hold's context
// as in Redis: past the shorter lease the context is live and the owner holds the lock.
func TestShorterExtendKeepsTheContext(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.Lock("extend:shorter", rlock.WithLease(time.Minute))
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := mu.Extend(held, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond) // past the shorter lease, well within the minute
		if err := held.Err(); err != nil {
			t.Fatalf("the hold's context ended after an Extend shorter than its lease (cause %v); want it live for the minute Redis keeps", context.Cause(held))
		}
		if ok, err := mu.IsHeld(held); err != nil || !ok {
			t.Fatalf("IsHeld: %v %v; want held", ok, err)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// An Extend whose reply is lost (Redis ran it; the reply and the connection were lost) is
// sent again, as a renewal may be: it returns nil, and the hold lasts the extension in
// Redis and in its context, past its first lease of 2s. Guards against an Extend that
// reports a failure for an extension that ran, and leaves the hold's context to end at the
// first lease while Redis keeps the lock for the extension.
func TestExtendWithItsReplyLost(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		proxy := redistest.StartProxy(t, b.Addr)
		c := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()})
		const name = "extend:lost"
		mu := c.Lock(name, rlock.WithLease(2*time.Second))
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		// The script loaded first, so that the fault hits the call itself.
		if err := mu.Extend(held, time.Second); err != nil {
			t.Fatal(err)
		}
		proxy.LoseReplyTo(name)
		if err := mu.Extend(held, 30*time.Second); err != nil {
			t.Fatalf("Extend with its reply lost: %v", err)
		}
		if proxy.Armed() != 0 {
			t.Fatal("the fault never fired: the test proved nothing")
		}
		time.Sleep(3 * time.Second) // past the first lease, with room
		if err := held.Err(); err != nil {
			t.Fatalf("the hold's context ended at its first lease (%v); want it carried by Extend", context.Cause(held))
		}
		if d, err := mu.TTL(held); err != nil || d < 20*time.Second {
			t.Errorf("TTL %v (%v); want about 27s", d, err)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}
