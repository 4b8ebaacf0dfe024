package relock_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// The server stops answering (SIGSTOP) while the client's connection to it is being
// dialled again, with no deadline but the dial timeout (a minute here), as rueidis's own
// refresh dials: a call to the server waits for that dial, whatever its context says. The
// hold's context still ends once its lease has run out: the watchdog's renewal round ends
// by its own deadline. Guards against a round that waits for its call to return, which
// keeps the watchdog from ending the hold for as long as the dial takes.
func TestHoldEndsWhileTheServerIsBeingDialled(t *testing.T) {
	s := redistest.StartServer(t)
	var d dials
	b := &redistest.Backend{Name: "redis", Addr: s.Addr(), Server: s}
	rc := b.ClientWith(t, func(o *rueidis.ClientOption) {
		d.tune(o)
		o.PipelineMultiplex = -1 // one connection, so that the renewals and the dial meet on it
	})
	const lease = 1500 * time.Millisecond
	c := relocktest.On(t, rc, relock.WithWatchdogTimeout(lease))
	held, err := c.Lock("dialled").Lock(redistest.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	resume := d.redialPaused(t, rc, s)
	defer resume()
	select {
	case <-held.Done():
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Errorf("the hold ended with cause %v, want ErrLeaseLost", cause)
		}
	case <-time.After(3 * lease):
		t.Fatalf("the hold's context is live %v after its server fell silent, past its lease of %v", 3*lease, lease)
	}
}

// dials records the connections a rueidis client dials, by address, so that a test can
// cut them.
type dials struct {
	mu    sync.Mutex
	conns map[string][]net.Conn
}

// tune has the client's dials recorded by d, and gives them a minute to time out.
func (d *dials) tune(o *rueidis.ClientOption) {
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

func (d *dials) dialled(addr string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns[addr])
}

// redialPaused pauses s, cuts the connections rc (a client tuned by d) has to it, and has
// a call with no deadline dial it again, as rueidis's own cluster refresh does within a
// second of a connection failing. The dial's handshake waits for s, which answers once
// resume has run (at most a minute later, when the dial times out). resume runs once,
// and waits for that call.
func (d *dials) redialPaused(t *testing.T, rc rueidis.Client, s *redistest.Server) (resume func()) {
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
	redistest.Eventually(t, 10*time.Second, "a new dial of "+addr, func() bool {
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
