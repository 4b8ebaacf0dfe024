package engine

import (
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/hub"
)

// Handing the lock on within a client. An Unlock that releases its owner's last hold of a
// kind with a hand call (Plain), while a waiter of the same client is parked on the lock,
// claims that waiter (hub.Claim) and sends the hand call in place of the release: the
// script releases the hold and makes the waiter the holder in one step, as if the waiter
// had acquired it then (lua/rlock_hand.lua). The waiter's Lock returns holding the lock
// without a wake-up or an attempt of its own; the lock was never free, so no other client
// is woken. A new Lock of the client, meanwhile, joins the waiters that are parked rather
// than trying first (see Lock.lock), so that the lock goes to them in the order they
// parked. A client hands the lock on at most hub.HandRun times in a row, then frees it for
// every client (the wake registry picks the next).

// handoff is what a claimed waiter is handed: the lock for sure (sure), or perhaps, when
// the hand call's reply was lost and the release then found done (the waiter looks).
type handoff struct {
	sent  time.Time // when the call that may have handed it was first sent
	token int64     // the fencing token, when sure
	sure  bool
}

// handed reads a hand call's reply {1, token}: the lock was released and handed.
func handed(r rueidis.RedisResult) (token int64, ok bool) {
	arr, err := r.ToArray()
	if err != nil || len(arr) != 2 {
		return 0, false
	}
	token, err = arr[1].AsInt64()
	return token, err == nil
}

// take makes the waiter's attempt the holder of the lock it was handed, and reports
// whether it was: a handoff that is not sure is looked up in Redis first, as an attempt
// whose reply was lost. Like an attempt's, a hold taken after the caller's context ended
// is released again, and take returns the context's error.
func (a *attempt) take(h *handoff) (bool, error) {
	if h.sure {
		a.granted(1, h.token, h.sent)
	} else {
		ran, _, err := a.ran(a.l.c.Detached(a.ctx), 0, h.sent)
		if err != nil || !ran {
			return false, err
		}
	}
	return true, a.keep()
}

// hands reports whether the lock's releases may be handed on: its kind has a hand call,
// and acquisitions need no replica's confirmation (WithSyncReplicas), which the hand call
// does not wait for.
func (l *Lock) hands() bool { return l.kind.hand != nil && l.c.SyncReplicas == 0 }

// holds reports whether the attempt's owner holds the lock already, as the client knows:
// its Lock is a re-entry, which never waits. An owner made for the call holds nothing.
func (a *attempt) holds() bool {
	return a.carried != nil && a.l.c.Watchdog.Holds(a.l.n.Lock, a.owner)
}

// settle ends a claim once the release it was made for is done: the waiter was handed the
// lock (h not nil), or is woken to try.
func settle(to *hub.Claim, h *handoff) {
	if h == nil {
		to.Settle(nil, 0)
		return
	}
	to.Settle(h, to.Offer().(*attempt).lease)
}
