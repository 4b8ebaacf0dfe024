package leases

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/redistest"
)

// A hold's context that reports its end (Err) tells why at once (context.Cause), also while
// the end is published and the context's own part of it has not run yet, and also when a
// context derived from it before the end made its cause holder. The state between the two is made here by hand: the
// race that reaches it is too narrow to meet on purpose.
func TestCauseAsSoonAsErr(t *testing.T) {
	w := &Watchdog{base: time.Now()}
	h := &Hold{}
	h.due.Store(math.MaxInt64)
	c := &Context{parent: context.Background(), w: w, h: h, e: &h.e}
	if err := context.Cause(c); err != nil {
		t.Fatalf("cause of a live hold's context: %v", err)
	}
	// A derived context, made before the end, makes the context's cause holder.
	d, cancel := context.WithCancel(c)
	defer cancel()
	h.e.over.Store(endingOf(lockerr.ErrLeaseLost)) // published; ended not run
	if err := c.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err after the end: %v", err)
	}
	if err := context.Cause(c); !errors.Is(err, lockerr.ErrLeaseLost) {
		t.Errorf("cause as soon as Err said the hold ended: %v; want ErrLeaseLost", err)
	}
	// The derived context learns it once the end runs.
	c.ended(h.e.over.Load())
	select {
	case <-d.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a context derived from the hold's did not end with it")
	}
	if err := context.Cause(d); !errors.Is(err, lockerr.ErrLeaseLost) {
		t.Errorf("cause of the derived context: %v; want ErrLeaseLost", err)
	}
}

// A re-entry whose context does not derive from the hold's (the owner carried by another
// context) gets a context of its own, which ends when the hold does, with the hold's cause.
func TestReentryOutsideTheHoldEndsWithIt(t *testing.T) {
	rc := redistest.Mini(t).Client(t)
	w := newWatchdog(rc, 30*time.Second, false, nil)
	defer w.Close()
	held := hold(t, w, rc, "joined", "o:1")
	reentry, ok := w.Acquired(new(Context), context.Background(), renewedGrant(w, "joined", "o:1", 2))
	if !ok || reentry.Err() != nil {
		t.Fatalf("re-entry: ok %v, context %v", ok, context.Cause(reentry))
	}
	if reentry == held {
		t.Fatal("a re-entry from a context outside the hold returned the hold's context")
	}
	done := reentry.Done()
	w.Lost("joined", "o:1")
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the re-entry's context did not end within 10s of the hold's loss")
	}
	for what, ctx := range map[string]context.Context{"hold": held, "re-entry": reentry} {
		if cause := context.Cause(ctx); !errors.Is(cause, lockerr.ErrLeaseLost) {
			t.Errorf("the %s's context: cause %v; want ErrLeaseLost", what, cause)
		}
	}
}

// A hold's context ends when the context it was taken with ends: its Done closes, with
// that context's error and cause, although the hold itself goes on.
func TestHoldContextEndsWithItsParent(t *testing.T) {
	rc := redistest.Mini(t).Client(t)
	w := newWatchdog(rc, 30*time.Second, false, nil)
	defer w.Close()
	parent, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	held, ok := w.Acquired(new(Context), parent, renewedGrant(w, "child", "o:1", 1))
	if !ok {
		t.Fatal("the hold was refused")
	}
	done := held.Done()
	stop := errors.New("the caller gave up")
	cancel(stop)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the hold's context did not end within 10s of the context it was taken with")
	}
	if err := held.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err %v; want context.Canceled", err)
	}
	if cause := context.Cause(held); cause != stop {
		t.Errorf("cause %v; want the parent's, %v", cause, stop)
	}
}

// Err of a hold's context says it ended as soon as the context it was taken with has,
// also when nothing asked for its Done (which registers it with that context).
func TestHoldContextErrFollowsItsParentWithoutDone(t *testing.T) {
	rc := redistest.Mini(t).Client(t)
	w := newWatchdog(rc, 30*time.Second, false, nil)
	defer w.Close()
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	held, ok := w.Acquired(new(Context), parent, renewedGrant(w, "child", "o:1", 1))
	if !ok {
		t.Fatal("the hold was refused")
	}
	cancel()
	if err := held.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err after the context the hold was taken with ended: %v; want context.Canceled", err)
	}
}
