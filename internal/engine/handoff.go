package engine

import (
	"context"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/leases"
	"github.com/relock-go/relock/internal/retry"
)

// Handing the lock on within a client. An Unlock that releases its owner's last hold of a
// kind with a hand call (Plain), while a waiter of the same client is parked on the lock,
// claims that waiter (hub.Claim) and has the hand call sent in place of the release: the
// script releases the hold and makes the waiter the holder in one step, as if the waiter
// had acquired it then (lua/rlock_hand.lua). The waiter's Lock returns holding the lock
// without a wake-up or an attempt of its own; the lock was never free, so no other client
// is woken. A new Lock of the client, meanwhile, joins the waiters that are parked rather
// than trying first (see Lock.lock), so that the lock goes to them in the order they
// parked. A client hands the lock on at most hub.HandRun times in a row, then frees it for
// every client (the wake registry picks the next).
//
// Who sends the hand call: the claimed waiter (pass). The waiter's Lock can return only
// once its goroutine runs, and a goroutine that another one wakes waits for that one's
// processor, or for a thread to wake on another, which takes microseconds. So the releaser
// passes the call to the waiter: the waiter sends it, Redis's reply wakes the waiter first,
// and the releaser's Unlock returns once the waiter has recorded the outcome. The waiter
// holds the lock the soonest it can. The cost: when the waiter's critical section is
// shorter than the releaser's way back to Lock, the waiter's unlock finds nobody of its
// client in line and frees the lock for every client, at a wake-up and an attempt more
// than a handoff; the lock then goes round the clients rather than staying in one.

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
// whose reply was lost; when that look gets no answer, the waiter's next try looks again.
// Like an attempt's, a hold taken after the caller's context ended is released again, and
// take returns the context's error.
func (a *attempt) take(h *handoff) (bool, error) {
	if h.sure {
		a.granted(1, h.token, h.sent)
	} else {
		dctx := a.l.c.Detached(a.ctx)
		ran, _, err := a.ran(dctx, 0, h.sent)
		if err != nil {
			if !retry.Lost(err) {
				return false, err
			}
			// Nobody answered whether the hand call ran: as after an attempt whose reply
			// was lost, the waiter's next try asks first (see try), and a waiter that
			// Redis cannot answer rides that out as any waiter does (retry.Outage).
			a.lost = &lostRequest{err: err, sent: h.sent}
			return false, nil
		}
		if !ran {
			a.late++ // the hand call may still run
			return false, nil
		}
		if err := a.shed(dctx, 1, a.late); err != nil {
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

// passed is a hand call that a releasing Unlock passed to the waiter it claimed, which
// sends it (see run); the Unlock waits on done for its outcome.
type passed struct {
	l     *Lock
	ctx   context.Context // the releaser's call context: see Lock.Unlock
	field string          // the releasing owner's field
	turn  leases.Turn     // the releasing owner's turn on the lock
	to    *hub.Claim
	done  chan error
}

// pass has the claimed waiter to, behind which more of the client's waiters are parked,
// send the hand call for the owner's last hold, and returns its outcome once the waiter
// has recorded it. The waiter's Wait returns at once; it is bound to run the call, as it
// is to act on a handoff whatever else ended its wait.
func (l *Lock) pass(ctx context.Context, field string, turn leases.Turn, to *hub.Claim) error {
	p := &passed{l: l, ctx: ctx, field: field, turn: turn, to: to, done: make(chan error, 1)}
	to.Settle(p, to.Offer().(*attempt).lease)
	return <-p.done
}

// run sends the passed hand call, records the release in the releaser's turn, hands the
// releaser its outcome, and returns what the waiter was handed (nil: certainly nothing).
func (p *passed) run() *handoff {
	released, h, err := p.l.release(p.ctx, p.field, p.turn.Count, p.turn.Deadline, p.to)
	// Before the waiter takes its hold: its owner may be the releaser's.
	p.turn.Record(released != 0, err)
	p.done <- err
	return h
}
