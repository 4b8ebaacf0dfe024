package hub

import "strconv"

// Reading is how the waiters of a channel read its messages: one value per kind of
// channel, chosen by the kind's name for it (a lock's channel, a semaphore's, a latch's).
type Reading struct {
	// on handles message msg heard on channel c, named name. h.mu is held.
	on func(h *Hub, name string, c *channel, msg string)
}

var (
	// LockMessages reads a lock's channel: Redisson's unlock message ("0") wakes one
	// waiter, its read-unlock message ("1") every waiter; relock's wake codes and leases
	// come between them (see wake.go). Every other message wakes one waiter.
	LockMessages = Reading{on: (*Hub).onLock}
	// CountMessages reads a semaphore's channel, redisson_sc:{<name>}: a release publishes
	// the permits now available, and as many waiters are woken (Redisson's clients do the
	// same); a message that is not a count above zero wakes nobody.
	CountMessages = Reading{on: (*Hub).onCount}
	// LatchMessages reads a count-down latch's channel: "0", the count reached zero,
	// wakes every waiter; "1", a new count, and anything else, nobody.
	LatchMessages = Reading{on: (*Hub).onLatch}
)

func (h *Hub) onLock(name string, c *channel, msg string) {
	// A wake-up is heard even with nobody subscribed (a lingering channel): the next
	// subscriber must not take the channel for quiet. A wake-up for another client is not
	// one for this client's waiters, nor is a new hold's lease (see QuietSince).
	switch {
	case isCode(msg):
		if msg == h.code {
			c.heard = h.clock.Add(1)
		}
		h.onCode(name, c, msg)
	case isLease(msg):
		h.onLease(c, msg)
	case c.skip > 0:
		c.skip-- // the message of an unlock that woke one client by its code
	case c.refs > 0 && msg == WakeAll:
		c.heard = h.clock.Add(1)
		h.grantAll(c)
	default:
		c.heard = h.clock.Add(1)
		if c.refs > 0 {
			h.grantOne(c)
		}
	}
}

func (h *Hub) onCount(_ string, c *channel, msg string) {
	n, err := strconv.ParseInt(msg, 10, 64)
	if err != nil || n <= 0 {
		return
	}
	c.heard = h.clock.Add(1)
	// grantOne stops giving permits at one per subscriber, so the loop ends by then.
	for ; n > 0 && (len(c.waiters) > 0 || c.permits < c.refs); n-- {
		h.grantOne(c)
	}
}

func (h *Hub) onLatch(_ string, c *channel, msg string) {
	if msg != "0" {
		return
	}
	c.heard = h.clock.Add(1)
	h.grantAll(c)
}
