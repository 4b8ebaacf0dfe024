package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// A reader's hash field is its bare owner, as a plain or fair lock's is. A hold's context
// given to a lock of the other kind on the same name must be refused with ErrWrongType,
// naming the lock, with every hold in Redis and every hold's context left as they were:
// a plain Unlock through a reader's context used to delete the read-write lock, every
// other reader's hold with it (a writer then got in beside a live reader); a plain Lock
// through it re-entered the read-write lock as a plain one; and a refused RUnlock through
// a plain hold's context ended that hold's context and stopped its renewal.
func TestHoldOfAnotherKind(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(2*time.Second))
		c2 := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)

		t.Run("a reader's context to the exclusive kinds", func(t *testing.T) {
			rw := c.RWLock("xk:rw")
			r1, err := rw.RLock(relock.NewOwner(ctx))
			if err != nil {
				t.Fatal(err)
			}
			r2, err := c2.RWLock("xk:rw").RLock(relock.NewOwner(ctx))
			if err != nil {
				t.Fatal(err)
			}
			for _, call := range []struct {
				what string
				do   func() error
			}{
				{"Lock(n).Unlock", func() error { return c.Lock("xk:rw").Unlock(r1) }},
				{"FairLock(n).Unlock", func() error { return c.FairLock("xk:rw").Unlock(r1) }},
				{"SpinLock(n).Unlock", func() error { return c.SpinLock("xk:rw").Unlock(r1) }},
				{"Lock(n).Lock", func() error { return keep(c.Lock("xk:rw").Lock(r1)) }},
				{"Lock(n).TryLock", func() error { return keep(c.Lock("xk:rw").TryLock(r1)) }},
				{"FairLock(n).TryLock", func() error { return keep(c.FairLock("xk:rw").TryLock(r1)) }},
				{"Lock(n).Extend", func() error { return c.Lock("xk:rw").Extend(r1, time.Minute) }},
			} {
				redistest.Unchanged(t, side, "xk:rw", func() {
					wantErr(t, call.do(), relock.ErrWrongType, "xk:rw")
				})
				for i, r := range []context.Context{r1, r2} {
					if r.Err() != nil {
						t.Fatalf("after %s: reader %d's context ended: %v", call.what, i+1, context.Cause(r))
					}
				}
			}
			if _, err := c2.RWLock("xk:rw").TryLock(relock.NewOwner(ctx)); !errors.Is(err, relock.ErrLocked) {
				t.Fatalf("a writer while two readers read: %v; want ErrLocked", err)
			}
			if err := rw.RUnlock(r1); err != nil {
				t.Fatalf("reader 1's own RUnlock: %v", err)
			}
			if err := c2.RWLock("xk:rw").RUnlock(r2); err != nil {
				t.Fatalf("reader 2's own RUnlock: %v", err)
			}
		})

		t.Run("a plain hold's context to the read-write lock", func(t *testing.T) {
			mu := c.Lock("xk:plain")
			held, err := mu.Lock(relock.NewOwner(ctx))
			if err != nil {
				t.Fatal(err)
			}
			for _, call := range []struct {
				what string
				do   func() error
			}{
				{"RUnlock", func() error { return c.RWLock("xk:plain").RUnlock(held) }},
				{"RLock", func() error { return keep(c.RWLock("xk:plain").RLock(held)) }},
				{"RExtend", func() error { return c.RWLock("xk:plain").RExtend(held, time.Minute) }},
			} {
				redistest.Unchanged(t, side, "xk:plain", func() {
					wantErr(t, call.do(), relock.ErrWrongType, "xk:plain")
				})
				if held.Err() != nil {
					t.Fatalf("after %s: the plain hold's context ended: %v", call.what, context.Cause(held))
				}
			}
			// Still renewed: past two leases of 2s, the hold is in Redis and its context live.
			time.Sleep(4500 * time.Millisecond)
			if n, err := mu.HoldCount(held); n != 1 || err != nil || held.Err() != nil {
				t.Fatalf("the plain hold two leases later: count %d (%v), context %v; want still held", n, err, context.Cause(held))
			}
			if err := mu.Unlock(held); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("a read hold the client does not know of", func(t *testing.T) {
			// The scripts refuse it too: here the reader's field is written by hand, under
			// the owner the next acquisition of a fresh client's first owner takes.
			fresh := relocktest.New(t, b)
			owner := relock.NewOwner(ctx)
			bind, err := fresh.Lock("xk:bind").Lock(owner)
			if err != nil {
				t.Fatal(err)
			}
			if err := fresh.Lock("xk:bind").Unlock(bind); err != nil {
				t.Fatal(err)
			}
			id := fresh.ID() + ":1"
			redistest.MustDo(t, side, "HSET", "xk:foreign", id, "1", "mode", "read")
			redistest.MustDo(t, side, "PEXPIRE", "xk:foreign", "60000")
			redistest.MustDo(t, side, "SET", "{xk:foreign}:"+id+":rwlock_timeout:1", "1", "PX", "60000")
			for _, call := range []struct {
				what string
				do   func() error
			}{
				{"Lock(n).Lock", func() error { return keep(fresh.Lock("xk:foreign").Lock(owner)) }},
				{"FairLock(n).TryLock", func() error { return keep(fresh.FairLock("xk:foreign").TryLock(owner)) }},
				{"Lock(n).Unlock", func() error { return fresh.Lock("xk:foreign").Unlock(owner) }},
				{"FairLock(n).Unlock", func() error { return fresh.FairLock("xk:foreign").Unlock(owner) }},
			} {
				redistest.Unchanged(t, side, "xk:foreign", func() {
					wantErr(t, call.do(), relock.ErrWrongType, "xk:foreign")
				})
			}
		})
	})
}

// A hold's context given to the other side of its read-write lock, or to the same lock of
// another client, names no holder there: Unlock (and Extend) fail with ErrNotHeld naming
// the lock, and the hold stays as it was, in Redis and in its context. The write side's
// Unlock through a reader's context, and every kind's Unlock through a context whose
// owner is another client's.
func TestUnlockThroughAHoldOfAnotherSideOrClient(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, c2 := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		t.Run("a reader's context to the write side", func(t *testing.T) {
			rw := c.RWLock("xs:rw")
			read, err := rw.RLock(relock.NewOwner(ctx))
			if err != nil {
				t.Fatal(err)
			}
			redistest.Unchanged(t, side, "xs:rw", func() {
				wantErr(t, rw.Unlock(read), relock.ErrNotHeld, "xs:rw")
				wantErr(t, rw.Extend(read, time.Minute), relock.ErrNotHeld, "xs:rw")
			})
			if n, err := rw.RHoldCount(read); n != 1 || err != nil || read.Err() != nil {
				t.Fatalf("the read hold after the refused Unlock: count %d (%v), context %v; want held", n, err, context.Cause(read))
			}
			if err := rw.RUnlock(read); err != nil {
				t.Fatal(err)
			}
		})
		for _, k := range []holdKind{kindRLock, kindSpin, kindFair, kindWrite, kindRead} {
			t.Run("another client's context to "+k.name, func(t *testing.T) {
				name := "xs:client:" + k.name
				held, err := k.lock(c, relock.NewOwner(ctx), name, 0)
				if err != nil {
					t.Fatal(err)
				}
				redistest.Unchanged(t, side, name, func() {
					wantErr(t, k.unlock(c2, held, name), relock.ErrNotHeld, name)
				})
				if n, err := k.count(c2, held, name); n != 0 || err != nil {
					t.Fatalf("the other client's hold count through the context: %d, %v; want 0", n, err)
				}
				if n, err := k.count(c, held, name); n != 1 || err != nil || held.Err() != nil {
					t.Fatalf("the hold after the other client's Unlock: count %d (%v), context %v; want held", n, err, context.Cause(held))
				}
				if err := k.unlock(c, held, name); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}
