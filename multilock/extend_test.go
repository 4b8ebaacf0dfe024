package multilock_test

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

// A MultiLock's hold carries its owner, so each member's Extend through it makes that
// member's hold last at least d from now, "in Redis and in the hold's context": with a
// fixed lease of 2s, every member extended by 8s is still held, and the MultiLock's hold
// still live, a lease and a half later; another owner is still turned away from each.
// When one member is left out of the extension, its lease runs out: the MultiLock's hold
// ends with ErrLeaseLost, and Unlock names that member alone as not held. Guards against an Extend that finds no
// hold through a MultiLock's context (the owner of the last member only), and against a
// MultiLock whose context keeps the first deadline of the lease after every member was
// extended.
func TestMultiLockHoldExtendedThroughEachMember(t *testing.T) {
	const lease = 2 * time.Second
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := redistest.Context(t, 30*time.Second)
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		extends := []func(context.Context, time.Duration) error{
			c.Lock(memberNames[0]).Extend, c.FairLock(memberNames[1]).Extend, c.RWLock(memberNames[2]).Extend,
		}
		ml := c.MultiLock(members(c)...)
		held, err := ml.Lock(ctx, rlock.WithLease(lease))
		if err != nil {
			t.Fatal(err)
		}
		for i, extend := range extends {
			if err := extend(held, 4*lease); err != nil {
				t.Fatalf("Extend of %s through the MultiLock's hold: %v", memberNames[i], err)
			}
		}
		time.Sleep(lease + lease/2)
		if err := held.Err(); err != nil {
			t.Fatalf("every member extended by %v: the MultiLock's hold ended a lease and a half after Lock: %v", 4*lease, context.Cause(held))
		}
		for _, n := range memberNames {
			if ms := pttl(t, side, n); ms < lease.Milliseconds()/2 {
				t.Errorf("%s extended by %v expires in %dms, a lease and a half later", n, 4*lease, ms)
			}
		}
		if _, err := other.Lock(memberNames[0]).TryLock(ctx); !errors.Is(err, relock.ErrLocked) {
			t.Errorf("another owner's TryLock of extended %s: %v; want ErrLocked", memberNames[0], err)
		}
		if err := ml.Unlock(held); err != nil {
			t.Fatalf("Unlock of the extended MultiLock: %v", err)
		}
		if got := locked(t, ctx, c); got[0] || got[1] || got[2] {
			t.Fatalf("after Unlock, locked = %v", got)
		}

		// One member (ml:settings) left out: its lease ends the MultiLock's hold.
		held, err = ml.Lock(ctx, rlock.WithLease(lease))
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, 2} {
			if err := extends[i](held, 4*lease); err != nil {
				t.Fatalf("Extend of %s: %v", memberNames[i], err)
			}
		}
		select {
		case <-held.Done():
		case <-time.After(4 * lease):
			t.Fatalf("%s not extended: the MultiLock's hold still live %v after its lease of %v", memberNames[1], 4*lease, lease)
		}
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Errorf("the MultiLock's hold ended with %v; want ErrLeaseLost", cause)
		}
		// The hold's context ends first, at the lease counted from before its request was
		// sent; Redis lets the key go a little later, counting from when it ran.
		redistest.Eventually(t, 10*time.Second, memberNames[1]+" still in Redis after its lease", func() bool {
			return pttl(t, side, memberNames[1]) == -2
		})
		err = ml.Unlock(held)
		if got := relocktest.Named(err, relock.ErrNotHeld); len(got) != 1 || got[0] != memberNames[1] {
			t.Errorf("Unlock with %s run out = %v; want ErrNotHeld naming it alone", memberNames[1], err)
		}
		if got := locked(t, ctx, c); got[0] || got[1] || got[2] {
			t.Errorf("after Unlock, locked = %v", got)
		}
	})
}

// Members taken WithFencing through a MultiLock each get a fencing token, read through the
// MultiLock's hold, and each member's token grows with every later holder: the next
// MultiLock, one after a member was forced (ForceUnlock by another client) under the
// hold, one after a member's key was deleted (a lost lease). Guards against a MultiLock
// hold whose members' tokens cannot be read through it, and against a token handed out
// again after a hold ended by force.
func TestMultiLockFencedMembersTokensGrow(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := redistest.Context(t, 30*time.Second)
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		tokens := []func(context.Context) (int64, bool){
			c.Lock(memberNames[0]).Token, c.FairLock(memberNames[1]).Token, c.RWLock(memberNames[2]).Token,
		}
		ml := c.MultiLock(members(c)...)
		last := make([]int64, len(memberNames))
		take := func(what string) context.Context {
			t.Helper()
			held, err := ml.Lock(ctx, rlock.WithFencing())
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			for i, token := range tokens {
				tok, ok := token(held)
				if !ok || tok <= last[i] {
					t.Errorf("%s: %s's token = %d, %v; want one above %d", what, memberNames[i], tok, ok, last[i])
				}
				last[i] = tok
			}
			return held
		}
		held := take("first Lock")
		if err := ml.Unlock(held); err != nil {
			t.Fatal(err)
		}
		held = take("next Lock")
		if ok, err := other.Lock(memberNames[0]).ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock of %s = %v, %v", memberNames[0], ok, err)
		}
		_ = ml.Unlock(held) // reports the forced member
		held = take("Lock after a member was forced")
		redistest.MustDo(t, side, "DEL", memberNames[1])
		_ = ml.Unlock(held) // reports the deleted member
		held = take("Lock after a member's key was deleted")
		if err := ml.Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}
