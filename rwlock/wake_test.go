package rwlock_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// A release wakes one waiting writer in one client, not one in every client that has one:
// with a writer waiting in each of four clients, the four write holds that follow the
// first release take four wake-ups in all, whether the lock was held for writing or for
// reading. Readers that wait are all let in at once (TestWriterUnlockWakesAllReaders).
func TestOneWriterWokenPerReleaseAcrossClients(t *testing.T) {
	for _, side := range []string{"write", "read"} {
		t.Run(side, func(t *testing.T) {
			redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
				const n = 4
				holder := relocktest.New(t, b)
				mu := holder.RWLock("writers")
				lock, unlock := mu.Lock, mu.Unlock
				if side == "read" {
					lock, unlock = mu.RLock, mu.RUnlock
				}
				held, err := lock(redistest.Context(t, time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				acquired := make(chan error, n)
				var clients []*relock.Client
				for range n {
					c := relocktest.New(t, b)
					clients = append(clients, c)
					go func() {
						ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
						defer cancel()
						h, err := c.RWLock("writers").Lock(ctx)
						if err == nil {
							err = c.RWLock("writers").Unlock(h)
						}
						acquired <- err
					}()
				}
				redistest.Eventually(t, 10*time.Second, "the writers never parked", func() bool { return relocktest.Waiting(clients...) == n })
				if err := unlock(held); err != nil {
					t.Fatal(err)
				}
				for range n {
					if err := redistest.Recv(t, acquired, 15*time.Second, "the next writer's turn: a wake-up was lost"); err != nil {
						t.Fatal(err)
					}
				}
				var woken, timedOut uint64
				for _, c := range clients {
					st := c.PubSubStats()
					woken, timedOut = woken+st.Woken, timedOut+st.TimedOut
				}
				if woken != n || timedOut != 0 {
					t.Errorf("%d wake-ups and %d time-outs for %d write holds, one writer per client; want %d and 0", woken, timedOut, n, n)
				}
			})
		})
	}
}

// When a writer releases, readers that wait in other clients all enter at once, also with
// a writer waiting beside them: the release does not pick one client.
func TestWriterUnlockWakesAllReaders(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const readers = 3
		holder := relocktest.New(t, b)
		held, err := holder.RWLock("readers").Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		var clients []*relock.Client
		in := make(chan struct{}, readers)
		allIn := make(chan struct{})
		done := make(chan error, readers+1)
		for range readers {
			c := relocktest.New(t, b)
			clients = append(clients, c)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				h, err := c.RWLock("readers").RLock(ctx)
				if err == nil {
					in <- struct{}{}
					// Hold the read lock until every reader holds it: they share it.
					select {
					case <-allIn:
					case <-ctx.Done():
					}
					err = c.RWLock("readers").RUnlock(h)
				}
				done <- err
			}()
		}
		writer := relocktest.New(t, b)
		clients = append(clients, writer)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			h, err := writer.RWLock("readers").Lock(ctx)
			if err == nil {
				err = writer.RWLock("readers").Unlock(h)
			}
			done <- err
		}()
		redistest.Eventually(t, 10*time.Second, "the waiters never parked", func() bool { return relocktest.Waiting(clients...) == readers+1 })
		if err := holder.RWLock("readers").Unlock(held); err != nil {
			t.Fatal(err)
		}
		for range readers {
			redistest.Recv(t, in, 15*time.Second, "every reader in: one was left to its time bound")
		}
		close(allIn)
		for range readers + 1 {
			if err := redistest.Recv(t, done, 15*time.Second, "the waiters' end"); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Readers that wait are let in when a writer releases even when the wake registry names a
// writer's client that listens but does nothing (hung), so that the unlock that picks it
// wakes nobody: waiting readers make the release wake every client instead.
func TestWriterUnlockWakesReadersPastHungWriter(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		holder := relocktest.New(t, b)
		held, err := holder.RWLock("hung-writer").Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		reader := relocktest.New(t, b)
		got := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			h, err := reader.RWLock("hung-writer").RLock(ctx)
			if err == nil {
				err = reader.RWLock("hung-writer").RUnlock(h)
			}
			got <- err
		}()
		redistest.Eventually(t, 10*time.Second, "the reader never parked", func() bool { return reader.PubSubStats().Waiting == 1 })
		// A writer's client that registered (its entry counts for a minute more; Redis time
		// is this machine's clock) and listens on its presence channel, and hangs.
		side := b.Client(t)
		redistest.MustDo(t, side, "ZADD", "relock_wake:{hung-writer}", strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10), "4242")
		b.Listen(t, "relock_wake:{hung-writer}:4242")
		if err := holder.RWLock("hung-writer").Unlock(held); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, got, 15*time.Second, "the reader's turn: it was left to its time bound"); err != nil {
			t.Fatal(err)
		}
	})
}

// A first attempt that finds the lock free tells the writers parked on the hold before it
// how long its own lease is, as any acquisition that takes a free lock does, be it a
// writer's or a reader's: here the hold a writer waits behind vanishes without an unlock
// (its key deleted), another client takes the free lock for a 300ms lease that runs out,
// and the waiter must not sleep on the old 30s lease it was told of.
func TestFirstAttemptAnnouncesItsLease(t *testing.T) {
	t.Parallel()
	for _, side := range []string{"write", "read"} {
		t.Run(side, func(t *testing.T) {
			redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
				holder, waiter, newcomer := relocktest.New(t, b), relocktest.New(t, b), relocktest.New(t, b)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if _, err := holder.RWLock("vanish").Lock(ctx, rlock.WithLease(30*time.Second)); err != nil {
					t.Fatal(err)
				}
				next := make(chan error, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					_, err := waiter.RWLock("vanish").Lock(ctx)
					next <- err
				}()
				redistest.Eventually(t, 10*time.Second, "the waiter never parked", func() bool { return waiter.PubSubStats().Waiting == 1 })
				redistest.MustDo(t, b.Client(t), "DEL", "vanish")
				take := newcomer.RWLock("vanish").TryLock
				if side == "read" {
					take = newcomer.RWLock("vanish").TryRLock
				}
				if _, err := take(ctx, rlock.WithLease(300*time.Millisecond)); err != nil {
					t.Fatal(err)
				}
				if err := redistest.Recv(t, next, 10*time.Second, "the waiting writer's Lock after the newcomer's 300ms "+side+" hold: it slept on the old 30s lease"); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// Readers of one client parked behind a write hold that is never released (its fixed lease
// runs out: a crashed writer) all get in when it ends, not one per lease: the channel's
// timer wakes one of them, and a reader that gets the lock wakes the next parked one,
// which may share it (hub.Sub.Took).
func TestReadersFollowEachOtherInWhenAWriteLeaseRunsOut(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const readers = 3
		holder := relocktest.New(t, b)
		if _, err := holder.RWLock("lapsed-writer").Lock(redistest.Context(t, time.Minute), rlock.WithLease(time.Second)); err != nil {
			t.Fatal(err)
		}
		c := relocktest.New(t, b) // 30s watchdog: a reader left to the next lease misses the bound below
		in := make(chan struct{}, readers)
		allIn := make(chan struct{})
		done := make(chan error, readers)
		for range readers {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				h, err := c.RWLock("lapsed-writer").RLock(ctx)
				if err == nil {
					in <- struct{}{}
					select { // they share it: hold it until every reader holds it
					case <-allIn:
					case <-ctx.Done():
					}
					err = c.RWLock("lapsed-writer").RUnlock(h)
				}
				done <- err
			}()
		}
		for range readers {
			redistest.Recv(t, in, 15*time.Second, "every reader in: one was left to the first reader's lease")
		}
		close(allIn)
		for range readers {
			if err := redistest.Recv(t, done, 15*time.Second, "the readers' end"); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A reader that waits registers its client in the lock's reader registry and listens on
// the lock's presence channel for its wake code, relock_wake:{<name>}:<code>, while it
// waits, and its client leaves the registry when its last waiting reader gets in
// (docs/design.md, "One wake-up per release across clients"; lua/wake.lua, settle).
func TestWaitingReaderRegistersUntilItGetsIn(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		holder, c := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		mu := holder.RWLock("present")
		w, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		read := make(chan error, 1)
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			r, err := c.RWLock("present").RLock(relock.NewOwner(rctx))
			if err == nil {
				err = c.RWLock("present").RUnlock(r)
			}
			read <- err
		}()
		redistest.Eventually(t, 10*time.Second, "the reader did not park", func() bool { return c.PubSubStats().Waiting == 1 })
		codes, err := redistest.Do(t, side, "ZRANGE", "relock_wake_readers:{present}", "0", "-1").AsStrSlice()
		if err != nil || len(codes) != 1 {
			t.Fatalf("reader registry while a reader waits: %q %v; want its client's code", codes, err)
		}
		presence := "relock_wake:{present}:" + codes[0]
		if !redistest.Await(10*time.Second, func() bool { return redistest.Subscribers(t, side, "NUMSUB", presence) == 1 }) {
			t.Errorf("after 10s: nobody listens on %s while the reader waits; want its client", presence)
		}
		if err := mu.Unlock(w); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, read, 30*time.Second, "the reader's turn"); err != nil {
			t.Fatalf("reader: %v", err)
		}
		// Its client had no other waiter on the lock: it left the registry as it got in,
		// so that later releases wake one client again rather than every one.
		if n, err := redistest.Do(t, side, "ZCARD", "relock_wake_readers:{present}").AsInt64(); err != nil || n != 0 {
			t.Errorf("reader registry after its only waiting reader got in: %d entries %v; want none", n, err)
		}
	})
}

// A woken writer that gets the lock while other writers of its client still wait keeps its
// client in the wake registry, at the back (docs/design.md, "Staying registered"), so
// that a later release wakes that client again by its code rather than leaving its
// writers to their time bound when another client is picked first.
func TestWokenWriterKeepsItsClientRegistered(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		holder, c := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		h, err := holder.RWLock("stay").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan context.Context, 2)
		release := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				mu := c.RWLock("stay")
				w, err := mu.Lock(relock.NewOwner(wctx))
				if err != nil {
					t.Errorf("writer: %v", err)
					return
				}
				got <- w
				<-release
				if err := mu.Unlock(w); err != nil {
					t.Errorf("writer's unlock: %v", err)
				}
			}()
		}
		defer wg.Wait()
		defer close(release)
		redistest.Eventually(t, 10*time.Second, "the writers did not park", func() bool { return c.PubSubStats().Waiting == 2 })
		codes, err := redistest.Do(t, side, "ZRANGE", "relock_wake:{stay}", "0", "-1").AsStrSlice()
		if err != nil || len(codes) != 1 {
			t.Fatalf("wake registry while two writers of one client wait: %q %v; want its code", codes, err)
		}
		if err := holder.RWLock("stay").Unlock(h); err != nil {
			t.Fatal(err)
		}
		redistest.Recv(t, got, 30*time.Second, "the first writer's turn")
		after, err := redistest.Do(t, side, "ZRANGE", "relock_wake:{stay}", "0", "-1").AsStrSlice()
		if err != nil || len(after) != 1 || after[0] != codes[0] {
			t.Errorf("wake registry once one of the client's two writers got in: %q %v; want %q, the other still waits", after, err, codes[0])
		}
	})
}
