package hub

import "time"

// SetLinger sets how long h keeps a channel subscribed after its last subscriber leaves,
// for channels released from now on: tests make the linger long to see it kept and short
// to see it end.
func (h *Hub) SetLinger(d time.Duration) {
	h.mu.Lock()
	h.linger = d
	h.mu.Unlock()
}

// RenewalGrace is how late after bound the channel's timer wakes a waiter.
func RenewalGrace(bound time.Duration) time.Duration { return renewalGrace(bound) }
