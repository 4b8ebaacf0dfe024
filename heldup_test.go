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
)

// The server stops answering (SIGSTOP) while the client's connection to it is being
// dialled again, with no deadline but the dial timeout (a minute here), as rueidis's own
// refresh dials: a call to the server waits for that dial, whatever its context says. The
// hold's context still ends once its lease has run out: the watchdog's renewal round ends
// by its own deadline. Guards against a round that waits for its call to return, which
// keeps the watchdog from ending the hold for as long as the dial takes.
func TestHoldEndsWhileTheServerIsBeingDialled(t *testing.T) {
	s := redistest.StartServer(t)
	var d redistest.Dials
	b := &redistest.Backend{Name: "redis", Addr: s.Addr(), Server: s}
	rc := b.ClientWith(t, func(o *rueidis.ClientOption) {
		d.Tune(o)
		o.PipelineMultiplex = -1 // one connection, so that the renewals and the dial meet on it
	})
	const lease = 1500 * time.Millisecond
	c := relocktest.On(t, rc, relock.WithWatchdogTimeout(lease))
	held, err := c.Lock("dialled").Lock(redistest.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	d.RedialPaused(t, rc, s) // resumed at the test's cleanup
	select {
	case <-held.Done():
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Errorf("the hold ended with cause %v, want ErrLeaseLost", cause)
		}
	case <-time.After(3 * lease):
		t.Fatalf("the hold's context is live %v after its server fell silent, past its lease of %v", 3*lease, lease)
	}
}
