package hub

import "slices"

// Waiters of one owner. Goroutines that share an owner may wait for a lock at once; once
// one of them gets it, the others may re-enter its hold at once instead of sleeping until
// the hold ends (its unlock, or the channel's timer at its lease). The acquisition tells
// the hub (Joined), which wakes the owner's parked waiters, and marks those between
// attempts so that their next wait returns at once. The wake-up is the waiter's own: it
// owes it to nobody, and passes nothing on when it leaves.

// Own says whose waits the subscriber's are: owner, an owner of this client. A subscriber
// that never calls it is woken by Joined for nobody.
func (s *Sub) Own(owner string) {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.released || s.owner != "" {
		return
	}
	s.owner = owner
	s.c.owned = append(s.c.owned, s)
}

// Joined tells the hub that owner has just taken the lock whose channel is name: its
// subscribers on it, parked or between attempts, try again at once, since they may
// re-enter its hold.
func (h *Hub) Joined(name, owner string) {
	if h.Idle() {
		return // no waiter at all: nothing to look up
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chans[name]
	if c == nil {
		return
	}
	for _, s := range c.owned {
		if s.owner != owner {
			continue
		}
		if i := slices.IndexFunc(c.waiters, func(w *waiter) bool { return w.s == s }); i >= 0 {
			w := c.waiters[i]
			c.waiters = slices.Delete(c.waiters, i, i+1)
			w.granted, w.joined = true, true
			close(w.ch)
			continue
		}
		s.joined = true
	}
}

// disown takes s out of its channel's owned subscribers. h.mu must be held.
func (s *Sub) disown() {
	c := s.c
	if i := slices.Index(c.owned, s); i >= 0 {
		c.owned = slices.Delete(c.owned, i, i+1)
	}
}

// Leave is Release for a waiter that gives up: it reports whether subscribers of its owner
// (see Own) still hold the channel, in which case a queue entry the owner keeps for them
// must stay (a fair waiter's, a preferred writer's).
func (s *Sub) Leave() (others bool) {
	h := s.h
	h.mu.Lock()
	if !s.released && s.owner != "" {
		others = slices.ContainsFunc(s.c.owned, func(o *Sub) bool { return o != s && o.owner == s.owner })
	}
	h.mu.Unlock()
	s.Release()
	return others
}
