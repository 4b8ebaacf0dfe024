package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// A slot moved to another master (MIGRATING/IMPORTING, MIGRATE, SETSLOT ... NODE) while a
// hold of every kind in it is renewed: the plain, fair, spin and read-write locks (both
// sides) and a semaphore's lease. Each renewal script names more keys than the lock's own
// hash (a read-write lock's tag, a semaphore's leases), and a script whose keys are split
// between the two masters, or missing from the one asked, is refused (TRYAGAIN): the holds
// are renewed throughout all the same, their contexts stay live, and after the move each
// is released on the new master, leaving no key. (TestClusterSlotMove moves a plain lock
// with a waiter.)
func TestClusterSlotMoveEveryKind(t *testing.T) {
	cl := redistest.StartCluster(t)
	const lease = 3 * time.Second
	c := relocktest.New(t, cl, relock.WithTimeout(10*time.Second), relock.WithWatchdogTimeout(lease))
	name := cl.NamesOnEveryMaster(t, "kmove-")[0]
	slot := cl.Slot(name)
	from := cl.MasterOf(slot)
	to := cl.Masters()[0]
	if to == from {
		to = cl.Masters()[1]
	}
	ctx := redistest.Context(t, 2*time.Minute)
	tag := "{" + name + "}"
	if ok, err := c.Semaphore(tag+":sem").TrySetPermits(ctx, 2); err != nil || !ok {
		t.Fatal(ok, err)
	}
	type hold struct {
		name    string
		held    context.Context
		release func(context.Context) error
	}
	var holds []hold
	add := func(name string, held context.Context, err error, release func(context.Context) error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		holds = append(holds, hold{name, held, release})
	}
	x, err := c.Lock(tag + ":plain").Lock(ctx)
	add("plain", x, err, c.Lock(tag+":plain").Unlock)
	x, err = c.FairLock(tag + ":fair").Lock(ctx)
	add("fair", x, err, c.FairLock(tag+":fair").Unlock)
	x, err = c.RWLock(tag + ":w").Lock(ctx)
	add("write", x, err, c.RWLock(tag+":w").Unlock)
	x, err = c.RWLock(tag + ":r").RLock(ctx)
	add("read", x, err, c.RWLock(tag+":r").RUnlock)
	x, err = c.Semaphore(tag+":sem").AcquireLease(ctx, 1)
	add("lease", x, err, c.Semaphore(tag+":sem").ReleaseLease)
	x, err = c.SpinLock(tag + ":spin").Lock(ctx)
	add("spin", x, err, c.SpinLock(tag+":spin").Unlock)
	check := func(stage string) {
		t.Helper()
		for _, h := range holds {
			if h.held.Err() != nil {
				t.Fatalf("%s: the %s hold's context ended: %v", stage, h.name, context.Cause(h.held))
			}
		}
	}
	// A lease's wait at each step: the renewals, every third of it, meet the open slot on
	// the old master, then are redirected (ASK) to the new one, then go there.
	move := cl.StartSlotMove(t, slot, to)
	time.Sleep(lease)
	check("slot open")
	move.MigrateKeys(t)
	time.Sleep(lease)
	check("keys migrated")
	move.Finish(t)
	time.Sleep(lease)
	check("slot moved")
	for _, h := range holds {
		if err := h.release(h.held); err != nil {
			t.Errorf("release of the %s hold after the move: %v", h.name, err)
		}
	}
	for _, m := range []*redistest.Server{from, to} {
		left, err := m.Do(t, "KEYS", "*"+name+"*").AsStrSlice()
		if want := map[bool]int{true: 1}[m == to]; err != nil || len(left) != want { // the semaphore's count
			t.Errorf("keys left on %s after the releases: %q, %v; want the semaphore's count only, on the new master", m.Addr(), left, err)
		}
	}
}
