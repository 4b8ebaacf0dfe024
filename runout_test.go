package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// runOutLease is the lease of the hold that runs out in the middle of a call: long enough
// that it outlasts the way from the acquisition to the call's script on a loaded machine
// (it must run out during the script, not before), and short, since the pause that
// outlasts it holds the test's miniredis for as long.
const runOutLease = time.Second

// What a test asks of a lock of any kind whose hold runs out during the call.
type runOutLock interface {
	IsLocked(ctx context.Context) (bool, error)
	ForceUnlock(ctx context.Context) (bool, error)
}

// The lock of each kind, and its TryLock (whose options differ by kind).
type runOutCalls struct {
	lock    func(c *relock.Client, n string) runOutLock
	tryLock func(c *relock.Client, ctx context.Context, n string) (context.Context, error)
}

var (
	exclusiveRunOut = runOutCalls{
		lock: func(c *relock.Client, n string) runOutLock { return c.Lock(n) },
		tryLock: func(c *relock.Client, ctx context.Context, n string) (context.Context, error) {
			return c.Lock(n).TryLock(ctx)
		},
	}
	fairRunOut = runOutCalls{
		lock: func(c *relock.Client, n string) runOutLock { return c.FairLock(n) },
		tryLock: func(c *relock.Client, ctx context.Context, n string) (context.Context, error) {
			return c.FairLock(n).TryLock(ctx)
		},
	}
	writeRunOut = runOutCalls{
		lock: func(c *relock.Client, n string) runOutLock { return c.RWLock(n) },
		tryLock: func(c *relock.Client, ctx context.Context, n string) (context.Context, error) {
			return c.RWLock(n).TryLock(ctx)
		},
	}
	readRunOut = runOutCalls{
		lock: writeRunOut.lock,
		tryLock: func(c *relock.Client, ctx context.Context, n string) (context.Context, error) {
			return c.RWLock(n).TryRLock(ctx)
		},
	}

	// runOutKinds is each kind's hold with its calls.
	runOutKinds = []struct {
		hold  holdKind
		calls runOutCalls
	}{
		{kindRLock, exclusiveRunOut},
		{kindFair, fairRunOut},
		{kindWrite, writeRunOut},
		{kindRead, readRunOut},
	}
)

// A lock whose lease runs out while a call reads it is a lock that is gone, never data of
// another kind or a lock still held: another client's IsLocked says false, its TryLock
// takes the lock or finds it held (it was when the call began), its ForceUnlock succeeds,
// the holder's own IsLocked says false, and nothing is left that a later call would
// refuse. A real server's clock stands still while a script runs, so the lease can
// only run out between two of a script's reads on miniredis, whose clock moves; a test
// server with that clock is what the calls must survive there. (IsLocked of a read-write
// lock used to fail with ErrWrongType: the script read the hash's type, and then, the hash
// gone, an empty hash, which it took for an exclusive lock's.)
func TestLockRunsOutDuringAnotherClientsCall(t *testing.T) {
	t.Parallel()
	for _, k := range runOutKinds {
		t.Run(k.hold.name, func(t *testing.T) {
			t.Parallel()
			for _, call := range []string{"islocked", "trylock", "forceunlock", "holder's islocked"} {
				t.Run(call, func(t *testing.T) {
					t.Parallel()
					b := redistest.Mini(t)
					holder, other := relocktest.New(t, b), relocktest.New(t, b)
					ctx := redistest.Context(t, time.Minute)
					const n = "runs-out"
					held, err := k.hold.lock(holder, relock.NewOwner(ctx), n, runOutLease)
					if err != nil {
						t.Fatal(err)
					}
					// The pause starts after the hold was taken: the lease has run out when
					// the script goes on to read the whole hash (another client's call) or
					// the lock's PTTL (the holder's, whose own field vouched for the lock).
					read := "HGETALL"
					if call == "holder's islocked" {
						read = "PTTL"
					}
					paused := redistest.PauseBefore(t, b, read, n, runOutLease+200*time.Millisecond)
					switch call {
					case "islocked":
						if locked, err := k.calls.lock(other, n).IsLocked(ctx); err != nil || locked {
							t.Fatalf("IsLocked while the lease ran out = %v, %v; want false, nil", locked, err)
						}
					case "trylock":
						_, err := k.calls.tryLock(other, relock.NewOwner(ctx), n)
						if err != nil && !errors.Is(err, relock.ErrLocked) {
							t.Fatalf("TryLock while the lease ran out: %v; want the lock or ErrLocked", err)
						}
					case "forceunlock":
						if _, err := k.calls.lock(other, n).ForceUnlock(ctx); err != nil {
							t.Fatalf("ForceUnlock while the lease ran out: %v", err)
						}
					case "holder's islocked":
						if locked, err := k.calls.lock(holder, n).IsLocked(held); err != nil || locked {
							t.Fatalf("the holder's IsLocked while its lease ran out = %v, %v; want false, nil", locked, err)
						}
					}
					if !paused() {
						t.Fatalf("%s never sent %s: the lease did not run out during it", call, read)
					}
					// Whatever the call did, the lock is a lock of its kind, free or held by the
					// other client: a new owner of the other client takes it or finds it held,
					// and the other client's hold, if any, releases.
					locked, err := k.calls.lock(other, n).IsLocked(ctx)
					if err != nil {
						t.Fatalf("IsLocked after the call: %v", err)
					}
					if _, err := k.calls.tryLock(other, relock.NewOwner(ctx), n); err != nil && !(locked && errors.Is(err, relock.ErrLocked)) {
						t.Fatalf("TryLock after the call (locked %v): %v", locked, err)
					}
				})
			}
		})
	}
}

// A re-entered hold whose lease runs out while its holder releases one of its holds leaves
// nothing behind: the release reads the count (two), and by the time it would decrement it
// the hash is gone. The lock is then free for another client, as a lock whose lease ran
// out is. (The decrement used to make a new hash of the owner's field at -1, with no
// expiry: a lock that nobody held and nobody could take, for ever.) As in the test above,
// only miniredis's clock moves during a script.
func TestReentryRunsOutDuringItsUnlock(t *testing.T) {
	t.Parallel()
	for _, k := range runOutKinds {
		t.Run(k.hold.name, func(t *testing.T) {
			t.Parallel()
			b := redistest.Mini(t)
			holder, other := relocktest.New(t, b), relocktest.New(t, b)
			ctx := redistest.Context(t, time.Minute)
			const n = "runs-out"
			first, err := k.hold.lock(holder, relock.NewOwner(ctx), n, runOutLease)
			if err != nil {
				t.Fatal(err)
			}
			again, err := k.hold.lock(holder, first, n, runOutLease)
			if err != nil {
				t.Fatal(err)
			}
			paused := redistest.PauseBefore(t, b, "HINCRBY", n, runOutLease+200*time.Millisecond)
			// The hold ran out before its release: the owner holds nothing to release.
			if err := k.hold.unlock(holder, again, n); !errors.Is(err, relock.ErrNotHeld) {
				t.Errorf("Unlock of a hold that ran out during it: %v; want ErrNotHeld", err)
			}
			if !paused() {
				t.Fatal("the release never decremented the count: the lease did not run out during it")
			}
			if locked, err := k.calls.lock(other, n).IsLocked(ctx); err != nil || locked {
				t.Fatalf("IsLocked after the hold ran out during its release = %v, %v; want false, nil (left in Redis: %v)", locked, err, b.Mini.Keys())
			}
			if _, err := k.calls.tryLock(other, relock.NewOwner(ctx), n); err != nil {
				t.Fatalf("another client's TryLock of a lock whose hold ran out: %v (left in Redis: %v)", err, b.Mini.Keys())
			}
		})
	}
}
