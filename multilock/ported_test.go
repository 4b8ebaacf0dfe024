package multilock_test

import (
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// RedissonMultiLockTest's testLockUnlock and testWaitAndLeaseTimeouts: a lease given to
// the call applies to every member, for Lock and for TryLock alike. Each member's key
// expires within the lease (10s) and no sooner than 5s, every member is held by the
// owner, and after Unlock none is held. A hold of the watchdog's would have the client's
// watchdog timeout, a minute here.
//
// Guards against a MultiLock that takes some members without the call's lease (the
// watchdog would renew them for as long as the client lives).
func TestMultiLockLeaseOnEveryMember(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const lease = 10 * time.Second
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		for _, try := range []bool{false, true} {
			ml := c.MultiLock(members(c)...)
			lock, what := ml.Lock, "Lock"
			if try {
				lock, what = ml.TryLock, "TryLock"
			}
			held, err := lock(ctx, rlock.WithLease(lease))
			if err != nil {
				t.Fatalf("%s with a lease: %v", what, err)
			}
			for _, name := range memberNames {
				if ms := pttl(t, side, name); ms <= 5000 || ms > lease.Milliseconds() {
					t.Errorf("%s: PTTL %s = %dms; want the lease of %v on every member", what, name, ms, lease)
				}
			}
			if ok, err := c.Lock(memberNames[0]).IsHeld(held); !ok || err != nil {
				t.Errorf("%s: IsHeld %s = %v, %v; want true", what, memberNames[0], ok, err)
			}
			if ok, err := c.FairLock(memberNames[1]).IsHeld(held); !ok || err != nil {
				t.Errorf("%s: IsHeld %s = %v, %v; want true", what, memberNames[1], ok, err)
			}
			if n, err := c.RWLock(memberNames[2]).HoldCount(held); n != 1 || err != nil {
				t.Errorf("%s: HoldCount %s = %d, %v; want 1", what, memberNames[2], n, err)
			}
			if err := ml.Unlock(held); err != nil {
				t.Fatalf("%s: Unlock: %v", what, err)
			}
			if got := locked(t, ctx, c); got[0] || got[1] || got[2] {
				t.Fatalf("%s: after Unlock, locked = %v; want none", what, got)
			}
		}
	})
}
