package leases

import (
	"context"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
)

// A call that waited for another's turn on a hold that then ended (released, or lost)
// gets the turn of an owner of which the client knows no hold: its Count is 0, not the
// count of the hold that is gone.
func TestTurnAfterTheHoldEndedKnowsNoHold(t *testing.T) {
	rc := redistest.Mini(t).Client(t)
	w := newWatchdog(rc, 30*time.Second, false, nil)
	defer w.Close()
	hold(t, w, rc, "a", "o:1")
	first := w.Begin("a", "o:1")
	if first.Count != 1 {
		t.Fatalf("the first turn knows %d holds; want 1", first.Count)
	}
	got := make(chan Turn, 1)
	go func() { got <- w.Begin("a", "o:1") }()
	time.Sleep(50 * time.Millisecond) // the second call waits for the first's turn
	first.Released()
	first.End()
	select {
	case second := <-got:
		if second.Count != 0 {
			t.Errorf("the turn taken after the hold was released knows %d holds; want 0", second.Count)
		}
		second.End()
	case <-time.After(10 * time.Second):
		t.Fatal("the second turn was not given within 10s of the first's end")
	}
}

// A call whose hold ended during its turn (a renewal round found it gone) and that then
// reports how its release went leaves the hold the owner took meanwhile either renewed or
// ended: never a hold whose context is live while the watchdog has let go of it.
func TestTurnOfAnEndedHoldLeavesNoLiveHoldUnrenewed(t *testing.T) {
	rc := redistest.Mini(t).Client(t)
	w := newWatchdog(rc, 30*time.Second, false, nil)
	defer w.Close()
	hold(t, w, rc, "a", "o:1")
	turn := w.Begin("a", "o:1")
	w.Lost("a", "o:1") // as a renewal round that found it gone
	// The owner takes the lock again, in a turn of its own, while the first call's is on.
	again := w.Begin("a", "o:1")
	next, ok := w.Acquired(new(Context), context.Background(), renewedGrant(w, "a", "o:1", 1))
	again.End()
	if !ok {
		t.Fatal("the new hold was refused")
	}
	turn.Released() // the first call's release ran on the owner's field
	turn.End()
	if next.Err() == nil && !w.Holds("a", "o:1") {
		t.Error("the new hold's context is live, but the watchdog no longer knows the hold: nothing renews it or ends it")
	}
}
