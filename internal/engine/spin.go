package engine

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/retry"
	"github.com/relock-go/relock/internal/script"
	"github.com/relock-go/relock/observe"
)

// Spin is Redisson's RSpinLock: an RLock's data, whose waiters subscribe to nothing and
// try again after a back-off that doubles, for deployments where pub/sub is unwanted. Its
// unlock publishes nothing, as Redisson's does; it never registers a client to be woken.
var Spin = &layout{
	name:   "spinlock",
	hash:   rlockHash,
	fenced: true,
	spins:  true,
	field:  self,
	acquire: func(l *Lock, a *attempt) call {
		return l.fence(a, newCall(script.RLockAcquire(), []string{l.n.Lock, l.n.Wake}, []string{a.leaseMs, a.who, "", "", l.n.Channel, l.c.Publish}))
	},
	channel: func(l *Lock, _ string) string { return l.n.Channel },
	release: func(l *Lock, field, expected string) call {
		return newCall(script.RLockUnlock(), []string{l.n.Lock, l.n.Channel, l.n.Wake}, []string{"", field, expected, l.c.Publish})
	},
	force: func(l *Lock) call {
		return newCall(script.RLockForceUnlock(), []string{l.n.Lock, l.n.Channel}, []string{hub.WakeOne, l.c.Publish, rlockHash.shape})
	},
}

// backOff returns the back-off after next: twice next and a random part of up to half of
// it, at most most. A back-off beyond a third of the longest duration would overflow
// doubled; it is beyond any wait already, and becomes most.
func backOff(next, most time.Duration) time.Duration {
	if next > math.MaxInt64/3 {
		return most
	}
	return min(2*next+time.Duration(rand.Int64N(int64(next/2)+1)), most)
}

// spinFor tries again and again until the lock is acquired, ctx ends or the client closes
// (ErrClosed), sleeping between tries for a back-off that starts at the settings' first
// one and doubles, with a random part so that waiters that started together drift apart,
// up to their most; never longer than the holder's remaining lease as the last try saw
// it. A try that gets no answer ends the wait only once such failures have lasted longer
// than a lease (retry.Outage), as a subscribed waiter's does.
func (a *attempt) spinFor(ctx context.Context, ttl time.Duration) error {
	first, most := a.s.SpinBackOff()
	next := first
	var outage retry.Outage
	for {
		sleep := min(next, max(ttl, time.Millisecond))
		next = backOff(next, most)
		t := time.NewTimer(sleep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-a.l.c.Closing():
			t.Stop()
		}
		if a.l.c.Closed() {
			// Close ends every waiter, as the hub ends the subscribed ones; a try would
			// take a hold that only its release would follow.
			return lockerr.ErrClosed
		}
		var err error
		if ttl, err = a.tryWaiting(ctx, &outage); err != nil {
			return err
		}
		if ttl == 0 {
			a.woken = observe.ByBackOff
			return nil
		}
	}
}
