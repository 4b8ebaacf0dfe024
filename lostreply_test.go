package relock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// A lock or unlock whose reply was lost counts once (README, "Safe to retry"), for every
// kind beside the plain lock (rlock.TestAcquireReplyLost and rlock.TestUnlockReplyLost
// hold it for that one): the fair lock, the spin lock, and a read-write lock's write and
// read holds, whose hold counts live in other fields and whose scripts are their own.
// Each request here runs and only its reply is lost: a first-level Lock and a re-entry
// each count one hold, the unlock of the re-entry leaves the first, the last unlock frees
// the lock and reports success, and a third unlock finds nothing.
//
// Guards against a kind whose lost acquisition is taken for one that did not run (its
// hold count read from another field) and sent again, counting a hold that the owner's
// unlocks never release, and against an unlock resent without its comparison.
func TestLostRepliesCountOnceEveryKind(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		proxy := redistest.StartProxy(t, b.Addr)
		c := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()})
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		for _, k := range []holdKind{kindFair, kindSpin, kindWrite, kindRead} {
			t.Run(k.name, func(t *testing.T) {
				name := "lost-replies:" + k.name
				// The scripts loaded first, so that the faults hit the calls themselves.
				warm, err := k.lock(c, ctx, "warm-up:"+k.name, 0)
				if err != nil {
					t.Fatal(err)
				}
				if err := k.unlock(c, warm, "warm-up:"+k.name); err != nil {
					t.Fatal(err)
				}
				lose := func(what string) {
					t.Helper()
					if proxy.Armed() != 0 {
						t.Fatalf("%s: the fault never fired: the test proved nothing", what)
					}
				}

				proxy.LoseReplyTo(name)
				held, err := k.lock(c, ctx, name, 0)
				lose("Lock")
				if err != nil {
					t.Fatalf("Lock with its reply lost: %v", err)
				}
				if n, err := k.count(c, held, name); n != 1 || err != nil {
					t.Fatalf("hold count %d (%v) after one Lock; want 1", n, err)
				}

				proxy.LoseReplyTo(name)
				if held, err = k.lock(c, held, name, 0); err != nil {
					t.Fatalf("re-entry with its reply lost: %v", err)
				}
				lose("re-entry")
				if n, err := k.count(c, held, name); n != 2 || err != nil {
					t.Fatalf("hold count %d (%v) after two Locks; want 2", n, err)
				}

				proxy.LoseReplyTo(name)
				if err := k.unlock(c, held, name); err != nil {
					t.Fatalf("Unlock with its reply lost: %v", err)
				}
				lose("Unlock")
				if n, err := k.count(c, held, name); n != 1 || err != nil {
					t.Fatalf("hold count %d (%v) after one of two holds was released; want 1", n, err)
				}

				proxy.LoseReplyTo(name)
				if err := k.unlock(c, held, name); err != nil {
					t.Fatalf("last Unlock with its reply lost: %v; it ran", err)
				}
				lose("last Unlock")
				if n, err := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 || err != nil {
					t.Fatalf("EXISTS %s = %d (%v) after its last hold was released; want 0", name, n, err)
				}
				if err := k.unlock(c, held, name); !errors.Is(err, relock.ErrNotHeld) {
					t.Errorf("third Unlock: %v; want ErrNotHeld", err)
				}
			})
		}
	})
}
