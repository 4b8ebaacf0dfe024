package relock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// The tests in this file hold the lease-truth rule against writes to a lock's key that no
// relock call made (another program, an operator): once Redis lets another owner in, the
// first hold's context ends with ErrLeaseLost, within a renewal round or two.

// A renewed hold whose hash another writer gave a "mode" it does not have (a write hold's
// mode set to read, a plain lock's hash given a read mode) lets a reader of another owner
// in: the first hold's context must then end with ErrLeaseLost, within a renewal round or
// two, and not live on beside the reader while renewals go on answering "held". So too for
// a write hold on a fixed lease beside its owner's renewed read hold, whose renewals keep
// the write hold's field, and so its context, alive with the hash.
func TestHoldEndsWhenAModeLetsAReaderIn(t *testing.T) {
	t.Parallel()
	const lease = 1500 * time.Millisecond // the watchdog's: a round every 500ms
	besideRead := holdKind{
		name: "write beside read",
		lock: func(c *relock.Client, ctx context.Context, n string, _ time.Duration) (context.Context, error) {
			// Shorter than the wait below: it is only kept by the read hold's renewals.
			w, err := kindWrite.lock(c, ctx, n, lease+lease/3)
			if err == nil {
				_, err = kindRead.lock(c, w, n, 0)
			}
			return w, err
		},
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, k := range []holdKind{kindWrite, kindRLock, kindFair, kindSpin, besideRead} {
			t.Run(k.name, func(t *testing.T) {
				c := relocktest.New(t, b, relock.WithWatchdogTimeout(lease))
				other := relocktest.New(t, b)
				side := b.Client(t)
				n := "foreign-mode:" + k.name
				held, err := k.lock(c, redistest.Context(t, time.Minute), n, 0)
				if err != nil {
					t.Fatal(err)
				}
				redistest.MustDo(t, side, "HSET", n, "mode", "read")
				r, err := kindRead.lock(other, relock.NewOwner(redistest.Context(t, time.Minute)), n, time.Minute)
				if err != nil {
					// The reader was kept out: the hold still excludes others.
					t.Logf("the reader of another owner was refused: %v", err)
					return
				}
				defer func() { _ = kindRead.unlock(other, r, n) }()
				// Room for a loaded machine: two leases, six renewal rounds.
				select {
				case <-held.Done():
				case <-time.After(2 * lease):
					t.Fatalf("a reader of another owner holds %s, and the %s hold's context is live %v later; want it ended with ErrLeaseLost", n, k.name, 2*lease)
				}
				if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
					t.Fatalf("the %s hold ended with %v; want ErrLeaseLost", k.name, cause)
				}
			})
		}
	})
}

// An owner that holds a read-write lock for writing and for reading keeps two holds, one
// field each: when another writer deletes one of the fields, that hold's context ends
// with ErrLeaseLost, and the other, which Redis still keeps (and which still keeps other
// owners out), stays live and renewed.
func TestOneOfAnOwnersReadAndWriteHoldsLost(t *testing.T) {
	t.Parallel()
	const lease = 1500 * time.Millisecond // the watchdog's: a round every 500ms
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, lost := range []string{"write", "read"} {
			t.Run(lost, func(t *testing.T) {
				c := relocktest.New(t, b, relock.WithWatchdogTimeout(lease))
				other := relocktest.New(t, b)
				side := b.Client(t)
				n := "foreign-hdel:" + lost
				w, err := kindWrite.lock(c, redistest.Context(t, time.Minute), n, 0)
				if err != nil {
					t.Fatal(err)
				}
				r, err := kindRead.lock(c, w, n, 0)
				if err != nil {
					t.Fatal(err)
				}
				// The hash holds the mode, the owner's read field and its write field.
				var field string
				fields, _ := redistest.Do(t, side, "HKEYS", n).AsStrSlice()
				for _, f := range fields {
					if f != "mode" && strings.HasSuffix(f, ":write") == (lost == "write") {
						field = f
					}
				}
				if len(fields) != 3 || field == "" {
					t.Fatalf("the lock's fields %q; want the mode, a read field and a write field", fields)
				}
				gone, kept := w, r
				if lost == "read" {
					gone, kept = r, w
				}
				redistest.MustDo(t, side, "HDEL", n, field)
				select {
				case <-gone.Done():
				case <-time.After(2 * lease):
					t.Fatalf("the %s hold's field is gone, and its context is live %v later", lost, 2*lease)
				}
				if cause := context.Cause(gone); !errors.Is(cause, relock.ErrLeaseLost) {
					t.Fatalf("the %s hold ended with %v; want ErrLeaseLost", lost, cause)
				}
				// Two leases: the other hold lives only if it is renewed, and is told
				// nothing false meanwhile.
				time.Sleep(2 * lease)
				if err := context.Cause(kept); err != nil {
					t.Fatalf("the hold beside the lost %s hold ended: %v; want it live, as Redis keeps it", lost, err)
				}
				if p := redistest.PTTL(t, side, n); p <= 0 {
					t.Fatalf("PTTL of the lock %d after two leases; want it renewed", p)
				}
				ctx := redistest.Context(t, time.Minute)
				if _, err := other.RWLock(n).TryLock(ctx); !errors.Is(err, relock.ErrLocked) {
					t.Errorf("TryLock of another owner beside the live hold: %v; want ErrLocked", err)
				}
				if _, err := other.RWLock(n).TryRLock(ctx); !errors.Is(err, relock.ErrLocked) {
					t.Errorf("TryRLock of another owner beside the live hold: %v; want ErrLocked", err)
				}
			})
		}
	})
}

// A lock whose expiry another writer removed (PERSIST) gets one again at its holder's next
// renewal, so that a holder that then falls silent still frees the lock within a lease:
// a waiter of another client gets it, and by then the holder's context has ended with
// ErrLeaseLost. For a read hold, its timeout keys lose their expiry too.
func TestPersistedLockFreesWithinALeaseOfSilence(t *testing.T) {
	t.Parallel()
	const lease = 1500 * time.Millisecond // the watchdog's: a round every 500ms
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, tc := range []struct{ holder, waiter holdKind }{
			{kindRLock, kindRLock},
			{kindSpin, kindSpin},
			{kindFair, kindFair},
			{kindWrite, kindWrite},
			{kindRead, kindWrite},
		} {
			t.Run(tc.holder.name, func(t *testing.T) {
				proxy := redistest.StartProxy(t, b.Addr)
				c := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()}, relock.WithWatchdogTimeout(lease), relock.WithLogger(nil))
				other := relocktest.New(t, b)
				side := b.Client(t)
				ctx := redistest.Context(t, time.Minute)
				n := "foreign-persist:" + tc.holder.name
				held, err := tc.holder.lock(c, relock.NewOwner(ctx), n, 0)
				if err != nil {
					t.Fatal(err)
				}
				keys, _ := redistest.Do(t, side, "KEYS", "{"+n+"}:*").AsStrSlice() // a reader's timeout keys
				for _, k := range append(keys, n) {
					redistest.MustDo(t, side, "PERSIST", k)
				}
				// The round in flight may have been sent before the PERSIST: two more.
				ticks := c.WatchdogStats().Ticks
				redistest.Eventually(t, 10*time.Second, "two renewal rounds", func() bool { return c.WatchdogStats().Ticks >= ticks+2 })
				proxy.Blackhole()
				defer proxy.Unblackhole()
				// Bounded: two of the holder's leases and a margin for a loaded machine.
				wctx, cancel := context.WithTimeout(relock.NewOwner(ctx), 2*lease+5*time.Second)
				defer cancel()
				h, err := tc.waiter.lock(other, wctx, n, 0)
				if err != nil {
					t.Fatalf("the waiter, after the holder of a persisted lock went silent: %v", err)
				}
				cause := context.Cause(held)
				if err := tc.waiter.unlock(other, h, n); err != nil {
					t.Fatal(err)
				}
				if !errors.Is(cause, relock.ErrLeaseLost) {
					t.Fatalf("another owner got the lock while the silent holder's context said %v; want it ended with ErrLeaseLost", cause)
				}
			})
		}
	})
}

// Writes paused past the lease (CLIENT PAUSE WRITE: reads go on, scripts wait, keys do not
// expire meanwhile): the holder cannot renew, and when the pause ends a waiter of another
// client gets the lock; at that moment the holder's context has already ended, with
// ErrLeaseLost. For each kind; a reader's pause lets a writer in.
func TestWritePausePastTheLeaseEndsTheHoldFirst(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		for _, tc := range []struct{ holder, waiter holdKind }{
			{kindRLock, kindRLock},
			{kindSpin, kindSpin},
			{kindFair, kindFair},
			{kindWrite, kindWrite},
			{kindRead, kindWrite},
		} {
			t.Run(tc.holder.name, func(t *testing.T) {
				c := relocktest.New(t, b, relock.WithWatchdogTimeout(lease), relock.WithLogger(nil))
				other := relocktest.New(t, b, relock.WithLogger(nil))
				ctx := redistest.Context(t, time.Minute)
				n := "write-pause:" + tc.holder.name
				held, err := tc.holder.lock(c, relock.NewOwner(ctx), n, 0)
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan error, 1)
				var cause error
				go func() {
					h, err := tc.waiter.lock(other, relock.NewOwner(ctx), n, 0)
					if err == nil {
						// What the holder's context said the moment another owner held the lock.
						cause = context.Cause(held)
						err = tc.waiter.unlock(other, h, n)
					}
					got <- err
				}()
				time.Sleep(lease / 10) // most often the waiter has found the lock held by now
				// Three leases: the holder's deadline passes well within the pause.
				redistest.MustDo(t, b.Client(t), "CLIENT", "PAUSE", "3000", "WRITE")
				if err := redistest.Recv(t, got, 30*time.Second, "the waiter's Lock"); err != nil {
					t.Fatalf("the waiter, after the pause: %v", err)
				}
				if !errors.Is(cause, relock.ErrLeaseLost) {
					t.Fatalf("another owner got the lock while the holder's context said %v; want it ended with ErrLeaseLost", cause)
				}
			})
		}
	})
}
