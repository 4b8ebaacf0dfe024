package leases

import (
	"context"
	"fmt"
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
	wt := newWatchTest(t)
	short, _ := wt.take(context.Background(), "short")
	wt.w.Released("short", short)
	long, _ := wt.take(context.Background(), "long")

	wt.abandoned(1)
	// The cleanups of one collection run one after another: give the short hold's, had it
	// one, a few more collections to run.
	for range 5 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if !wt.reported(long) {
		t.Errorf("the long hold's owner %s was abandoned without its issuer hearing of it", long)
	}
	if wt.reported(short) {
		t.Errorf("the owner %s of a hold released at once was watched: its issuer heard it was gone", short)
	}
}

// A hold released at once whose context took another hold stays its owner's anchor: it is
// watched, and the other hold is abandoned when nothing names the owner any more.
func TestOwnerOfReleasedHoldStaysWatched(t *testing.T) {
	wt := newWatchTest(t)
	func() {
		who, held := wt.take(context.Background(), "first")
		wt.take(held, "second")
		wt.w.Released("first", who)
	}()
	wt.abandoned(1)
	if st := wt.w.Stats(); st.Holds != 0 {
		t.Errorf("%d holds left; want the second one abandoned", st.Holds)
	}
}

// watchTest is a watchdog whose issuer records the owners it hears are gone.
type watchTest struct {
	t    *testing.T
	w    *Watchdog
	is   *owner.Issuer
	mu   sync.Mutex
	gone map[string]bool
}

func newWatchTest(t *testing.T) *watchTest {
	rc := redistest.Mini(t).Client(t)
	wt := &watchTest{t: t, is: owner.NewIssuer("watch-test"), gone: map[string]bool{}}
	wt.w = newWatchdog(rc, time.Minute, false, wt.is)
	t.Cleanup(wt.w.Close)
	wt.is.OnGone(func(o string) {
		wt.mu.Lock()
		wt.gone[o] = true
		wt.mu.Unlock()
		wt.w.Abandon(o)
	})
	return wt
}

// take registers a hold of name for the owner ctx carries (a new one if none), as a Lock
// does, and returns the owner and the hold's context. A caller may drop the context at
// once: until it is watched, the table keeps it. The grant never reaches Redis, which the
// test does not need.
func (wt *watchTest) take(ctx context.Context, name string) (string, context.Context) {
	wt.t.Helper()
	who, carried, fresh := wt.is.Own(ctx)
	hctx, ok := wt.w.Acquired(new(Context), ctx, Grant{Name: name, Owner: who, Count: 1, Sent: time.Now(),
		Lease: wt.w.lease, Renew: true, Renewal: script.RLockRenew(), Who: who, Carried: carried, Fresh: fresh})
	if !ok {
		wt.t.Fatal("the watchdog refused a hold")
	}
	return who, hctx
}

// abandoned collects garbage until the watchdog has abandoned n holds, at most 10s.
func (wt *watchTest) abandoned(n uint64) {
	wt.t.Helper()
	redistest.Eventually(wt.t, 10*time.Second, fmt.Sprintf("fewer than %d holds abandoned after their contexts were dropped", n), func() bool {
		runtime.GC()
		return wt.w.Stats().Abandoned >= n
	})
}

// reported tells whether the issuer heard that owner is gone.
func (wt *watchTest) reported(owner string) bool {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	return wt.gone[owner]
}
