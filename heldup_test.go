package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// The server stops answering (SIGSTOP) while the client's connection to it is being
// dialled again, with no deadline but the dial timeout (a minute here), as rueidis's own
// refresh dials: a call to the server waits for that dial, whatever its context says. The
// hold's context still ends once its lease has run out: the watchdog's renewal round ends
// by its own deadline. Guards against a round that waits for its call to return, which
// keeps the watchdog from ending the hold for as long as the dial takes.
func TestHoldEndsWhileTheServerIsBeingDialled(t *testing.T) {
	s, d, rc, c := dialledServer(t)
	held, err := c.Lock("dialled").Lock(redistest.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	d.RedialPaused(t, rc, s) // resumed at the test's cleanup
	endsByItsLease(t, held, "")
}

// dialledLease is the lease of the holds of dialledServer's client.
const dialledLease = 1500 * time.Millisecond

// dialledServer starts a server, a rueidis client on it whose dials d records (see
// redistest.Dials) and which has one connection, so that every call and a dial meet on
// it, and a relock client on that whose holds have a lease of dialledLease.
func dialledServer(t *testing.T) (*redistest.Server, *redistest.Dials, rueidis.Client, *relock.Client) {
	t.Helper()
	s := redistest.StartServer(t)
	d := new(redistest.Dials)
	b := &redistest.Backend{Name: "redis", Addr: s.Addr(), Server: s}
	rc := b.ClientWith(t, func(o *rueidis.ClientOption) {
		d.Tune(o)
		o.PipelineMultiplex = -1
	})
	return s, d, rc, relocktest.On(t, rc, relock.WithWatchdogTimeout(dialledLease))
}

// endsByItsLease fails t unless held, a hold of dialledServer's client whose server fell
// silent, ends with ErrLeaseLost within 3 leases; during says what was under way.
func endsByItsLease(t *testing.T, held context.Context, during string) {
	t.Helper()
	select {
	case <-held.Done():
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Errorf("the hold ended with cause %v, want ErrLeaseLost", cause)
		}
	case <-time.After(3 * dialledLease):
		t.Fatalf("the hold's context is live %v after its server fell silent%s, past its lease of %v", 3*dialledLease, during, dialledLease)
	}
}

// The holder's own Unlock, or Extend, is under way when the server stops answering and the
// client's connection to it is being dialled again (as in
// TestHoldEndsWhileTheServerIsBeingDialled): the call waits for that dial, but the hold's
// context ends once its lease has run out, as Redis may let another owner in then; once
// the server answers again, the call returns. Guards
// against a hold whose release is under way being left to that release, or an extension
// counted before Redis has it, either of which keeps the context live for as long as the
// dial takes.
func TestHoldEndsWhileItsCallWaitsForTheDial(t *testing.T) {
	for _, call := range []struct {
		name string
		do   func(mu *rlock.Mutex, held context.Context) error
	}{
		{"Unlock", func(mu *rlock.Mutex, held context.Context) error { return mu.Unlock(held) }},
		{"Extend", func(mu *rlock.Mutex, held context.Context) error { return mu.Extend(held, time.Minute) }},
	} {
		t.Run(call.name, func(t *testing.T) {
			s, d, rc, c := dialledServer(t)
			mu := c.Lock("calling")
			held, err := mu.Lock(redistest.Context(t, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			resume := d.RedialPaused(t, rc, s)
			returned := make(chan error, 1)
			go func() { returned <- call.do(mu, held) }()
			endsByItsLease(t, held, " during its "+call.name) // resumed at the test's cleanup, if it fails
			resume()
			// Either answer is right: the lease may or may not have run out in Redis when
			// the call reaches it.
			t.Logf("%s: %v", call.name, redistest.Recv(t, returned, 30*time.Second, "the call once the server answers again"))
		})
	}
}
