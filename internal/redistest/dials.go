package redistest

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Dials records the connections a rueidis client dials, by address, so that a test can
// cut them.
type Dials struct {
	mu    sync.Mutex
	conns map[string][]net.Conn
}

// Tune has the client's dials recorded by d, and gives them a minute to time out.
func (d *Dials) Tune(o *rueidis.ClientOption) {
	o.Dialer.Timeout = time.Minute
	o.DialCtxFn = func(ctx context.Context, addr string, dialer *net.Dialer, _ *tls.Config) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, "tcp", addr)
		if err == nil {
			d.mu.Lock()
			if d.conns == nil {
				d.conns = make(map[string][]net.Conn)
			}
			d.conns[addr] = append(d.conns[addr], c)
			d.mu.Unlock()
		}
		return c, err
	}
}

func (d *Dials) dialled(addr string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns[addr])
}

// RedialPaused pauses s, cuts the connections rc (a client tuned by d) has to it, and has
// a call with no deadline dial it again, as rueidis's own cluster refresh does within a
// second of a connection failing. The dial's handshake waits for s, which answers once
// resume has run (at most a minute later, when the dial times out). resume runs once,
// at t's cleanup if not before, and waits for that call.
func (d *Dials) RedialPaused(t testing.TB, rc rueidis.Client, s *Server) (resume func()) {
	t.Helper()
	addr := s.Addr()
	node := rc.Nodes()[addr]
	if node == nil {
		t.Fatalf("the client has no connection to %s", addr)
	}
	s.Pause(t)
	d.mu.Lock()
	before := len(d.conns[addr])
	for _, c := range d.conns[addr] {
		c.Close()
	}
	d.mu.Unlock()
	// The first call after the cut meets the closed connection, or dials in its own time;
	// the next dials with no deadline of its own.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_ = node.Do(ctx, node.B().Ping().Build()).Error()
	cancel()
	pinged := make(chan error, 1)
	go func() { pinged <- node.Do(context.Background(), node.B().Ping().Build()).Error() }()
	var once sync.Once
	resume = func() {
		once.Do(func() {
			s.Resume(t)
			select {
			case <-pinged:
			case <-time.After(30 * time.Second):
				t.Errorf("a PING to %s did not return within 30s of its resuming", addr)
			}
		})
	}
	t.Cleanup(resume)
	Eventually(t, 10*time.Second, "a new dial of "+addr, func() bool {
		if d.dialled(addr) > before {
			return true
		}
		select {
		case err := <-pinged: // the PING met the closed connection: dial again
			t.Logf("PING to %s: %v; again", addr, err)
			go func() { pinged <- node.Do(context.Background(), node.B().Ping().Build()).Error() }()
		default:
		}
		return false
	})
	return resume
}
