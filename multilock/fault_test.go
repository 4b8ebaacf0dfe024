package multilock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// A MultiLock over two servers whose second goes silent under the hold (every packet to
// it dropped): the member there is no longer renewed, and the MultiLock's hold ends with
// ErrLeaseLost before another owner, on that server, takes that member. Unlock then
// releases the member on the server still reachable, and reports the silent member, naming
// it, within a bound. Guards against a MultiLock whose hold outlives a member lost on
// another server than the last member's, and against an Unlock that, stuck on the silent
// member, leaves the other held.
func TestMultiLockMemberOnASilentServer(t *testing.T) {
	const lease = 1500 * time.Millisecond
	redistest.Real(t, func(t *testing.T, _ *redistest.Backend) {
		ctx := redistest.Context(t, time.Minute)
		s1, s2 := redistest.StartServer(t), redistest.StartServer(t)
		proxy := redistest.StartProxy(t, s2.Addr())
		c1 := relocktest.New(t, s1, relock.WithWatchdogTimeout(lease))
		c2 := relocktest.New(t, &redistest.Backend{Name: "redis", Addr: proxy.Addr()},
			relock.WithWatchdogTimeout(lease), relock.WithTimeout(500*time.Millisecond), relock.WithLogger(nil))
		other1, other2 := relocktest.New(t, s1), relocktest.New(t, s2)
		const reachable, silent = "ml:fault:a", "ml:fault:b"
		ml := c1.MultiLock(relock.Member(c1.Lock(reachable)), relock.Member(c2.Lock(silent)))
		held, err := ml.Lock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		proxy.Blackhole()
		defer proxy.Unblackhole()

		wctx, cancel := context.WithTimeout(ctx, 2*lease+10*time.Second)
		defer cancel()
		taken, err := other2.Lock(silent).Lock(wctx)
		if err != nil {
			t.Fatalf("another owner on the second server, after the holder went silent: %v", err)
		}
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Fatalf("another owner took %s while the MultiLock's hold said %v; want it ended with ErrLeaseLost", silent, cause)
		}
		if err := other2.Lock(silent).Unlock(taken); err != nil {
			t.Fatal(err)
		}

		done := make(chan error, 1)
		go func() { done <- ml.Unlock(held) }()
		err = redistest.Recv(t, done, 15*time.Second, "the MultiLock's Unlock with a silent member")
		var e *relock.Error
		if !errors.As(err, &e) || e.Name != silent {
			t.Errorf("Unlock = %v; want an error naming %s", err, silent)
		}
		if got := relocktest.Named(err, relock.ErrNotHeld); len(got) != 1 || !strings.HasPrefix(got[0], silent) {
			t.Errorf("Unlock = %v; want one error, naming %s alone", err, silent)
		}
		if ok, err := other1.Lock(reachable).IsLocked(ctx); ok || err != nil {
			t.Errorf("after Unlock, %s on the reachable server locked = %v, %v; want released", reachable, ok, err)
		}
	})
}

// A MultiLock whose member's reply is lost (the call ran, its reply and the connection
// were lost) counts every member once: for each member in turn, Lock with that member's
// reply lost holds all three with a hold count of one each and a fencing token above the
// last holder's, and an Unlock with that member's reply lost returns nil and frees all
// three. Guards against a MultiLock that takes a member twice after a lost reply (one
// Unlock would leave it held), fails the call while the lost attempt holds the member, or
// reports a release that ran as failed.
func TestMultiLockMemberReplyLost(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		proxy := redistest.StartProxy(t, b.Addr)
		c := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()})
		ctx := redistest.Context(t, time.Minute)
		counts := []func(context.Context) (int, error){
			c.Lock(memberNames[0]).HoldCount, c.FairLock(memberNames[1]).HoldCount, c.RWLock(memberNames[2]).HoldCount,
		}
		tokens := []func(context.Context) (int64, bool){
			c.Lock(memberNames[0]).Token, c.FairLock(memberNames[1]).Token, c.RWLock(memberNames[2]).Token,
		}
		ml := c.MultiLock(members(c)...)
		// The scripts loaded first, so that the faults hit the calls themselves.
		warm, err := ml.Lock(ctx, rlock.WithFencing())
		if err != nil {
			t.Fatal(err)
		}
		if err := ml.Unlock(warm); err != nil {
			t.Fatal(err)
		}
		for _, how := range []string{"Lock", "TryLock"} {
			take := ml.Lock
			if how == "TryLock" {
				take = ml.TryLock
			}
			last := make([]int64, len(memberNames))
			for i, lost := range memberNames {
				proxy.LoseReplyTo(lost)
				held, err := take(ctx, rlock.WithFencing())
				if proxy.Armed() != 0 {
					t.Fatalf("Lock: the fault on %s never fired", lost)
				}
				if err != nil {
					t.Fatalf("%s with %s's reply lost: %v (locked %v)", how, lost, err, locked(t, ctx, c))
				}
				for j, count := range counts {
					if n, err := count(held); n != 1 || err != nil {
						t.Errorf("Lock with %s's reply lost: %s's hold count %d, %v; want 1", lost, memberNames[j], n, err)
					}
					if tok, ok := tokens[j](held); !ok || tok <= last[j] {
						t.Errorf("Lock with %s's reply lost: %s's token %d, %v; want one above %d", lost, memberNames[j], tok, ok, last[j])
					} else {
						last[j] = tok
					}
				}
				proxy.LoseReplyTo(memberNames[(i+1)%len(memberNames)])
				if err := ml.Unlock(held); err != nil {
					t.Errorf("Unlock with %s's reply lost: %v", memberNames[(i+1)%len(memberNames)], err)
				}
				if proxy.Armed() != 0 {
					t.Fatalf("Unlock: the fault never fired")
				}
				if got := locked(t, ctx, c); got[0] || got[1] || got[2] {
					t.Fatalf("after the one Unlock, locked = %v; want none", got)
				}
			}
		}
	})
}
