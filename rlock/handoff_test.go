package rlock_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/internal/script"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/rlock"
)

// parkWaiter runs mu.Lock for a new owner of ctx in the background, on a lock that c's
// waiters are not parked on yet, and returns once it is parked; the hold's context (nil on
// an error, which it reports) comes on the returned channel.
func parkWaiter(t *testing.T, c *relock.Client, mu *rlock.Mutex, ctx context.Context) <-chan context.Context {
	t.Helper()
	parked := c.PubSubStats().Waiting
	got := make(chan context.Context, 1)
	go func() {
		h, err := mu.Lock(relock.NewOwner(ctx))
		if err != nil {
			t.Errorf("waiter: %v", err)
			h = nil
		}
		got <- h
	}()
	redistest.Eventually(t, 10*time.Second, "the waiter never parked", func() bool { return c.PubSubStats().Waiting == parked+1 })
	return got
}

// handedOnce locks mu, hands it to a waiter parked on it, and returns that waiter's hold:
// the hand script is loaded then, and a fault set up afterwards hits a handoff itself.
func handedOnce(t *testing.T, c *relock.Client, mu *rlock.Mutex, ctx context.Context) context.Context {
	t.Helper()
	held, err := mu.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := parkWaiter(t, c, mu, ctx)
	if err := mu.Unlock(held); err != nil {
		t.Fatal(err)
	}
	if held = redistest.Recv(t, got, 10*time.Second, "the first waiter's Lock"); held == nil {
		t.FailNow()
	}
	return held
}

// An unlock that frees the lock while a waiter of its own client is parked on it hands the
// lock to that waiter in the same call: the waiter holds it without an attempt of its own,
// no other client is woken (nothing is published: the lock was never free), and the hold
// is the waiter's as if it had acquired it: its owner's field counts 1, the lease is its
// own (a fixed one here), and a fenced lock gives it the next token. Twice: the first
// handoff also loads the script (NOSCRIPT, then EVAL), the second is counted. The same
// with a second waiter parked behind the first, which the release leaves parked.
func TestUnlockHandsToWaiterOfItsClient(t *testing.T) {
	t.Parallel()
	for _, behind := range []bool{false, true} {
		t.Run(waitersBehind(behind), func(t *testing.T) { handsToWaiter(t, behind) })
	}
}

// waitersBehind names a handoff subtest by whether another waiter is parked behind the one
// handed the lock.
func waitersBehind(behind bool) string {
	if behind {
		return "a waiter behind"
	}
	return "nobody behind"
}

// parkBehind parks a second waiter behind the one parked, when behind is set; nil
// otherwise.
func parkBehind(t *testing.T, behind bool, c *relock.Client, mu *rlock.Mutex, ctx context.Context) <-chan context.Context {
	t.Helper()
	if !behind {
		return nil
	}
	return parkWaiter(t, c, mu, ctx)
}

// unlockBoth releases w, and then the hold of the waiter parked behind it (next, from
// parkBehind), which that release hands the lock.
func unlockBoth(t *testing.T, mu *rlock.Mutex, w context.Context, next <-chan context.Context) {
	t.Helper()
	if err := mu.Unlock(w); err != nil {
		t.Fatal(err)
	}
	if w = takeBehind(t, mu, next); w != nil {
		if err := mu.Unlock(w); err != nil {
			t.Fatal(err)
		}
	}
}

// takeBehind waits for the waiter parkBehind parked, which the release of the hold before
// it hands the lock, and returns its hold; nil when none was parked. It fails the test
// unless the waiter holds the lock once.
func takeBehind(t *testing.T, mu *rlock.Mutex, next <-chan context.Context) context.Context {
	t.Helper()
	if next == nil {
		return nil
	}
	w := redistest.Recv(t, next, 10*time.Second, "the second waiter's Lock")
	if w == nil {
		t.FailNow()
	}
	if n, _ := mu.HoldCount(w); n != 1 {
		t.Errorf("HoldCount of the second waiter's hold is %d; want 1", n)
	}
	return w
}

// handsToWaiter is TestUnlockHandsToWaiterOfItsClient, with a second waiter parked behind
// the first when behind is set.
func handsToWaiter(t *testing.T, behind bool) {
	redistest.RealWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		stats := b.Commands(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		const lease = 20 * time.Second
		mu := c.Lock("hand", rlock.WithFencing(), rlock.WithLease(lease))
		held, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for round := range 2 {
			first, _ := mu.Token(held)
			got := parkWaiter(t, c, mu, ctx)
			next := parkBehind(t, behind, c, mu, ctx)

			before := stats.Calls(t)
			if err := mu.Unlock(held); err != nil {
				t.Fatal(err)
			}
			if cause := context.Cause(held); cause != context.Canceled {
				t.Errorf("the released hold's context after Unlock: %v; want context.Canceled", cause)
			}
			w := redistest.Recv(t, got, 10*time.Second, "the waiter's Lock")
			if w == nil {
				t.FailNow()
			}
			after := stats.Calls(t)
			if n := scriptCalls(before, after); round == 1 && n != 1 {
				t.Errorf("%d script calls from the unlock to the waiter holding the lock; want 1, the unlock's", n)
			}
			if n := commands(before, after, "publish", "spublish"); n != 0 {
				t.Errorf("%d publishes for a lock handed on; want 0", n)
			}
			if err := w.Err(); err != nil {
				t.Fatalf("the handed hold's context ended: %v", context.Cause(w))
			}
			owner := mustOwner(t, side, "hand")
			if n, _ := redistest.Do(t, side, "HGET", "hand", owner).AsInt64(); n != 1 {
				t.Errorf("the waiter's owner counts %d holds; want 1", n)
			}
			if n, _ := mu.HoldCount(w); n != 1 {
				t.Errorf("HoldCount of the waiter's hold is %d; want 1 (its owner %s)", n, owner)
			}
			pttl, _ := redistest.Do(t, side, "PTTL", "hand").AsInt64()
			if pttl <= 0 || pttl > lease.Milliseconds() {
				t.Errorf("PTTL %dms after the handoff; want the waiter's lease, at most %v", pttl, lease)
			}
			tok, ok := mu.Token(w)
			counter, _ := redistest.Do(t, side, "GET", "redisson_lock_token:{hand}").AsInt64()
			if !ok || tok != first+1 || tok != counter {
				t.Errorf("the handed hold's token %d (%v), the holder's %d, the counter %d; want the holder's + 1, the counter's", tok, ok, first, counter)
			}
			held = w
			if behind {
				if n := c.PubSubStats().Waiting; n != 1 {
					t.Errorf("%d waiters parked after the handoff; want 1, the one behind", n)
				}
				// The waiter behind is handed the lock next.
				if err := mu.Unlock(held); err != nil {
					t.Fatal(err)
				}
				held = takeBehind(t, mu, next)
			}
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", "hand").AsInt64(); n != 0 {
			t.Error("the lock is still there after the handed hold's unlock")
		}
	})
}

// An owner that holds the lock re-enters it at once, even while waiters of its client are
// in line for it: they wait for that owner, and a re-entry that joined them would wait for
// itself.
func TestReentryDoesNotWaitInLine(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		mu := c.Lock("reenter-in-line")
		held, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := parkWaiter(t, c, mu, ctx)

		rctx, rcancel := context.WithTimeout(held, 5*time.Second)
		defer rcancel()
		again, err := mu.Lock(rctx)
		if err != nil {
			t.Fatalf("re-entry while a waiter of the client is in line: %v", err)
		}
		if n, _ := mu.HoldCount(again); n != 2 {
			t.Fatalf("hold count %d after the re-entry; want 2", n)
		}
		for range 2 {
			if err := mu.Unlock(held); err != nil {
				t.Fatal(err)
			}
		}
		if w := redistest.Recv(t, got, 10*time.Second, "the waiter's Lock"); w != nil {
			if err := mu.Unlock(w); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TryLock makes one attempt and never queues (README; docs/design.md), also while waiters
// of its own client are in line for the lock: a Lock of the client then joins them without
// an attempt (handoff.go), and a TryLock that did so would wait for the lock, not answer
// ErrLocked. Here another owner of the client holds the lock and one of its waiters is
// parked: TryLock by a third owner of the client answers ErrLocked at once, long before its
// context's 5s, and changes nothing.
func TestTryLockDoesNotWaitInLine(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "trylock-in-line"
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, 30*time.Second)
		mu := c.Lock(name)
		held, err := mu.Lock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		got := parkWaiter(t, c, mu, ctx)

		tctx, tcancel := context.WithTimeout(relock.NewOwner(ctx), 5*time.Second)
		defer tcancel()
		tried, err := mu.TryLock(tctx)
		if !errors.Is(err, relock.ErrLocked) {
			t.Errorf("TryLock while a waiter of its client is in line: %v (context live: %v); want ErrLocked at once", err, tried.Err() == nil)
		}
		if n, _ := redistest.Do(t, side, "HLEN", name).AsInt64(); n != 1 {
			t.Errorf("%d owners in the lock after the failed TryLock; want the holder alone", n)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if w := redistest.Recv(t, got, 10*time.Second, "the waiter's Lock"); w != nil {
			if err := mu.Unlock(w); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A client hands its lock on at most hub.HandRun times in a row before a release frees it
// for the other clients: while the first client's goroutines keep asking for it, none of
// its runs of handoffs is longer, and a waiter of another client gets the lock. (How many
// runs go by first depends on the machine: the release that ends a run may pick the first
// client again, if it registered to be woken first, and a woken waiter's attempt can lose
// the freed lock to a goroutine asking again.)
func TestHandoffRunsAreBounded(t *testing.T) {
	for _, goroutines := range []int{2, 4} {
		t.Run(strconv.Itoa(goroutines)+" goroutines", func(t *testing.T) { handoffRuns(t, goroutines) })
	}
}

// handoffRuns is TestHandoffRunsAreBounded with that many goroutines in the busy client.
func handoffRuns(t *testing.T, goroutines int) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		runs, woken := &handoffRunsSeen{}, &handoffRunsSeen{}
		busy, other := relocktest.New(t, b, relock.WithObserver(runs)), relocktest.New(t, b, relock.WithObserver(woken))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var (
			mu      sync.Mutex
			count   int // the busy client's acquisitions
			atCall  = -1
			atOther = -1
			stop    atomic.Bool
			wg      sync.WaitGroup
		)
		const most = 400
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := busy.Lock("runs")
				for i := 0; i < most && !stop.Load() && ctx.Err() == nil; i++ {
					h, err := l.Lock(relock.NewOwner(ctx))
					if err != nil {
						t.Errorf("busy client: %v", err)
						return
					}
					mu.Lock()
					count++
					mu.Unlock()
					time.Sleep(5 * time.Millisecond)
					if err := l.Unlock(h); err != nil {
						t.Errorf("busy client: %v", err)
						return
					}
					// A pause before asking again: the waiter handed the lock is no longer in
					// line by then, so that a run is bounded however few wait.
					time.Sleep(time.Millisecond)
				}
			}()
		}
		redistest.Eventually(t, 10*time.Second, "the busy client never got going", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return count >= 10
		})
		done := make(chan error, 1)
		called := time.Now()
		go func() {
			l := other.Lock("runs")
			mu.Lock()
			atCall = count
			mu.Unlock()
			h, err := l.Lock(ctx)
			mu.Lock()
			atOther = count
			mu.Unlock()
			if err == nil {
				err = l.Unlock(h)
			}
			done <- err
		}()
		// Until the waiter has parked (its first attempt failed: it is in line), the busy
		// client takes the lock as often as that time allows, each hold lasting 5ms at
		// least: on a loaded machine, the attempt may take a while to be sent.
		redistest.Await(10*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return other.PubSubStats().Waiting > 0 || atOther >= 0
		})
		inFlight := int(time.Since(called) / (5 * time.Millisecond))
		err := redistest.Recv(t, done, 50*time.Second, "the other client's waiter")
		stop.Store(true)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		// The promise itself: no more than hub.HandRun handoffs in a row, whatever the
		// machine's load. How often the busy client took the lock while the other's waiter
		// waited depends on the load as well (a woken waiter's attempt can lose the freed
		// lock to a busy goroutine asking again), and is only reported.
		if most := runs.longest(); most > hub.HandRun || most == 0 {
			t.Errorf("the busy client handed the lock on %d times in a row; want 1 to %d", most, hub.HandRun)
		}
		// A release that ends a run frees the lock for the other client's waiter and wakes
		// it by its message: the waiter does not sleep out the busy client's lease.
		if w := woken.lastWoken(); w == observe.ByLease {
			t.Errorf("the other client's waiter got the lock woken by the holder's lease; want by a release's message")
		}
		t.Logf("the busy client took the lock %d times while the other client's waiter waited (about %d while its first attempt was on its way); longest run of handoffs %d",
			atOther-atCall, max(1, inFlight), runs.longest())
	})
}

// handoffRunsSeen is an observer that follows the runs of acquisitions by handoff, and
// what ended the last acquisition's wait.
type handoffRunsSeen struct {
	observe.Base
	mu        sync.Mutex
	run, most int
	last      observe.Woken
}

func (r *handoffRunsSeen) Acquired(e observe.Acquisition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = e.Woken
	if e.Woken != observe.ByHandoff {
		r.run = 0
		return
	}
	r.run++
	r.most = max(r.most, r.run)
}

// longest returns the longest run of handoffs in a row seen so far.
func (r *handoffRunsSeen) longest() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.most
}

// A handoff whose reply is lost after Redis ran it is sent again, found done, and the
// waiter finds out from its hold count that it holds the lock: once, not twice (an attempt
// of its own would have re-entered the lock it was handed). With a waiter behind, the
// handed waiter sends the call, and resends it, itself.
func TestHandoffReplyLost(t *testing.T) {
	for _, behind := range []bool{false, true} {
		t.Run(waitersBehind(behind), func(t *testing.T) { handoffReplyLost(t, behind) })
	}
}

// handoffReplyLost is TestHandoffReplyLost, with a second waiter parked behind the one
// handed the lock when behind is set.
func handoffReplyLost(t *testing.T, behind bool) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, proxy := throughProxy(t, b)
		side := b.Client(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		mu := c.Lock("hand-lost")
		// A first handoff loads the script, so that the fault hits the handoff itself, not
		// a NOSCRIPT.
		held := handedOnce(t, c, mu, ctx)

		got := parkWaiter(t, c, mu, ctx)
		next := parkBehind(t, behind, c, mu, ctx)
		proxy.LoseReplyTo(unlockMarker("hand-lost"))
		if err := mu.Unlock(held); err != nil {
			t.Fatalf("Unlock with its reply lost: %v", err)
		}
		if proxy.Armed() != 0 {
			t.Fatal("the fault never fired: the test proved nothing")
		}
		w := redistest.Recv(t, got, 10*time.Second, "the waiter's Lock")
		if w == nil {
			t.FailNow()
		}
		owner := mustOwner(t, side, "hand-lost")
		if n, _ := redistest.Do(t, side, "HGET", "hand-lost", owner).AsInt64(); n != 1 {
			t.Fatalf("the waiter's owner counts %d holds; want 1", n)
		}
		unlockBoth(t, mu, w, next)
		if n, _ := redistest.Do(t, side, "EXISTS", "hand-lost").AsInt64(); n != 0 {
			t.Error("the lock is still there after the waiter's one unlock: its hold was counted twice")
		}
	})
}

// A hand call whose reply is lost may reach Redis after the claimed waiter has looked and
// found nothing: rueidis closes a connection at a call's deadline, and what the client sends
// next goes out on a new one. The waiter then tries on its own, and Redis, which has handed
// it the lock meanwhile, counts its attempt as a re-entry. Its Lock still takes the lock
// once: its owner's field counts one hold, the hold has the counter's token (the one the
// handoff took), and its one Unlock frees the lock.
func TestHandoffRunsLate(t *testing.T) {
	t.Parallel()
	for _, behind := range []bool{false, true} {
		t.Run(waitersBehind(behind), func(t *testing.T) { handoffRunsLate(t, behind) })
	}
}

// handoffRunsLate is TestHandoffRunsLate, with a second waiter parked behind the one handed
// the lock when behind is set.
func handoffRunsLate(t *testing.T, behind bool) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "hand-late"
		late := redistest.NewLateRequests(b.Client(t))
		// The holder's lease (the watchdog's, 3s) bounds the waiter's sleep before it tries
		// again, and must outlast the late hand call: its release is never renewed.
		c := relocktest.On(t, late, relock.WithTimeout(300*time.Millisecond), relock.WithWatchdogTimeout(3*time.Second))
		side := b.Client(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		mu := c.Lock(name, rlock.WithFencing())
		// A first handoff loads the script, so that the late request is the handoff itself.
		held := handedOnce(t, c, mu, ctx)
		holder := mustOwner(t, side, name)

		got := parkWaiter(t, c, mu, ctx)
		next := parkBehind(t, behind, c, mu, ctx)
		arrived, send := late.Hold(script.RLockHand().SHA1, name)
		defer send()
		err := mu.Unlock(held)
		redistest.Arrived(t, arrived, "Unlock", err)
		t.Logf("Unlock whose hand call went unanswered: %v", err)
		// The waiter found nothing handed, tried, and was told to wait for the holder's
		// lease; now the hand call reaches Redis.
		waiting := 1
		if behind {
			waiting = 2
		}
		redistest.Eventually(t, 10*time.Second, "the waiter never parked again", func() bool { return c.PubSubStats().Waiting == waiting })
		send()
		if owner := mustOwner(t, side, name); owner == holder {
			t.Fatal("the late hand call handed nothing (the holder's hold ran out first?): the test proved nothing")
		}

		// The waiter tries again when the holder's lease would have run out; with a
		// waiter behind it, that one may be woken instead, and the waiter gets the lock
		// once its handed hold, unknown to the client, has run out in turn: then with a
		// token of its own.
		w := redistest.Recv(t, got, 10*time.Second, "the waiter's Lock")
		if w == nil {
			t.FailNow()
		}
		token, _ := redistest.Do(t, side, "GET", "redisson_lock_token:{"+name+"}").AsInt64()
		owner := mustOwner(t, side, name)
		if n, _ := redistest.Do(t, side, "HGET", name, owner).AsInt64(); n != 1 {
			t.Errorf("the waiter's owner counts %d holds; want 1 (its Lock took the lock once)", n)
		}
		if tok, ok := mu.Token(w); !ok || tok != token {
			t.Errorf("the waiter's token %d (%v); want the counter's, %d", tok, ok, token)
		}
		unlockBoth(t, mu, w, next)
		if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
			t.Error("the lock is still there after the waiter's one unlock: its hold was counted twice")
		}
	})
}

// A hold handed on with a short fixed lease, which then runs out without an unlock, is
// seen by the waiters still parked when it ends, not when the previous hold would have
// (30s). Those of other clients hear the handoff announce the new lease, as an acquisition
// does. Those of the same client have their channel's timer set for it by the handoff
// itself: they are not told otherwise when their client is not registered to be woken
// (its registry entry ran out; here it is deleted), which the announcement needs.
func TestHandedLeaseWakesTheOthers(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"another client", "the same client"} {
		t.Run(where, func(t *testing.T) {
			redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
				c, other := relocktest.New(t, b), relocktest.New(t, b)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				held, err := c.Lock("short").Lock(ctx) // the default 30s lease: waiters sleep on it
				if err != nil {
					t.Fatal(err)
				}
				// The first waiter, handed the lock, keeps it for 300ms and never unlocks.
				handed := make(chan error, 1)
				go func() {
					_, err := c.Lock("short", rlock.WithLease(300*time.Millisecond)).Lock(relock.NewOwner(ctx))
					handed <- err
				}()
				redistest.Eventually(t, 10*time.Second, "the first waiter never parked", func() bool { return c.PubSubStats().Waiting == 1 })
				var next <-chan error
				if where == "another client" {
					next = lockInBackground(other.Lock("short"), 20*time.Second)
					redistest.Eventually(t, 10*time.Second, "the other client's waiter never parked", func() bool { return other.PubSubStats().Waiting == 1 })
				} else {
					next = lockInBackground(c.Lock("short"), 20*time.Second)
					redistest.Eventually(t, 10*time.Second, "the second waiter never parked", func() bool { return c.PubSubStats().Waiting == 2 })
					redistest.MustDo(t, b.Client(t), "DEL", "relock_wake:{short}")
				}

				if err := c.Lock("short").Unlock(held); err != nil {
					t.Fatal(err)
				}
				if err := redistest.Recv(t, handed, 10*time.Second, "the first waiter's Lock"); err != nil {
					t.Fatal(err)
				}
				if err := redistest.Recv(t, next, 10*time.Second, "the next waiter after a 300ms hold: it slept on the old 30s lease"); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// An unlock whose hold is gone (its key deleted without a message, as an expiry does)
// while waiters of its client are parked fails with ErrNotHeld and hands nothing on; the
// waiter it claimed is woken to try instead, and gets the free lock at once, not when the
// lease it was told of would have run out (30 s).
func TestHandoffOfAHoldThatIsGone(t *testing.T) {
	for _, behind := range []bool{false, true} {
		t.Run(waitersBehind(behind), func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				c := relocktest.New(t, b)
				side := b.Client(t)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				mu := c.Lock("hand-gone")
				held, err := mu.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got := parkWaiter(t, c, mu, ctx)
				next := parkBehind(t, behind, c, mu, ctx)
				redistest.MustDo(t, side, "DEL", "hand-gone")
				if err := mu.Unlock(held); !errors.Is(err, relock.ErrNotHeld) {
					t.Fatalf("Unlock of a hold that is gone: %v; want ErrNotHeld", err)
				}
				if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
					t.Errorf("the gone hold's context: %v; want ErrLeaseLost", cause)
				}
				w := redistest.Recv(t, got, 5*time.Second, "the claimed waiter's Lock (it slept on a 30s lease)")
				if w == nil {
					t.FailNow()
				}
				if n, _ := mu.HoldCount(w); n != 1 {
					t.Errorf("HoldCount of the claimed waiter's hold is %d; want 1", n)
				}
				unlockBoth(t, mu, w, next)
				if n, _ := redistest.Do(t, side, "EXISTS", "hand-gone").AsInt64(); n != 0 {
					t.Error("the lock is still there after its holders' unlocks")
				}
			})
		})
	}
}

// A fencing counter that INCR cannot count on (here a word) refuses every fenced
// acquisition with ErrWrongType, but it is no part of a release: an unlock while a fenced
// waiter of its client is parked still releases the lock (Redisson's unlock never reads
// the counter), its hold's context ends as released, and the waiter, woken to try, meets
// the counter in its own attempt: its Lock fails with ErrWrongType at once, not when the
// holder's lease would have run out. The counter is left as it was. Guards against a hand
// call that failed on the counter and so kept the lock held, by nobody the client knew of,
// for a whole lease.
func TestHandoffWithACounterThatCannotCount(t *testing.T) {
	for _, behind := range []bool{false, true} {
		t.Run(waitersBehind(behind), func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				c := relocktest.New(t, b)
				side := b.Client(t)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				mu := c.Lock("hand-fence", rlock.WithFencing())
				held, err := mu.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				waiters := 1
				if behind {
					waiters = 2
				}
				errs := make(chan error, waiters)
				for i := range waiters {
					go func() {
						h, err := mu.Lock(relock.NewOwner(ctx))
						if err == nil {
							err = mu.Unlock(h)
						}
						errs <- err
					}()
					redistest.Eventually(t, 10*time.Second, "a waiter never parked", func() bool { return c.PubSubStats().Waiting == i+1 })
				}
				redistest.MustDo(t, side, "SET", "redisson_lock_token:{hand-fence}", "zzz")
				if err := mu.Unlock(held); err != nil {
					t.Fatalf("Unlock with a fenced waiter parked and a counter that cannot count: %v; want nil", err)
				}
				if cause := context.Cause(held); cause != context.Canceled {
					t.Errorf("the released hold's context: %v; want context.Canceled", cause)
				}
				for range waiters {
					if err := redistest.Recv(t, errs, 5*time.Second, "a waiter's Lock (the holder's lease is 30s)"); !errors.Is(err, relock.ErrWrongType) {
						t.Errorf("a fenced waiter's Lock: %v; want ErrWrongType", err)
					}
				}
				if n, _ := redistest.Do(t, side, "EXISTS", "hand-fence").AsInt64(); n != 0 {
					t.Error("the lock is still held after its holder's unlock")
				}
				if v, _ := redistest.Do(t, side, "GET", "redisson_lock_token:{hand-fence}").ToString(); v != "zzz" {
					t.Errorf("the counter reads %q; want it left as it was", v)
				}
			})
		})
	}
}

// A waiter's acquisition request that ran late (its connection broke, it was sent again and
// found the lock busy) stays with the waiter: when the lock is then handed to it by a hand
// call whose reply was lost, and the late request re-enters the handed hold before the
// waiter looks, the waiter gives that surplus back (docs/reliability.md, "A hand call that
// runs late"): its Lock takes the lock once, and its one Unlock frees it.
func TestHandoffFindsTheWaitersLateRequest(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		const name = "hand-behind-late"
		proxy := redistest.StartProxy(t, b.Addr)
		late := redistest.NewLateRequests((&redistest.Backend{Name: b.Name, Addr: proxy.Addr()}).Client(t))
		c := relocktest.On(t, late)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		mu := c.Lock(name)
		// A first handoff loads the scripts, so that the faults hit the calls themselves.
		held := handedOnce(t, c, mu, ctx)

		acquiring, sendAcquire := late.HoldBroken(script.RLockAcquire().SHA1, name)
		defer sendAcquire()
		got := parkWaiter(t, c, mu, ctx)
		select {
		case <-acquiring:
		default:
			t.Fatal("the waiter sent no acquisition to hold back: the test proved nothing")
		}
		proxy.LoseReplyTo(script.RLockHand().SHA1)
		reading, sendRead := late.Hold(script.RLockState().SHA1, name)
		defer sendRead()
		unlocked := make(chan error, 1)
		go func() { unlocked <- mu.Unlock(held) }()
		// The waiter asks whether the hand call ran; before its question reaches Redis, its
		// late acquisition does, and re-enters the hold it was handed.
		redistest.Recv(t, reading, 30*time.Second, "the waiter's question whether it was handed the lock")
		if proxy.Armed() != 0 {
			t.Fatal("the hand call's reply was not lost: the test proved nothing")
		}
		sendAcquire()
		sendRead()
		if err := redistest.Recv(t, unlocked, 30*time.Second, "the holder's Unlock"); err != nil {
			t.Errorf("the holder's Unlock: %v", err)
		}
		w := redistest.Recv(t, got, 30*time.Second, "the waiter's Lock")
		if w == nil {
			t.FailNow()
		}
		if n, _ := redistest.Do(t, side, "HGET", name, mustOwner(t, side, name)).AsInt64(); n != 1 {
			t.Errorf("the waiter's owner counts %d holds; want 1 (its Lock took the lock once)", n)
		}
		if err := mu.Unlock(w); err != nil {
			t.Errorf("the waiter's Unlock: %v", err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
			t.Error("the lock is still there after the waiter's one unlock: its hold was counted twice")
		}
	})
}

// A handed waiter that cannot find out at once whether the handoff ran keeps waiting, and
// never counts the lock twice (docs/design.md, lost replies): the hand call's reply is
// lost, its resend finds the releasing hold gone, and the read by which the waiter would
// learn whether it holds the lock gets no answer within the client's timeout. As a waiter
// whose attempt got no answer (retry.Outage), it rides that out while its context lives:
// its next try asks first, finds the lock it was handed, and holds it once, so that its
// one Unlock frees the lock. Guards against a waiter that gives up on the one unanswered
// read, with an error that reads as its own deadline, leaving the lock it was handed to
// run out unrenewed and unreleased; and against one that shrugs off the failed look and
// sends an attempt of its own, which re-enters the lock it was handed and counts two
// holds, one of which its Unlock leaves, renewed for as long as the process lives.
func TestHandoffReplyLostAndTheWaitersReadToo(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		const name = "hand-lost-read"
		side := b.Client(t)
		proxy := redistest.StartProxy(t, b.Addr)
		late := redistest.NewLateRequests((&redistest.Backend{Name: b.Name, Addr: proxy.Addr()}).Client(t))
		c := relocktest.On(t, late, relock.WithTimeout(500*time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		mu := c.Lock(name)
		// A first handoff and a read load the scripts, so that the faults hit the calls.
		held := handedOnce(t, c, mu, ctx)
		if _, err := mu.HoldCount(held); err != nil {
			t.Fatal(err)
		}

		type result struct {
			held context.Context
			err  error
		}
		parked := c.PubSubStats().Waiting
		done := make(chan result, 1)
		go func() {
			h, err := mu.Lock(relock.NewOwner(ctx))
			done <- result{h, err}
		}()
		redistest.Eventually(t, 10*time.Second, "the waiter never parked", func() bool { return c.PubSubStats().Waiting == parked+1 })
		proxy.LoseReplyTo(unlockMarker(name))
		reading, _ := late.Hold(script.RLockState().SHA1, name)
		if err := mu.Unlock(held); err != nil {
			t.Fatalf("Unlock whose hand call's reply was lost: %v", err)
		}
		if proxy.Armed() != 0 {
			t.Fatal("the hand call's reply was never lost: the test proved nothing")
		}
		r := redistest.Recv(t, done, 10*time.Second, "the waiter's Lock")
		redistest.Arrived(t, reading, "the handed waiter's look", r.err)
		if r.err != nil {
			n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64()
			t.Fatalf("the handed waiter whose look got no answer gave up, its context live: %v (the lock exists: %d)", r.err, n)
		}
		if n, _ := redistest.Do(t, side, "HGET", name, mustOwner(t, side, name)).AsInt64(); n != 1 {
			t.Errorf("the waiter's owner counts %d holds; want 1 (its Lock returned once)", n)
		}
		if err := mu.Unlock(r.held); err != nil {
			t.Fatal(err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
			t.Errorf("the lock is still there after the waiter's one Unlock (PTTL %dms)", redistest.PTTL(t, side, name))
		}
	})
}

// lastWoken returns what ended the wait of the last acquisition seen.
func (r *handoffRunsSeen) lastWoken() observe.Woken {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}
