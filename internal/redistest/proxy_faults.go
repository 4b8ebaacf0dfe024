package redistest

import (
	"io"
	"sync"
)

// blackhole is the Proxy's "stop relaying" switch. While it is on, bytes read from
// either side are held, not forwarded, and no connection is closed: to both ends the
// peer just stops answering, as in a network partition that drops packets silently.
type blackhole struct {
	mu     sync.Mutex
	on     bool
	closed bool
	open   chan struct{} // closed when the switch goes off (or the proxy closes)
}

// Blackhole stops relaying in both directions on every connection through the proxy,
// current and new, without closing any: requests and replies are held until Unblackhole.
// New connections are still accepted (and then held). A connection that one end closes
// is still closed at the other: only data is held. It is idempotent.
func (p *Proxy) Blackhole() {
	b := &p.hole
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.on || b.closed {
		return
	}
	b.on = true
	b.open = make(chan struct{})
}

// Unblackhole resumes relaying; bytes held while the proxy was blackholed are delivered.
// It is idempotent.
func (p *Proxy) Unblackhole() {
	b := &p.hole
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.on {
		return
	}
	b.on = false
	close(b.open)
}

// Blackholed reports whether the proxy is blackholed.
func (p *Proxy) Blackholed() bool {
	b := &p.hole
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.on
}

// wait blocks while the switch is on, and returns at once after shutdown.
func (b *blackhole) wait() {
	b.mu.Lock()
	if !b.on {
		b.mu.Unlock()
		return
	}
	ch := b.open
	b.mu.Unlock()
	<-ch
}

// shutdown releases every relay held by the switch, for good: the proxy is closing.
func (b *blackhole) shutdown() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.on {
		b.on = false
		close(b.open)
	}
}

// gatedConn is the client side of a relay: writes to it wait while the proxy is
// blackholed.
type gatedConn struct {
	w io.Writer
	b *blackhole
}

func (g gatedConn) Write(p []byte) (int, error) {
	g.b.wait()
	return g.w.Write(p)
}
