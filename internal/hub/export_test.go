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
