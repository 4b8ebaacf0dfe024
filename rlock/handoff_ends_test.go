package rlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/internal/script"
	"github.com/relock-go/relock/rlock"
)

// lockResult is a background Lock's outcome.
type lockResult struct {
	held context.Context
	err  error
}

// handoffHeld sets up a handoff whose hand call is held back on its way to Redis: a hold of
// mu, a waiter of the same client parked on it (its Lock runs on wctx), a second waiter
// parked behind it when behind is set (see parkBehind), and the holder's Unlock under way.
// It returns the hold, the waiter's outcome, the Unlock's, send, which lets the hand call
// reach Redis, and the second waiter's hold (nil when behind is not set).
func handoffHeld(t *testing.T, late *redistest.LateRequests, c *relock.Client, mu *rlock.Mutex, ctx, wctx context.Context, unlock func(held context.Context) context.Context, behind bool) (context.Context, <-chan lockResult, <-chan error, func(), <-chan context.Context) {
	t.Helper()
	// A first handoff loads the script, so that the held request is the handoff itself.
	held := handedOnce(t, c, mu, ctx)
	parked := c.PubSubStats().Waiting
	waiter := make(chan lockResult, 1)
	go func() {
		h, err := mu.Lock(relock.NewOwner(wctx))
		waiter <- lockResult{h, err}
	}()
	redistest.Eventually(t, 10*time.Second, "the waiter never parked", func() bool { return c.PubSubStats().Waiting == parked+1 })
	next := parkBehind(t, behind, c, mu, ctx)
	arrived, send := late.Hold(script.RLockHand().SHA1, mu.Name())
	t.Cleanup(send)
	unlocked := make(chan error, 1)
	go func() { unlocked <- mu.Unlock(unlock(held)) }()
	redistest.Recv(t, arrived, 10*time.Second, "the hand call")
	return held, waiter, unlocked, send, next
}

// A handoff is bound to finish whatever contexts end while it is on its way: the hand call
// that the claimed waiter sends for the releaser runs on the releaser's behalf, so neither
// the releaser's context (the release is done, and Unlock says so) nor the waiter's ends
// it. A waiter whose context ended meanwhile is not left holding the lock it was handed:
// its Lock fails with its context's error and the hold is released again, so the lock is
// free, not held by nobody the client knows of for a lease.
func TestHandoffOutlivesTheCallersContexts(t *testing.T) {
	for _, ended := range []string{"the waiter's", "the releaser's"} {
		t.Run(ended, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				const name = "hand-ends"
				late := redistest.NewLateRequests(b.Client(t))
				c := relocktest.On(t, late, relock.WithTimeout(10*time.Second))
				side := b.Client(t)
				ctx := redistest.Context(t, 30*time.Second)
				mu := c.Lock(name)
				wctx, wcancel := context.WithCancel(ctx)
				defer wcancel()
				var rcancel context.CancelFunc
				held, waiter, unlocked, send, _ := handoffHeld(t, late, c, mu, ctx, wctx, func(held context.Context) context.Context {
					rctx, cancel := context.WithCancel(held)
					rcancel = cancel
					return rctx
				}, false)
				defer rcancel()
				if ended == "the waiter's" {
					wcancel()
				} else {
					rcancel()
				}
				send()
				if err := redistest.Recv(t, unlocked, 10*time.Second, "Unlock"); err != nil {
					t.Fatalf("Unlock of a hold handed on: %v; want nil, the release happened", err)
				}
				if cause := context.Cause(held); cause != context.Canceled {
					t.Errorf("the released hold's context: %v; want context.Canceled", cause)
				}
				got := redistest.Recv(t, waiter, 10*time.Second, "the waiter's Lock")
				if ended == "the waiter's" {
					if !errors.Is(got.err, context.Canceled) {
						t.Fatalf("the waiter's Lock after its context ended: %v; want context.Canceled", got.err)
					}
					if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
						t.Errorf("the lock is held after the handed waiter gave up: by %v", redistest.Do(t, side, "HGETALL", name))
					}
					return
				}
				if got.err != nil {
					t.Fatalf("the waiter's Lock: %v", got.err)
				}
				if err := got.held.Err(); err != nil {
					t.Fatalf("the handed hold's context ended: %v", context.Cause(got.held))
				}
				owner := mustOwner(t, side, name)
				if n, _ := redistest.Do(t, side, "HGET", name, owner).AsInt64(); n != 1 {
					t.Errorf("the waiter's owner counts %d holds; want 1", n)
				}
				if err := mu.Unlock(got.held); err != nil {
					t.Fatal(err)
				}
				if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
					t.Error("the lock is still there after the handed hold's unlock")
				}
			})
		})
	}
}

// A lock forced open by another client while a handoff is on its way, and taken by that
// client, is not handed on by the late hand call: the releaser's hold is gone, so its
// Unlock fails with ErrNotHeld, and the other client's hold is left whole; the claimed
// waiter, handed nothing, waits for it and gets the lock once it is released.
func TestHandoffAfterForceUnlock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "hand-forced"
		late := redistest.NewLateRequests(b.Client(t))
		c := relocktest.On(t, late, relock.WithTimeout(10*time.Second))
		other := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, 30*time.Second)
		mu := c.Lock(name)
		held, waiter, unlocked, send, _ := handoffHeld(t, late, c, mu, ctx, ctx, func(held context.Context) context.Context { return held }, false)
		omu := other.Lock(name)
		if ok, err := omu.ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock: %v, %v", ok, err)
		}
		oheld, err := omu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		theirs := mustOwner(t, side, name)
		send()
		if err := redistest.Recv(t, unlocked, 10*time.Second, "Unlock"); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("Unlock of a hold forced open: %v; want ErrNotHeld", err)
		}
		if err := held.Err(); err == nil {
			t.Error("the forced hold's context still says held")
		}
		if n, _ := redistest.Do(t, side, "HLEN", name).AsInt64(); n != 1 {
			t.Errorf("%d owners hold the lock; want 1, the other client's", n)
		}
		if n, _ := redistest.Do(t, side, "HGET", name, theirs).AsInt64(); n != 1 {
			t.Errorf("the other client's owner counts %d holds; want 1", n)
		}
		select {
		case got := <-waiter:
			t.Fatalf("the claimed waiter's Lock returned (%v) while another client holds the lock", got.err)
		default:
		}
		if err := omu.Unlock(oheld); err != nil {
			t.Fatal(err)
		}
		got := redistest.Recv(t, waiter, 10*time.Second, "the waiter's Lock")
		if got.err != nil {
			t.Fatalf("the waiter's Lock: %v", got.err)
		}
		if err := mu.Unlock(got.held); err != nil {
			t.Fatal(err)
		}
	})
}

// A handed hold's context is timed from when the hand call went out, as an acquisition's
// is from its send: Redis starts the waiter's lease when it runs the call, so a context
// timed from the reply would outlive the lease by the reply's way back. Here the reply
// comes after the whole (fixed) lease: once the waiter's Lock returns, its hold's context
// may not say held while Redis no longer holds the lock.
func TestHandedHoldNeverOutlivesItsLease(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "hand-slow"
		const lease = time.Second
		side := b.Client(t)
		// The reply that comes late is the first to a command naming the fencing counter:
		// the hand call to the fenced waiter, which joined the line without an attempt.
		c := relocktest.On(t, redistest.LateReply(b.Client(t), "redisson_lock_token:{"+name+"}", lease+lease/2))
		ctx := redistest.Context(t, 30*time.Second)
		mu := c.Lock(name)
		fenced := c.Lock(name, rlock.WithFencing(), rlock.WithLease(lease))
		held, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		first := parkWaiter(t, c, mu, ctx)
		second := parkWaiter(t, c, fenced, ctx)
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if held = redistest.Recv(t, first, 10*time.Second, "the first waiter's Lock"); held == nil {
			t.FailNow()
		}
		start := time.Now()
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) < lease {
			t.Fatal("the hand call's reply was not held back: the test proved nothing")
		}
		w := redistest.Recv(t, second, 10*time.Second, "the fenced waiter's Lock")
		if w == nil || w.Err() != nil {
			return // ended with the lease: right
		}
		if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n == 0 {
			t.Fatalf("the handed hold's context says held %v after the hand call went out, past its lease of %v, and Redis has let the lock go", time.Since(start), lease)
		}
	})
}

// A claimed waiter whose context ends while its hand call is on its way, and which is then
// handed nothing (the releaser's hold is gone: an expiry deletes it without a message),
// leaves the wake-up it was given to the waiter behind it: that one tries and gets the
// free lock at once, not when the lease it was told of would have run out (30 s).
func TestHandoffThatFailsForAWaiterThatGaveUpWakesTheNext(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "hand-next"
		late := redistest.NewLateRequests(b.Client(t))
		c := relocktest.On(t, late, relock.WithTimeout(10*time.Second))
		side := b.Client(t)
		ctx := redistest.Context(t, 30*time.Second)
		mu := c.Lock(name)
		wctx, wcancel := context.WithCancel(ctx)
		defer wcancel()
		_, claimed, unlocked, send, next := handoffHeld(t, late, c, mu, ctx, wctx, func(held context.Context) context.Context { return held }, true)
		redistest.MustDo(t, side, "DEL", name)
		wcancel()
		send()
		if err := redistest.Recv(t, unlocked, 10*time.Second, "Unlock"); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("Unlock of a hold that is gone: %v; want ErrNotHeld", err)
		}
		if got := redistest.Recv(t, claimed, 10*time.Second, "the claimed waiter's Lock"); !errors.Is(got.err, context.Canceled) {
			t.Fatalf("the claimed waiter's Lock after its context ended: %v; want context.Canceled", got.err)
		}
		w := redistest.Recv(t, next, 5*time.Second, "the waiter behind's Lock (it slept on a 30s lease)")
		if w == nil {
			t.FailNow()
		}
		if err := mu.Unlock(w); err != nil {
			t.Fatal(err)
		}
	})
}
