package rwlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// RExtend carries fixed-lease read holds past their lease, and Extend a write hold: their
// contexts stay live and a writer of another owner is kept out.
func TestExtendReadAndWriteHolds(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		rw := c.RWLock("extend:rw")
		start := time.Now()
		read, err := rw.RLock(redistest.Context(t, time.Minute), rlock.WithLease(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if read, err = rw.RLock(read, rlock.WithLease(time.Second)); err != nil { // two read holds
			t.Fatal(err)
		}
		if err := rw.RExtend(read, 30*time.Second); err != nil {
			t.Fatalf("RExtend: %v", err)
		}
		time.Sleep(time.Until(start.Add(1500 * time.Millisecond)))
		if read.Err() != nil {
			t.Fatalf("the read hold's context ended at its first lease: %v", context.Cause(read))
		}
		if _, err := rw.TryLock(context.Background()); !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("another owner's write TryLock: %v; want ErrLocked", err)
		}
		for range 2 {
			if err := rw.RUnlock(read); err != nil {
				t.Fatal(err)
			}
		}

		start = time.Now()
		write, err := rw.Lock(redistest.Context(t, time.Minute), rlock.WithLease(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := rw.Extend(write, 30*time.Second); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		time.Sleep(time.Until(start.Add(1500 * time.Millisecond)))
		if write.Err() != nil {
			t.Fatalf("the write hold's context ended at its first lease: %v", context.Cause(write))
		}
		if _, err := rw.RLock(relock.NewOwner(context.Background()), rlock.WithWaitTimeout(100*time.Millisecond)); err == nil {
			t.Fatal("another owner got a read hold beside the extended write hold")
		}
		if err := rw.Unlock(write); err != nil {
			t.Fatal(err)
		}
	})
}

// RExtend of a read hold taken beside its owner's write hold raises the lock's expiry, and
// with it the write field's, which lives as long as the hash: the write hold's context
// stays live past its own lease, as the write hold does in Redis.
func TestRExtendBesideTheWriteHoldKeepsIt(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		rw := c.RWLock("extend:read-beside-write")
		start := time.Now()
		write, err := rw.Lock(redistest.Context(t, time.Minute), rlock.WithLease(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		read, err := rw.RLock(write, rlock.WithLease(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := rw.RExtend(read, 30*time.Second); err != nil {
			t.Fatalf("RExtend: %v", err)
		}
		time.Sleep(time.Until(start.Add(1500 * time.Millisecond)))
		if ok, err := rw.IsHeld(write); err != nil || !ok {
			t.Fatalf("IsHeld of the write hold past its own lease: %v %v; want held (the read hold's extension keeps it)", ok, err)
		}
		if write.Err() != nil {
			t.Errorf("the write hold's context ended at its own lease (%v), while Redis still holds it", context.Cause(write))
		}
		if err := rw.RUnlock(read); err != nil {
			t.Fatal(err)
		}
		if err := rw.Unlock(write); err != nil {
			t.Fatal(err)
		}
	})
}
