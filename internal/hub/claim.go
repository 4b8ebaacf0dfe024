package hub

import (
	"slices"
	"time"
)

// Handing a lock to a waiter of the same client. A release that frees a lock while a
// waiter of its own client is parked on the lock's channel can give the lock to that waiter
// in the same script call (lua/rlock_hand.lua): the waiter holds it without a wake-up or an
// attempt of its own, and no other client is woken for a lock that was never free. The
// hub keeps the line of parked waiters, so it is where a release claims one.
//
// A client hands its lock on at most HandRun times in a row; the release after that frees
// the lock as any release does, and the wake registry picks the next client (lua/wake.lua).
// So a client with many waiters takes the lock a run of turns at a time, and the other
// clients' waiters, and Redisson's, still get it.

// HandRun is the most handoffs in a row on one channel of a client, before a release frees
// the lock for every client.
const HandRun = 3

// Offer sets what this subscriber's waits offer to a Claim: a value that tells the claimer
// how to hand the waiter the lock (the engine's attempt). nil, the default, offers nothing:
// the subscriber is never claimed.
func (s *Sub) Offer(v any) {
	s.h.mu.Lock()
	s.offer = v
	s.h.mu.Unlock()
}

// Handed returns what the last Wait that returned nil was handed by a Claim (see Settle),
// nil when that wait was woken otherwise.
func (s *Sub) Handed() any { return s.handed }

// Lined reports whether this client has subscribers on the channel: waiters of the lock,
// parked or between attempts. A new waiter of a lock whose releases are handed on joins
// them rather than trying first: its attempt would take the lock from under the waiter
// that was woken for it, or fail while a handoff is on its way.
func (h *Hub) Lined(name string) bool {
	if h.Idle() {
		return false // an uncontended lock's path: no mutex
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chans[name]
	return c != nil && c.refs > 0
}

// Claim is a parked waiter that a release is about to hand the lock to. The claimer must
// Settle it.
type Claim struct {
	h *Hub
	c *channel
	w *waiter
}

// Claim takes the longest-parked waiter of class on channel name that made an offer out of
// the line, so that no wake-up goes to it meanwhile, and returns it; nil when there is
// none, or when the channel's waiters have had HandRun handoffs in a row (the run then
// starts again).
func (h *Hub) Claim(name string, class any) *Claim {
	if h.Idle() {
		return nil // an uncontended lock's path: no mutex
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chans[name]
	if c == nil {
		return nil
	}
	i := slices.IndexFunc(c.waiters, func(w *waiter) bool { return w.class == class && w.offer != nil })
	if i < 0 {
		return nil
	}
	if c.run >= HandRun {
		c.run = 0
		return nil
	}
	c.run++
	w := c.waiters[i]
	c.waiters = slices.Delete(c.waiters, i, i+1)
	w.claimed = true
	return &Claim{h: h, c: c, w: w}
}

// Offer returns what the claimed waiter offered.
func (cl *Claim) Offer() any { return cl.w.offer }

// Settle ends the claim. With v not nil the waiter was handed the lock, or may have been
// (v says which): its Wait returns nil, and Handed returns v, even if its context has
// ended meanwhile. The waiters still parked were told how long to sleep by attempts made
// while the previous holder held the lock: the channel's timer is set for the new hold's
// lease, as Took does. With v nil the release did not hand it the lock: it is woken to try,
// as by a message.
//
// v may also be the means of the handoff rather than its outcome (the engine passes the
// hand call itself to the waiter, which sends it): the waiter learns from it whether it
// was handed the lock, and calls Owe when it was not.
func (cl *Claim) Settle(v any, lease time.Duration) {
	h, c, w := cl.h, cl.c, cl.w
	h.mu.Lock()
	defer h.mu.Unlock()
	w.claimed, w.granted, w.handed = false, true, v
	w.s.owes = v == nil
	if v != nil && slices.ContainsFunc(c.waiters, func(w *waiter) bool { return w.shared }) {
		h.arm(c, lease)
	}
	close(w.ch)
}

// Owe says that what the last Wait was handed by a Claim turned out not to be the lock: the
// subscriber holds a wake-up after all, as if Settle had been given nil, and must try, Wait
// again, call Took, or Release, which passes it on.
func (s *Sub) Owe() {
	s.h.mu.Lock()
	s.owes = true
	s.h.mu.Unlock()
}
