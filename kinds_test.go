package relock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/internal/script"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
)

// holdKind is one kind of hold, reached through the client's API only, so that one test
// covers every kind whose scripts share a path.
// javaOwner is the hash field of an owner of a Redisson client (its UUID and a thread id),
// for the tests that write another client's hold or queue entry themselves.
const javaOwner = "0d2c8f0e-5b1a-4c6e-9f3d-2a7b8c9d0e1f:1"

type holdKind struct {
	name string
	// lock takes a hold of the lock named n; lease 0 takes the watchdog's lease (renewed).
	lock   func(c *relock.Client, ctx context.Context, n string, lease time.Duration) (context.Context, error)
	unlock func(c *relock.Client, ctx context.Context, n string) error
	count  func(c *relock.Client, ctx context.Context, n string) (int, error)
	// channel is the start of the channel a waiter of the lock n subscribes to.
	channel func(n string) string
}

var (
	kindRLock = holdKind{
		name: "rlock",
		lock: func(c *relock.Client, ctx context.Context, n string, lease time.Duration) (context.Context, error) {
			if lease > 0 {
				return c.Lock(n).Lock(ctx, rlock.WithLease(lease))
			}
			return c.Lock(n).Lock(ctx)
		},
		unlock:  func(c *relock.Client, ctx context.Context, n string) error { return c.Lock(n).Unlock(ctx) },
		count:   func(c *relock.Client, ctx context.Context, n string) (int, error) { return c.Lock(n).HoldCount(ctx) },
		channel: func(n string) string { return "redisson_lock__channel:{" + n + "}" },
	}
	// The spin lock keeps rlock's data but has a layout of its own (acquire and release
	// calls with other arguments), so the tests that cover every kind's holds cover it too.
	kindSpin = holdKind{
		name: "spin",
		lock: func(c *relock.Client, ctx context.Context, n string, lease time.Duration) (context.Context, error) {
			if lease > 0 {
				return c.SpinLock(n).Lock(ctx, rlock.WithLease(lease))
			}
			return c.SpinLock(n).Lock(ctx)
		},
		unlock: func(c *relock.Client, ctx context.Context, n string) error { return c.SpinLock(n).Unlock(ctx) },
		count: func(c *relock.Client, ctx context.Context, n string) (int, error) {
			return c.SpinLock(n).HoldCount(ctx)
		},
		// No channel: a spin waiter subscribes to nothing.
	}
	// A fair waiter comes back every refresh period; a minute keeps that from standing in
	// for the wake-up TestWakeupBeforeSubscription is about.
	kindFair  = fairKind(time.Minute)
	kindWrite = holdKind{
		name: "write",
		lock: func(c *relock.Client, ctx context.Context, n string, lease time.Duration) (context.Context, error) {
			if lease > 0 {
				return c.RWLock(n).Lock(ctx, rlock.WithLease(lease))
			}
			return c.RWLock(n).Lock(ctx)
		},
		unlock:  func(c *relock.Client, ctx context.Context, n string) error { return c.RWLock(n).Unlock(ctx) },
		count:   func(c *relock.Client, ctx context.Context, n string) (int, error) { return c.RWLock(n).HoldCount(ctx) },
		channel: func(n string) string { return "redisson_rwlock:{" + n + "}" },
	}
	kindRead = holdKind{
		name: "read",
		lock: func(c *relock.Client, ctx context.Context, n string, lease time.Duration) (context.Context, error) {
			if lease > 0 {
				return c.RWLock(n).RLock(ctx, rlock.WithLease(lease))
			}
			return c.RWLock(n).RLock(ctx)
		},
		unlock:  func(c *relock.Client, ctx context.Context, n string) error { return c.RWLock(n).RUnlock(ctx) },
		count:   func(c *relock.Client, ctx context.Context, n string) (int, error) { return c.RWLock(n).RHoldCount(ctx) },
		channel: func(n string) string { return "redisson_rwlock:{" + n + "}" },
	}
)

// fairKind is the fair lock whose waiters refresh their queue entries every refresh.
func fairKind(refresh time.Duration) holdKind {
	return holdKind{
		name: "fair",
		lock: func(c *relock.Client, ctx context.Context, n string, lease time.Duration) (context.Context, error) {
			opts := []fairlock.Option{fairlock.WithRefreshPeriod(refresh)}
			if lease > 0 {
				opts = append(opts, rlock.WithLease(lease))
			}
			return c.FairLock(n).Lock(ctx, opts...)
		},
		unlock: func(c *relock.Client, ctx context.Context, n string) error { return c.FairLock(n).Unlock(ctx) },
		count: func(c *relock.Client, ctx context.Context, n string) (int, error) {
			return c.FairLock(n).HoldCount(ctx)
		},
		// A fair waiter listens on a channel of its own: this prefix and its owner.
		channel: func(n string) string { return "redisson_lock__channel:{" + n + "}:" },
	}
}

// A re-entry with a longer lease than the hold's extends the key's expiry to it, and a
// re-entry that turns the watchdog on gets at least the watchdog's lease at once: the
// owner's holds must not lapse at the first hold's shorter lease.
//
// Guards against the acquire script forgetting PEXPIRE on re-entry: the
// key would keep the first hold's 2s, for the plain, the fair, the write and the spin lock alike.
func TestReentryExtendsLease(t *testing.T) {
	const short = 2 * time.Second
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b) // watchdog timeout: the default 30s
		for _, k := range []holdKind{kindRLock, kindFair, kindWrite, kindSpin} {
			t.Run(k.name, func(t *testing.T) {
				for _, tc := range []struct {
					name    string
					lease   time.Duration // of the re-entry; 0: the watchdog's
					atLeast int64         // ms the key must have left right after it
				}{
					// Either is far beyond the first hold's 2s, even on a loaded machine.
					{"longer fixed lease", time.Minute, 30_000},
					{"watchdog", 0, 10_000},
				} {
					t.Run(tc.name, func(t *testing.T) {
						n := "reentry-extends:" + k.name + ":" + tc.name
						held, err := k.lock(c, redistest.Context(t, 30*time.Second), n, short)
						if err != nil {
							t.Fatal(err)
						}
						again, err := k.lock(c, held, n, tc.lease)
						if err != nil {
							t.Fatalf("re-entry: %v", err)
						}
						if got, err := k.count(c, again, n); got != 2 || err != nil {
							t.Fatalf("hold count after the re-entry = %d, %v; want 2", got, err)
						}
						if ms := redistest.PTTL(t, b.Client(t), n); ms < tc.atLeast {
							t.Fatalf("PTTL after re-entering a %v hold with lease %v = %dms; want at least %dms",
								short, tc.lease, ms, tc.atLeast)
						}
						for range 2 {
							if err := k.unlock(c, again, n); err != nil {
								t.Fatalf("unlock: %v", err)
							}
						}
					})
				}
			})
		}
	})
}

// An owner that does not hold a lock cannot release it, whoever it is: another owner of
// the holder's own client (which the unlock script must turn away, since the client has an
// owner id to send) or an owner of another client. Unlock fails with ErrNotHeld and the
// holder keeps its hold.
//
// Guards against an unlock script that checks only that the lock's key exists, not the
// unlocking owner's field: it would release, or even delete, the holder's
// lock. TestOtherOwner in package rlock could not see that: none of its unlocking
// contexts carries an owner of the unlocking client, so the script never runs.
func TestUnlockByNonHolder(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		// Contexts that carry an owner id of their client, none of them the holder's.
		own := func(c *relock.Client, parent context.Context, n string) context.Context {
			t.Helper()
			held, err := c.Lock(n).Lock(parent, rlock.WithLease(time.Minute))
			if err != nil {
				t.Fatalf("lock %s: %v", n, err)
			}
			return held
		}
		for _, tc := range []struct{ holder, other holdKind }{
			{kindRLock, kindRLock},
			{kindFair, kindFair},
			{kindWrite, kindWrite},
			{kindWrite, kindRead},
			{kindRead, kindRead},
			{kindRead, kindWrite},
			{kindSpin, kindSpin},
		} {
			t.Run(tc.holder.name+" held, "+tc.other.name+" unlock", func(t *testing.T) {
				n := "not-holder:" + tc.holder.name + ":" + tc.other.name
				held, err := tc.holder.lock(c1, ctx, n, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				others := []struct {
					name string
					c    *relock.Client
					ctx  context.Context
				}{
					{"same client, owner of another lock", c1, own(c1, ctx, n+":elsewhere")},
					{"same client, NewOwner of the holder's context", c1, own(c1, relock.NewOwner(held), n+":fresh")},
					{"other client", c2, own(c2, ctx, n+":other-client")},
					{"other client, its owner in the holder's context", c2, own(c2, held, n+":other-in-held")},
				}
				for _, o := range others {
					if err := tc.other.unlock(o.c, o.ctx, n); !errors.Is(err, relock.ErrNotHeld) {
						t.Errorf("%s: unlock: %v; want ErrNotHeld", o.name, err)
					}
					if got, err := tc.holder.count(c1, held, n); got != 1 || err != nil {
						t.Fatalf("after the unlock by %s: holder's count = %d, %v; want 1", o.name, got, err)
					}
					if err := held.Err(); err != nil {
						t.Fatalf("after the unlock by %s: holder's context ended: %v", o.name, context.Cause(held))
					}
				}
				if err := tc.holder.unlock(c1, held, n); err != nil {
					t.Fatalf("holder's unlock: %v", err)
				}
			})
		}
	})
}

// A waiter whose first try fails and whose holder unlocks before the waiter's subscription
// is confirmed hears no message: the unlock was published before anyone listened. It must
// try again as soon as its subscription is confirmed, and get the lock then, not sit out
// the holder's whole lease (a minute here; the bound is 10s).
//
// The window is made deterministic by a proxy in front of the waiter's client that holds
// its SUBSCRIBE back until the holder's unlock has run.
//
// Guards against a waiter that, once subscribed, waits for a message before trying again
// (in the engine's wait loop that every kind shares).
func TestWakeupBeforeSubscription(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		holder := relocktest.New(t, b)
		proxy := redistest.StartProxy(t, b.Addr)
		waiter := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()})
		for _, tc := range []struct{ holder, waiter holdKind }{
			{kindRLock, kindRLock},
			{kindFair, kindFair},
			{kindWrite, kindWrite},
			{kindWrite, kindRead},
		} {
			t.Run(tc.waiter.name+" behind "+tc.holder.name, func(t *testing.T) {
				n := "subscribe-gap:" + tc.holder.name + ":" + tc.waiter.name
				held, err := tc.holder.lock(holder, redistest.Context(t, 30*time.Second), n, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				// The waiter's SUBSCRIBE to its channel ("$9" is the length of the command's
				// name in the protocol: UNSUBSCRIBE does not match). Other requests may name
				// the channel too (a fair waiter's first try does).
				arrived, release := proxy.HoldRequest("$9\r\nSUBSCRIBE\r\n", tc.waiter.channel(n))
				defer release()

				acquired := make(chan error, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					h, err := tc.waiter.lock(waiter, ctx, n, 0)
					if err == nil {
						err = tc.waiter.unlock(waiter, h, n)
					}
					acquired <- err
				}()
				select {
				case <-arrived: // the waiter tried, found the lock held, and subscribes
				case err := <-acquired:
					t.Fatalf("waiter returned before it subscribed: %v", err)
				case <-time.After(10 * time.Second):
					t.Fatal("the waiter did not subscribe within 10s")
				}
				// Nobody listens on the channel yet: this unlock's message is lost.
				if err := tc.holder.unlock(holder, held, n); err != nil {
					t.Fatalf("holder's unlock: %v", err)
				}
				release()
				select {
				case err := <-acquired:
					if err != nil {
						t.Fatalf("waiter: %v", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("waiter not in within 10s of a lock freed before its subscription was " +
						"confirmed: it waits out the holder's minute-long lease instead of trying again")
				}
			})
		}
	})
}

// A re-entry never shortens what the owner's earlier hold was promised: after a re-entry
// with a shorter fixed lease, or one that turns the watchdog on (30s), the key keeps the
// first hold's minute.
//
// Guards against a re-entry that sets the expiry to its own lease rather than to the
// longer of the two: the first hold's context would outlive the key.
func TestReentryNeverShortensLease(t *testing.T) {
	const long = time.Minute
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b) // watchdog timeout: the default 30s
		for _, k := range []holdKind{kindRLock, kindFair, kindWrite, kindSpin} {
			t.Run(k.name, func(t *testing.T) {
				for _, tc := range []struct {
					name  string
					lease time.Duration // of the re-entry; 0: the watchdog's
				}{
					{"shorter fixed lease", 2 * time.Second},
					{"watchdog", 0},
				} {
					t.Run(tc.name, func(t *testing.T) {
						n := "reentry-keeps:" + k.name + ":" + tc.name
						held, err := k.lock(c, redistest.Context(t, 30*time.Second), n, long)
						if err != nil {
							t.Fatal(err)
						}
						again, err := k.lock(c, held, n, tc.lease)
						if err != nil {
							t.Fatalf("re-entry: %v", err)
						}
						// Far beyond 30s, and far within a minute, even on a loaded machine.
						if ms := redistest.PTTL(t, b.Client(t), n); ms < 45_000 {
							t.Fatalf("PTTL after re-entering a %v hold with lease %v = %dms; want the first hold's minute (at least 45000ms)",
								long, tc.lease, ms)
						}
						for range 2 {
							if err := k.unlock(c, again, n); err != nil {
								t.Fatalf("unlock: %v", err)
							}
						}
					})
				}
			})
		}
	})
}

// Fencing tokens are Redisson's RFencedLock counter: a lock whose counter does not exist
// yet hands out 1, then 2, 3, ... one for each first-level acquisition, be it a Lock, a
// Lock with a fixed lease or a TryLock, and the token is the counter's value, which a Java
// holder of the same lock reads. For each kind that takes tokens.
//
// Guards against a counter that moves by more than one per acquisition, or a token that is
// not the counter's: tokens would still grow, but Go and Java holders would not count
// alike.
func TestFencingTokensCountFromOne(t *testing.T) {
	type fenced struct {
		name   string
		lock   func(c *relock.Client, ctx context.Context, n string, opts ...rlock.Option) (context.Context, error)
		try    func(c *relock.Client, ctx context.Context, n string) (context.Context, error)
		token  func(c *relock.Client, held context.Context, n string) (int64, bool)
		unlock func(c *relock.Client, held context.Context, n string) error
	}
	kinds := []fenced{
		{
			name: "rlock",
			lock: func(c *relock.Client, ctx context.Context, n string, opts ...rlock.Option) (context.Context, error) {
				return c.Lock(n, rlock.WithFencing()).Lock(ctx, opts...)
			},
			try: func(c *relock.Client, ctx context.Context, n string) (context.Context, error) {
				return c.Lock(n, rlock.WithFencing()).TryLock(ctx)
			},
			token:  func(c *relock.Client, held context.Context, n string) (int64, bool) { return c.Lock(n).Token(held) },
			unlock: func(c *relock.Client, held context.Context, n string) error { return c.Lock(n).Unlock(held) },
		},
		{
			name: "fair",
			lock: func(c *relock.Client, ctx context.Context, n string, opts ...rlock.Option) (context.Context, error) {
				fo := make([]fairlock.Option, len(opts))
				for i, o := range opts {
					fo[i] = o
				}
				return c.FairLock(n, rlock.WithFencing()).Lock(ctx, fo...)
			},
			try: func(c *relock.Client, ctx context.Context, n string) (context.Context, error) {
				return c.FairLock(n, rlock.WithFencing()).TryLock(ctx)
			},
			token:  func(c *relock.Client, held context.Context, n string) (int64, bool) { return c.FairLock(n).Token(held) },
			unlock: func(c *relock.Client, held context.Context, n string) error { return c.FairLock(n).Unlock(held) },
		},
		{
			name: "write",
			lock: func(c *relock.Client, ctx context.Context, n string, opts ...rlock.Option) (context.Context, error) {
				wo := make([]rwlock.Option, len(opts))
				for i, o := range opts {
					wo[i] = o
				}
				return c.RWLock(n, rlock.WithFencing()).Lock(ctx, wo...)
			},
			try: func(c *relock.Client, ctx context.Context, n string) (context.Context, error) {
				return c.RWLock(n, rlock.WithFencing()).TryLock(ctx)
			},
			token:  func(c *relock.Client, held context.Context, n string) (int64, bool) { return c.RWLock(n).Token(held) },
			unlock: func(c *relock.Client, held context.Context, n string) error { return c.RWLock(n).Unlock(held) },
		},
	}
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		for _, k := range kinds {
			t.Run(k.name, func(t *testing.T) {
				n := "tokens-from-one:" + k.name
				counter := "redisson_lock_token:{" + n + "}"
				redistest.MustDo(t, side, "DEL", n, counter)
				ctx := redistest.Context(t, 30*time.Second)
				steps := []struct {
					name string
					take func() (context.Context, error)
				}{
					{"Lock", func() (context.Context, error) { return k.lock(c, ctx, n) }},
					{"Lock again", func() (context.Context, error) { return k.lock(c, ctx, n) }},
					{"Lock with a lease", func() (context.Context, error) { return k.lock(c, ctx, n, rlock.WithLease(10*time.Second)) }},
					{"TryLock", func() (context.Context, error) { return k.try(c, ctx, n) }},
				}
				for i, s := range steps {
					held, err := s.take()
					if err != nil {
						t.Fatalf("%s: %v", s.name, err)
					}
					want := int64(i + 1)
					if tok, ok := k.token(c, held, n); !ok || tok != want {
						t.Errorf("%s: token %d (ok %v); want %d", s.name, tok, ok, want)
					}
					if v, _ := redistest.Do(t, side, "GET", counter).AsInt64(); v != want {
						t.Errorf("%s: counter %d; want %d", s.name, v, want)
					}
					if err := k.unlock(c, held, n); err != nil {
						t.Fatalf("%s: unlock: %v", s.name, err)
					}
				}
			})
		}
	})
}

// Goroutines that share an owner (one context passed to each) and lock at once take one
// hold each, as a re-entry does: the owner counts as many holds as Locks returned, each
// Unlock releases one, the last frees the lock, and no hold's context ends before it. For
// every kind. Guards against first-level acquisitions of one owner that each take the
// count from nothing (a Lock failed as not held, an Unlock found nothing, a hold's context
// ended as lost), and against an acquisition that takes the others' holds for requests of
// its own that ran late and gives them back.
func TestOwnerSharedByGoroutinesLockingAtOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		for _, k := range []holdKind{kindRLock, kindSpin, kindFair, kindWrite, kindRead} {
			t.Run(k.name, func(t *testing.T) {
				name := "shared-owner:" + k.name
				const goroutines = 4
				for round := range 10 {
					owner := relock.NewOwner(redistest.Context(t, 30*time.Second))
					start := make(chan struct{})
					helds := make(chan context.Context, goroutines)
					var wg sync.WaitGroup
					for range goroutines {
						wg.Add(1)
						go func() {
							defer wg.Done()
							<-start
							held, err := k.lock(c, owner, name, 0)
							if err != nil {
								t.Errorf("round %d: Lock: %v", round, err)
								return
							}
							helds <- held
						}()
					}
					close(start)
					wg.Wait()
					close(helds)
					var all []context.Context
					for h := range helds {
						all = append(all, h)
					}
					if n, err := k.count(c, owner, name); n != len(all) || err != nil {
						t.Fatalf("round %d: hold count %d, %v after %d Locks returned", round, n, err, len(all))
					}
					for i, h := range all {
						if h.Err() != nil {
							t.Fatalf("round %d: a hold's context ended before its Unlock: %v", round, context.Cause(h))
						}
						if err := k.unlock(c, h, name); err != nil {
							t.Fatalf("round %d: Unlock %d of %d: %v", round, i+1, len(all), err)
						}
					}
					if n, err := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 || err != nil {
						t.Fatalf("round %d: EXISTS %s after every Unlock = %d, %v; want 0", round, name, n, err)
					}
				}
			})
		}
	})
}

// A re-entry with a fixed lease into a hold that the watchdog renews leaves it renewed: a
// hold that any of its acquisitions took without WithLease is renewed until it is fully
// released (rlock.WithLease). Past the watchdog's lease, and the re-entry's, both contexts
// are live and Redis still has both holds.
func TestFixedReentryKeepsRenewal(t *testing.T) {
	t.Parallel()
	const watchdog = time.Second
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(watchdog))
		for _, k := range []holdKind{kindRLock, kindFair, kindWrite, kindSpin} {
			t.Run(k.name, func(t *testing.T) {
				n := "fixed-reentry:" + k.name
				held, err := k.lock(c, redistest.Context(t, time.Minute), n, 0)
				if err != nil {
					t.Fatal(err)
				}
				again, err := k.lock(c, held, n, 100*time.Millisecond)
				if err != nil {
					t.Fatalf("re-entry: %v", err)
				}
				time.Sleep(3 * watchdog) // three watchdog leases
				if err := again.Err(); err != nil {
					t.Fatalf("the hold's context ended %v after a fixed-lease re-entry (cause %v); want it renewed", 3*watchdog, context.Cause(again))
				}
				if got, err := k.count(c, again, n); got != 2 || err != nil {
					t.Fatalf("hold count %v after the re-entry = %d, %v; want 2", 3*watchdog, got, err)
				}
				for range 2 {
					if err := k.unlock(c, again, n); err != nil {
						t.Fatalf("unlock: %v", err)
					}
				}
			})
		}
	})
}

// An acquisition whose connection breaks with its request held up on the way is sent again
// and counted once; when the first request then reaches Redis behind the second, it counts
// the owner's hold once more than the owner took. That surplus is the client's own doing:
// the owner's unlocks, one per Lock, still release the lock, none failing, and nothing is
// left of it; so too when the owner re-enters once more first (before the late request
// runs, or after it), and when the client closes instead (which releases the holds it
// knows). For every kind whose holds an owner counts, after a first-level acquisition and
// after a re-entry. Once a call has given the surplus back, no late request is left, and
// the owner's next unlocks read nothing first (docs/design.md: only while late requests
// stay with the hold do its unlocks read the count).
func TestAcquireRunsLate(t *testing.T) {
	type then int
	const (
		unlock then = iota
		reenter
		reenterFirst // before the late request runs
		closeClient
	)
	cases := []struct {
		what    string
		reentry bool
		then    then
	}{
		{"first level", false, unlock}, {"re-entry", true, unlock},
		{"first level then re-entry", false, reenter}, {"first level, re-entry, then the late request", false, reenterFirst},
		{"re-entry then Close", true, closeClient},
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, k := range lateKinds {
			for _, tc := range cases {
				t.Run(k.name+"/"+tc.what, func(t *testing.T) {
					name := "late-" + k.name
					late, c := lateClient(t, b)
					side := b.Client(t)
					ctx := redistest.Context(t, 30*time.Second)
					// A first hold loads the script, so that the late request is the
					// acquisition itself; it is kept for the re-entry.
					var holds []context.Context
					first, err := k.lock(c, ctx, name, 0)
					if err != nil {
						t.Fatalf("Lock: %v", err)
					}
					if tc.reentry {
						holds, ctx = append(holds, first), first
					} else if err := k.unlock(c, first, name); err != nil {
						t.Fatalf("Unlock: %v", err)
					}
					arrived, send := late.HoldBroken(k.acquire.SHA1, name)
					defer send()
					held, err := k.lock(c, ctx, name, 0)
					redistest.Arrived(t, arrived, "Lock", err)
					if err != nil {
						t.Fatalf("Lock whose first request was held up: %v", err)
					}
					holds = append(holds, held)
					if n, err := k.count(c, held, name); err != nil || n != len(holds) {
						t.Fatalf("Redis counts %d holds (%v) before the late request ran; want %d", n, err, len(holds))
					}
					if tc.then == reenterFirst {
						h, err := k.lock(c, held, name, 0)
						if err != nil {
							t.Fatalf("a re-entry before the late request ran: %v", err)
						}
						holds = append(holds, h)
						if n, err := k.count(c, h, name); err != nil || n != len(holds) {
							t.Fatalf("Redis counts %d holds (%v) after the re-entry; want %d", n, err, len(holds))
						}
					}
					send()
					if n, err := k.count(c, held, name); err != nil || n != len(holds)+1 {
						t.Fatalf("the late request left %d holds (%v); want %d: the test proved nothing", n, err, len(holds)+1)
					}
					switch tc.then {
					case reenter:
						h, err := k.lock(c, held, name, 0)
						if err != nil {
							t.Fatalf("a re-entry after the late request ran: %v", err)
						}
						holds = append(holds, h)
					case closeClient:
						if err := c.Close(); err != nil {
							t.Errorf("Close: %v", err)
						}
						holds = nil
					}
					// The surplus is given back by the re-entry after the late request,
					// otherwise by the first unlock: the unlocks after it read nothing.
					gaveBack := tc.then == reenter
					for i := len(holds) - 1; i >= 0; i-- {
						var read <-chan struct{}
						if gaveBack {
							var send func()
							read, send = late.HoldBroken(script.RLockState().SHA1, name)
							defer send()
						}
						if err := k.unlock(c, holds[i], name); err != nil {
							t.Errorf("Unlock %d of %d: %v", len(holds)-i, len(holds), err)
						}
						select {
						case <-read:
							t.Errorf("Unlock %d of %d read the hold count first, though the surplus was given back and no late request is left", len(holds)-i, len(holds))
						default:
						}
						gaveBack = true
					}
					if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
						t.Errorf("the lock is still there after the owner's unlocks (PTTL %dms)", redistest.PTTL(t, side, name))
					}
				})
			}
		}
	})
}

// An acquisition's request that runs late (see TestAcquireRunsLate) may run after its owner
// has released the lock: it takes a hold that the client does not know of. The owner's next
// Lock gives that hold back, whatever else it finds: its Unlock then frees the lock, and
// nothing keeps renewing a hold that nobody will release. (The next Lock found two holds,
// counted both, and its Unlock released one: Unlock said nil, and the watchdog renewed the
// other for as long as the owner lived.) For every kind whose holds an owner counts.
func TestLateRequestAfterLastUnlock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, k := range lateKinds {
			for _, relock := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/lock again %v", k.name, relock), func(t *testing.T) {
					lateAfterLastUnlock(t, b, k, relock)
				})
			}
		}
	})
}

// lateKind is a kind whose holds an owner counts, with the script of its acquisitions,
// which a test holds back (redistest.LateRequests) to make it run late.
type lateKind struct {
	holdKind
	acquire *script.Script
}

var lateKinds = []lateKind{
	{kindRLock, script.RLockAcquire()}, {kindSpin, script.RLockAcquire()}, {kindFair, script.FairAcquire()},
	{kindWrite, script.RWLockWriteAcquire()}, {kindRead, script.RWLockReadAcquire()},
}

// lateClient returns a relock client on b whose requests the test can hold back.
func lateClient(t *testing.T, b *redistest.Backend) (*redistest.LateRequests, *relock.Client) {
	t.Helper()
	late := redistest.NewLateRequests(b.Client(t))
	c := relocktest.On(t, late)
	return late, c
}

// warmLate takes and releases a hold of name for owner, which loads the kind's scripts:
// the request a test then holds back is the acquisition itself.
func warmLate(t *testing.T, c *relock.Client, k lateKind, owner context.Context, name string) {
	t.Helper()
	first, err := k.lock(c, owner, name, 0)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := k.unlock(c, first, name); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// wantStrayGivenBack checks, once a late request has left owner a hold of name that c
// does not know of, that the owner's next Lock gives it back and its Unlock frees the
// lock, with nothing left for the watchdog to renew.
func wantStrayGivenBack(t *testing.T, c *relock.Client, side rueidis.Client, k lateKind, owner context.Context, name string) {
	t.Helper()
	if n, err := k.count(c, owner, name); err != nil || n != 1 {
		t.Fatalf("the late request left %d holds of the owner (%v); want 1: the test proved nothing", n, err)
	}
	h, err := k.lock(c, owner, name, 0)
	if err != nil {
		t.Fatalf("the owner's next Lock: %v", err)
	}
	if n, err := k.count(c, h, name); err != nil || n != 1 {
		t.Errorf("the owner's next Lock left it %d holds (%v); want the one it took", n, err)
	}
	if err := k.unlock(c, h, name); err != nil {
		t.Errorf("its Unlock: %v", err)
	}
	wantFreed(t, c, side, name)
}

// wantFreed checks that name is gone from Redis and that c renews no hold.
func wantFreed(t *testing.T, c *relock.Client, side rueidis.Client, name string) {
	t.Helper()
	if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
		t.Errorf("the lock is still there after the owner's Unlock (PTTL %dms)", redistest.PTTL(t, side, name))
	}
	if n := c.WatchdogStats().Holds; n != 0 {
		t.Errorf("the watchdog still renews %d holds after the owner's Unlock", n)
	}
}

// lateAfterLastUnlock is a case of TestLateRequestAfterLastUnlock: once the late request
// has run, the owner locks again and unlocks (relock), or only unlocks, which finds no
// hold of its own (ErrNotHeld) and gives the stray one back.
func lateAfterLastUnlock(t *testing.T, b *redistest.Backend, k lateKind, again bool) {
	name := fmt.Sprintf("late-after-%s-%v", k.name, again)
	late, c := lateClient(t, b)
	side := b.Client(t)
	owner := relock.NewOwner(redistest.Context(t, 30*time.Second))
	warmLate(t, c, k, owner, name)
	arrived, send := late.HoldBroken(k.acquire.SHA1, name)
	defer send()
	held, err := k.lock(c, owner, name, 0)
	redistest.Arrived(t, arrived, "Lock", err)
	if err != nil {
		t.Fatalf("Lock whose first request was held up: %v", err)
	}
	if err := k.unlock(c, held, name); err != nil {
		t.Fatalf("Unlock before the late request ran: %v", err)
	}
	send()
	if again {
		wantStrayGivenBack(t, c, side, k, owner, name)
		return
	}
	if n, err := k.count(c, owner, name); err != nil || n != 1 {
		t.Fatalf("the late request left %d holds of the owner (%v); want 1: the test proved nothing", n, err)
	}
	if err := k.unlock(c, owner, name); !errors.Is(err, relock.ErrNotHeld) {
		t.Errorf("the owner's Unlock of no hold it took: %v; want ErrNotHeld", err)
	}
	wantFreed(t, c, side, name)
}

// An acquisition that fails (the lock was held: TryLock's ErrLocked) may have sent a
// request that runs late, once the lock is free: it takes a hold for the owner that the
// client does not know of. The owner's next Lock gives it back, as after a last Unlock
// (TestLateRequestAfterLastUnlock): its Unlock then frees the lock.
func TestLateRequestOfAFailedLock(t *testing.T) {
	try := map[string]func(c *relock.Client, ctx context.Context, n string) error{
		"rlock": func(c *relock.Client, ctx context.Context, n string) error { return keep(c.Lock(n).TryLock(ctx)) },
		"spin":  func(c *relock.Client, ctx context.Context, n string) error { return keep(c.SpinLock(n).TryLock(ctx)) },
		"fair":  func(c *relock.Client, ctx context.Context, n string) error { return keep(c.FairLock(n).TryLock(ctx)) },
		"write": func(c *relock.Client, ctx context.Context, n string) error { return keep(c.RWLock(n).TryLock(ctx)) },
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, k := range lateKinds {
			if try[k.name] == nil {
				continue // readers share the lock: a reader's TryLock does not fail
			}
			t.Run(k.name, func(t *testing.T) {
				name := "late-failed-" + k.name
				late, c := lateClient(t, b)
				other := relocktest.New(t, b)
				side := b.Client(t)
				ctx := redistest.Context(t, 30*time.Second)
				owner := relock.NewOwner(ctx)
				warmLate(t, c, k, owner, name)
				held, err := k.lock(other, relock.NewOwner(ctx), name, 0)
				if err != nil {
					t.Fatalf("another client's Lock: %v", err)
				}
				arrived, send := late.HoldBroken(k.acquire.SHA1, name)
				defer send()
				err = try[k.name](c, owner, name)
				redistest.Arrived(t, arrived, "TryLock", err)
				if !errors.Is(err, relock.ErrLocked) {
					t.Fatalf("TryLock of a held lock whose first request was held up: %v; want ErrLocked", err)
				}
				if err := k.unlock(other, held, name); err != nil {
					t.Fatalf("the other client's Unlock: %v", err)
				}
				send()
				wantStrayGivenBack(t, c, side, k, owner, name)
			})
		}
	})
}

// Options given to Do apply to its acquisition, as those given to Lock do, for the plain
// and the fair lock alike: WithFencing gives the hold a token, WithLease a fixed lease, and
// WithWaitTimeout makes a Do on a lock held elsewhere fail with DeadlineExceeded without
// running fn. Guards against a Do that takes the lock with the Mutex's options only.
func TestDoTakesOptions(t *testing.T) {
	t.Parallel()
	// doer is one kind's mutex of a name, on a client: its Do with rlock's options, and
	// the calls the test looks through.
	type doer struct {
		do     func(ctx context.Context, fn func(context.Context) error, opts ...rlock.Option) error
		lock   func(ctx context.Context) (context.Context, error)
		unlock func(ctx context.Context) error
		token  func(ctx context.Context) (int64, bool)
		ttl    func(ctx context.Context) (time.Duration, error)
	}
	kinds := []struct {
		name  string
		mutex func(c *relock.Client, n string) doer
	}{
		{"rlock", func(c *relock.Client, n string) doer {
			mu := c.Lock(n)
			return doer{mu.Do, func(ctx context.Context) (context.Context, error) { return mu.Lock(ctx) }, mu.Unlock, mu.Token, mu.TTL}
		}},
		{"fair", func(c *relock.Client, n string) doer {
			mu := c.FairLock(n)
			do := func(ctx context.Context, fn func(context.Context) error, opts ...rlock.Option) error {
				fair := make([]fairlock.Option, len(opts))
				for i, o := range opts {
					fair[i] = o
				}
				return mu.Do(ctx, fn, fair...)
			}
			return doer{do, func(ctx context.Context) (context.Context, error) { return mu.Lock(ctx) }, mu.Unlock, mu.Token, mu.TTL}
		}},
	}
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		for _, k := range kinds {
			name := "do-opts:" + k.name
			mu := k.mutex(c, name)
			err := mu.do(ctx, func(held context.Context) error {
				if _, ok := mu.token(held); !ok {
					t.Errorf("%s: Do(WithFencing): Token = _, false; want the hold's token", k.name)
				}
				if ttl, err := mu.ttl(held); err != nil || ttl <= 0 || ttl > 10*time.Second {
					t.Errorf("%s: Do(WithLease(10s)): TTL = %v, %v; want within the 10s lease", k.name, ttl, err)
				}
				return nil
			}, rlock.WithFencing(), rlock.WithLease(10*time.Second))
			if err != nil {
				t.Fatalf("%s: %v", k.name, err)
			}
			elsewhere := k.mutex(other, name)
			held, err := elsewhere.lock(ctx)
			if err != nil {
				t.Fatalf("%s: %v", k.name, err)
			}
			// ctx's own bound, far above the option's, ends the call should the option be lost.
			bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
			ran := false
			err = mu.do(bounded, func(context.Context) error { ran = true; return nil }, rlock.WithWaitTimeout(200*time.Millisecond))
			if !errors.Is(err, context.DeadlineExceeded) || ran || bounded.Err() != nil {
				t.Errorf("%s: Do(WithWaitTimeout(200ms)) on a lock held elsewhere = %v, fn ran: %v; want DeadlineExceeded and fn not run", k.name, err, ran)
			}
			cancel()
			if err := elsewhere.unlock(held); err != nil {
				t.Fatalf("%s: %v", k.name, err)
			}
		}
	})
}
