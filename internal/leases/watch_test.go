package leases

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/owner"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/script"
)

// A hold released within watchDelay costs no watch: its owner is never reported gone,
// though nothing can name it any more. A hold that is not released is watched once it is
// that old, and found abandoned when nothing names its owner.
func TestShortHoldIsNotWatched(t *testing.T) {
	b := redistest.Mini(t)
	rc := b.Client(t)
	is := owner.NewIssuer("watch-test")
	var mu sync.Mutex
	reported := map[string]bool{}
	w := newWatchdog(rc, time.Minute, false, is)
	defer w.Close()
	is.OnGone(func(o string) {
		mu.Lock()
		reported[o] = true
		mu.Unlock()
		w.Abandon(o)
	})
	// take registers a hold of a new owner, as a Lock with a context that carries none does,
	// and drops its context at once: until it is watched, the table keeps it. The grant
	// never reaches Redis, which the test does not need.
	take := func(name string) string {
		who, carried, fresh := is.Own(context.Background())
		if _, ok := w.Acquired(new(Context), context.Background(), Grant{Name: name, Owner: who, Count: 1, Sent: time.Now(),
			Lease: w.lease, Renew: true, Renewal: script.RLockRenew(), Who: who, Carried: carried, Fresh: fresh}); !ok {
			t.Fatal("the watchdog refused a hold")
		}
		return who
	}
	short := take("short")
	w.Released("short", short)
	long := take("long")

	deadline := time.Now().Add(10 * time.Second)
	for w.Stats().Abandoned == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a hold whose context was dropped at once was not abandoned within 10s: %+v", w.Stats())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	// The cleanups of one collection run one after another: give the short hold's, had it
	// one, a few more collections to run.
	for range 5 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reported[long] {
		t.Errorf("the long hold's owner %s was abandoned without its issuer hearing of it", long)
	}
	if reported[short] {
		t.Errorf("the owner %s of a hold released at once was watched: its issuer heard it was gone", short)
	}
}
