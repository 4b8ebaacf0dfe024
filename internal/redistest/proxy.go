package redistest

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 between clients and a Redis server, for injecting
// network faults: each accepted connection is relayed to the target on its own upstream
// connection.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	lose  [][]byte // one-shot: requests containing this lose their reply
	holds []*held  // see HoldRequest; fired ones stay listed so that close frees them
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	hole  blackhole // see proxy_faults.go
}

// StartProxy starts a proxy to target, closed at t's cleanup.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the address clients connect to instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// LoseReplyTo arms a one-shot fault: the next request whose bytes contain marker is
// delivered to the server, but its reply is dropped and the client's connection is cut,
// as when a connection breaks after the server ran a command and before its reply arrived.
func (p *Proxy) LoseReplyTo(marker string) {
	p.mu.Lock()
	p.lose = append(p.lose, []byte(marker))
	p.mu.Unlock()
}

// Cut closes every connection through the proxy, as a network failure would; clients
// connect again through it.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Armed reports how many LoseReplyTo faults have not fired yet.
func (p *Proxy) Armed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lose)
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, u) {
			return
		}
		l := &link{c: c, u: u, dropped: make(chan struct{})}
		p.wg.Add(2)
		go p.upstream(l)
		go p.downstream(l)
	}
}

// track registers a connection pair, unless the proxy is closing.
func (p *Proxy) track(c, u net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		c.Close()
		u.Close()
		return false
	}
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	return true
}

// link is one client connection and its upstream connection to the server.
type link struct {
	c, u net.Conn
	// dropping is set when a reply is to be lost: what the server sends from then on is
	// dropped, and dropped is closed at the first of it.
	dropping atomic.Bool
	dropOnce sync.Once
	dropped  chan struct{}
}

// Write relays the server's bytes to the client, or drops them (see dropping).
func (l *link) Write(b []byte) (int, error) {
	if l.dropping.Load() {
		l.dropOnce.Do(func() { close(l.dropped) })
		return len(b), nil
	}
	return l.c.Write(b)
}

// upstream relays client → server and fires armed faults.
func (p *Proxy) upstream(l *link) {
	defer p.wg.Done()
	c, u := l.c, l.u
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.holdIfArmed(buf[:n])
			cut := p.fire(buf[:n])
			p.hole.wait()
			if cut {
				l.dropping.Store(true)
			}
			if _, werr := u.Write(buf[:n]); werr != nil {
				break
			}
			if cut {
				// The server runs the request and answers; the client never gets the
				// answer. Its connection is cut only once the server has answered, so that
				// nothing the client sends next, on a new connection, can reach the server
				// first (a server that serves connections in parallel, as miniredis does,
				// could otherwise run it before this request).
				select {
				case <-l.dropped:
				case <-time.After(5 * time.Second):
				}
				c.Close()
				break
			}
		}
		if err != nil {
			break
		}
	}
	c.Close()
	u.Close()
	p.mu.Lock()
	if p.conns != nil {
		delete(p.conns, c)
		delete(p.conns, u)
	}
	p.mu.Unlock()
}

// downstream relays server → client.
func (p *Proxy) downstream(l *link) {
	defer p.wg.Done()
	c, u := l.c, l.u
	if _, err := io.Copy(gatedConn{l, &p.hole}, u); err != nil && !errors.Is(err, net.ErrClosed) {
		c.Close()
	}
	c.Close()
	u.Close()
}

func (p *Proxy) fire(req []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, m := range p.lose {
		if bytes.Contains(req, m) {
			p.lose = append(p.lose[:i], p.lose[i+1:]...)
			return true
		}
	}
	return false
}

func (p *Proxy) close() {
	p.ln.Close()
	p.hole.shutdown()
	p.mu.Lock()
	for _, h := range p.holds {
		h.free()
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// held is one HoldRequest fault.
type held struct {
	markers [][]byte
	fired   bool // guarded by Proxy.mu
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

func (h *held) free() { h.once.Do(func() { close(h.release) }) }

// HoldRequest arms a one-shot fault: the next request whose bytes contain every marker is
// held at the proxy, not delivered to the server, until release is called (or the proxy
// closes); then it goes on as usual. arrived is closed when that request reaches the
// proxy. Whatever the same client connection sends behind it waits with it; other
// connections are not affected. It makes a race window deterministic: hold a request,
// act while it is held, release it. release is idempotent.
func (p *Proxy) HoldRequest(markers ...string) (arrived <-chan struct{}, release func()) {
	h := &held{arrived: make(chan struct{}), release: make(chan struct{})}
	for _, m := range markers {
		h.markers = append(h.markers, []byte(m))
	}
	p.mu.Lock()
	if p.conns == nil {
		h.free() // closed: nothing will be held
	}
	p.holds = append(p.holds, h)
	p.mu.Unlock()
	return h.arrived, h.free
}

// holdIfArmed blocks while req matches an armed HoldRequest, until it is released.
func (p *Proxy) holdIfArmed(req []byte) {
	p.mu.Lock()
	var h *held
	for _, c := range p.holds {
		if !c.fired && containsAll(req, c.markers) {
			h = c
			h.fired = true
			break
		}
	}
	p.mu.Unlock()
	if h == nil {
		return
	}
	close(h.arrived)
	<-h.release
}

func containsAll(b []byte, subs [][]byte) bool {
	for _, s := range subs {
		if !bytes.Contains(b, s) {
			return false
		}
	}
	return true
}
