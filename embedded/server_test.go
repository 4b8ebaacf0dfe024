package embedded_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/embedded"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
)

// The in-process Redis listens on loopback only (Start: "a free 127.0.0.1 port"; Addr:
// "host:port on 127.0.0.1"): a demo must not open a port to the network.
func TestStartListensOnLoopback(t *testing.T) {
	s, err := embedded.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	host, _, err := net.SplitHostPort(s.Addr())
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("Addr() = %q (%v); want host:port on 127.0.0.1", s.Addr(), err)
	}
}

// Leases run out by themselves on the in-process Redis, as on a real server: a hold taken
// WithLease and never unlocked frees the lock for another client once its lease has run
// out (rlock.WithLease), and the hold's context ends with ErrLeaseLost.
func TestLeaseRunsOutByItself(t *testing.T) {
	s, err := embedded.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := s.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx := redistest.Context(t, time.Minute)
	held, err := s.Client().Lock("embedded:lease").Lock(ctx, rlock.WithLease(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	redistest.Recv(t, held.Done(), 20*time.Second, "the hold's context ends at its lease")
	if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
		t.Errorf("the hold's context ended with %v, want ErrLeaseLost", cause)
	}
	var got error
	redistest.Eventually(t, 20*time.Second, "another client gets the lock once the lease ran out", func() bool {
		h, err := other.Lock("embedded:lease").TryLock(ctx)
		if got = err; err == nil {
			_ = other.Lock("embedded:lease").Unlock(h)
		}
		return err == nil || !errors.Is(err, relock.ErrLocked)
	})
	if got != nil {
		t.Fatalf("TryLock after the lease ran out: %v", got)
	}
}

// A client NewClient made is closed with the Server (NewClient: "It is closed with the
// Server"): after Close its calls fail with ErrClosed, as the Server's own client's do,
// rather than reaching for a Redis that is gone.
func TestCloseClosesNewClients(t *testing.T) {
	s, err := embedded.Start()
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	ctx := redistest.Context(t, 10*time.Second)
	for what, c := range map[string]*relock.Client{"Client()": s.Client(), "NewClient()": other} {
		if _, err := c.Lock("embedded:closed").TryLock(ctx); !errors.Is(err, relock.ErrClosed) {
			t.Errorf("%s's TryLock after the Server's Close: %v; want ErrClosed", what, err)
		}
	}
}
