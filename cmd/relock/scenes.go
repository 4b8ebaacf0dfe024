package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/rlock"
)

// keepAlive shows the watchdog: a hold kept for several lease periods never lapses.
func keepAlive(ctx context.Context, env *demoEnv, out io.Writer) error {
	const name, lease, hold = "relock-demo:report", time.Second, 3500 * time.Millisecond
	c, err := env.client(0, relock.WithWatchdogTimeout(lease))
	if err != nil {
		return err
	}
	heading(out, "watchdog", "lock %q is taken with a %v lease and kept for %v.", name, lease, hold)
	step := newSteps(out)
	mu := c.Lock(name)
	held, err := mu.Lock(ctx)
	if err != nil {
		return err
	}
	step.printf("took the lock; its lease runs out in %v unless renewed", lease)
	lowest := lease
	taken, periods := time.Now(), 0
	for end := taken.Add(hold); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		ms, err := env.side.Do(ctx, env.side.B().Pttl().Key(name).Build()).AsInt64()
		if err != nil {
			return err
		}
		if ms <= 0 {
			return fmt.Errorf("the hold of %q lapsed while held (PTTL %d)", name, ms)
		}
		lowest = min(lowest, time.Duration(ms)*time.Millisecond)
		if n := int(time.Since(taken) / lease); n > periods {
			periods = n
			step.printf("held %d× the lease; %v of it left, %d renewals so far",
				n, (time.Duration(ms) * time.Millisecond).Round(time.Millisecond), c.WatchdogStats().Renewed)
		}
	}
	st, live := c.WatchdogStats(), held.Err() == nil
	if err := mu.Unlock(held); err != nil {
		return err
	}
	step.printf("unlocked")
	if !live {
		return fmt.Errorf("the hold's context ended while held: %v", context.Cause(held))
	}
	fmt.Fprintf(out, "held            %v on a %v lease without lapsing, then unlocked\n", hold, lease)
	fmt.Fprintf(out, "renewals        %d in %d rounds, %d script calls; lowest remaining lease seen %v\n",
		st.Renewed, st.Ticks, st.Calls, lowest.Round(time.Millisecond))
	return nil
}

// loseLease shows lease loss and fencing: the lock's key is deleted behind its holder's
// back; the holder's context ends with ErrLeaseLost, another owner takes the lock with a
// higher fencing token, and the resource turns away the stale holder's late write.
func loseLease(ctx context.Context, env *demoEnv, out io.Writer) error {
	const name = "relock-demo:ledger"
	a, err := env.client(0, relock.WithWatchdogTimeout(time.Second))
	if err != nil {
		return err
	}
	b, err := env.client(1)
	if err != nil {
		return err
	}
	heading(out, "lease loss and fencing", "worker A holds fenced lock %q; its key is then deleted behind its back.", name)
	var ledger fencedLedger
	step := newSteps(out)

	stale, staleToken, err := ledger.lockAndWrite(ctx, a, name, "A: first entry")
	if err != nil {
		return err
	}
	step.printf("A holds the lock with token %d and writes its first entry", staleToken)
	deleted := time.Now()
	if err := env.side.Do(ctx, env.side.B().Del().Key(name).Build()).Error(); err != nil {
		return err
	}
	step.printf("the lock's key is deleted behind A's back; A's watchdog has yet to notice")
	select {
	case <-stale.Done():
	case <-time.After(5 * time.Second):
		return errors.New("the holder was not told its lease was lost")
	}
	noticed := time.Since(deleted)
	step.printf("A's watchdog found the key gone: A's context ends")

	fresh, freshToken, err := ledger.lockAndWrite(ctx, b, name, "B: second entry")
	if err != nil {
		return err
	}
	step.printf("B takes the free lock with token %d and writes", freshToken)
	lateErr := ledger.write(staleToken, "A: late entry")
	step.printf("A, had it not looked at its context, writes late with token %d", staleToken)
	fmt.Fprintf(out, "A's context     ended %v after the delete, cause: %v\n",
		noticed.Round(time.Millisecond), context.Cause(stale))
	fmt.Fprintf(out, "B acquired      token %d (A had %d); B's write accepted\n", freshToken, staleToken)
	fmt.Fprintf(out, "A writes late   with token %d: %v\n", staleToken, lateErr)
	fmt.Fprintf(out, "ledger          %q\n", ledger.entries)
	if err := a.Lock(name).Unlock(stale); !errors.Is(err, relock.ErrNotHeld) {
		return fmt.Errorf("worker A's unlock after losing the lease: %v (want ErrNotHeld)", err)
	}
	if lateErr == nil {
		return errors.New("the fenced ledger accepted a stale write")
	}
	return b.Lock(name).Unlock(fresh)
}

// fencedLedger is the resource a fenced lock guards: it accepts a write only with a token
// at least as high as any it has accepted before. In a real system this check lives with
// the data: a conditional update in the database, a compare in the storage service.
type fencedLedger struct {
	mu      sync.Mutex
	last    int64
	entries []string
}

func (l *fencedLedger) write(token int64, entry string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if token < l.last {
		return fmt.Errorf("rejected: token %d is older than %d", token, l.last)
	}
	l.last = token
	l.entries = append(l.entries, entry)
	return nil
}

// lockAndWrite takes the fenced lock name on c and writes entry with the hold's token.
func (l *fencedLedger) lockAndWrite(ctx context.Context, c *relock.Client, name, entry string) (held context.Context, token int64, err error) {
	if held, err = c.Lock(name, rlock.WithFencing()).Lock(ctx); err != nil {
		return nil, 0, err
	}
	token, _ = c.Lock(name).Token(held)
	return held, token, l.write(token, entry)
}

// fairOrder shows the fair lock named name: workers queue in a known order while the lock
// is held, and are granted it in exactly that order. It watches the queue through the
// lock's key names, so it works on any valid name, one with a hash tag of its own too.
func fairOrder(ctx context.Context, env *demoEnv, name string, out io.Writer) error {
	const workers = 6
	clients, err := env.pair()
	if err != nil {
		return err
	}
	heading(out, "fair lock", "%d workers on 2 clients queue for fair lock %q one after another while it is held.", workers, name)
	step := newSteps(out)
	holder, err := clients[0].FairLock(name).Lock(ctx)
	if err != nil {
		return err
	}
	step.printf("the lock is held; the workers arrive one at a time")
	queueKey := keys.Of(name).Queue
	var (
		mu      sync.Mutex
		granted []int
	)
	// The first error ends the other workers' waits: they need not stay queued for it.
	g, gctx := errgroup.WithContext(ctx)
	arrived := make([]int, 0, workers)
	for w := 0; w < workers; w++ {
		lock := clients[w%2].FairLock(name)
		g.Go(func() error {
			held, err := lock.Lock(gctx)
			if err != nil {
				return err
			}
			mu.Lock()
			granted = append(granted, w)
			mu.Unlock()
			step.printf("worker %d granted the lock", w)
			return lock.Unlock(held)
		})
		// Let each worker take its place before the next one arrives.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			n, err := env.side.Do(ctx, env.side.B().Llen().Key(queueKey).Build()).AsInt64()
			if err != nil {
				return err
			}
			if n == int64(w+1) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("worker %d did not join the queue", w)
			}
		}
		arrived = append(arrived, w)
		step.printf("worker %d queued, %d in the queue", w, w+1)
	}
	step.printf("the holder unlocks")
	if err := clients[0].FairLock(name).Unlock(holder); err != nil {
		return err
	}
	if err := g.Wait(); err != nil {
		return err
	}
	fmt.Fprintf(out, "arrival order   %v\n", arrived)
	fmt.Fprintf(out, "grant order     %v\n", granted)
	if fmt.Sprint(arrived) != fmt.Sprint(granted) {
		return errors.New("the fair lock granted out of arrival order")
	}
	msgs := clients[0].PubSubStats().Messages + clients[1].PubSubStats().Messages
	fmt.Fprintf(out, "wake-ups        %d messages for the %d unlocks that had a waiter behind them\n", msgs, workers)
	return nil
}

// readWrite shows the read-write lock: readers share it, a writer has it alone.
func readWrite(ctx context.Context, env *demoEnv, out io.Writer) error {
	const name, readers = "relock-demo:config", 6
	clients, err := env.pair()
	if err != nil {
		return err
	}
	heading(out, "read-write lock", "%d readers on 2 clients and one writer use read-write lock %q.", readers, name)
	var inside, most atomic.Int32
	var overlapped atomic.Bool
	var writerInside atomic.Bool
	release := make(chan struct{})
	step := newSteps(out)
	var g errgroup.Group
	for r := 0; r < readers; r++ {
		mu := clients[r%2].RWLock(name)
		g.Go(func() error {
			held, err := mu.RLock(ctx)
			if err != nil {
				return err
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if writerInside.Load() {
				overlapped.Store(true)
			}
			step.printf("reader %d in", r)
			<-release
			inside.Add(-1)
			return mu.RUnlock(held)
		})
	}
	for deadline := time.Now().Add(5 * time.Second); inside.Load() < readers; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			return errors.New("the readers did not all get in")
		}
	}
	step.printf("all %d readers inside at once; the writer asks for the lock", readers)
	writerDone := make(chan error, 1)
	var waited time.Duration
	go func() {
		start := time.Now()
		err := clients[0].RWLock(name).Do(ctx, func(context.Context) error {
			waited = time.Since(start)
			writerInside.Store(true)
			if n := inside.Load(); n != 0 {
				overlapped.Store(true)
			}
			step.printf("the writer is in, alone")
			writerInside.Store(false)
			return nil
		})
		writerDone <- err
	}()
	time.Sleep(200 * time.Millisecond) // the writer waits behind the readers meanwhile
	step.printf("the writer still waits; the readers leave")
	close(release)
	if err := g.Wait(); err != nil {
		return err
	}
	if err := <-writerDone; err != nil {
		return err
	}
	fmt.Fprintf(out, "readers         %d inside at once\n", most.Load())
	fmt.Fprintf(out, "writer          waited %v for the readers to leave, then was alone: %v\n",
		waited.Round(time.Millisecond), !overlapped.Load())
	if overlapped.Load() {
		return errors.New("the writer shared the lock")
	}
	return nil
}

// permitsScene shows the semaphore: workers on two clients share a few permits, never
// more of them inside at once than there are permits, and a request for every permit,
// made while small requests keep coming, is served in its turn rather than starved.
func permitsScene(ctx context.Context, env *demoEnv, out io.Writer) error {
	const name, permits, workers, rounds = "relock-demo:builds", 3, 6, 4
	clients, err := env.pair()
	if err != nil {
		return err
	}
	heading(out, "semaphore", "%d workers on 2 clients share semaphore %q of %d permits; then one asks for all %d.", workers, name, permits, permits)
	set, err := clients[0].Semaphore(name).TrySetPermits(ctx, permits)
	if err != nil {
		return err
	}
	if !set {
		// Somebody's semaphore (or a count left by a demo that was killed): not the
		// demo's to count with, nor to delete.
		return fmt.Errorf("semaphore %q already has a count; the demo leaves it as it is (delete the key to run this scene)", name)
	}
	// The key is the demo's from here: it goes when the scene ends, however it ends.
	defer env.side.Do(context.WithoutCancel(ctx), env.side.B().Del().Key(name).Build())
	step := newSteps(out)
	step.printf("%d permits set; %d workers start taking one at a time", permits, workers)
	var inside, most atomic.Int32
	var bigDone atomic.Bool
	var after atomic.Int32 // small acquisitions that began after the large request and finished before it
	var bigAsked atomic.Bool
	use := func(s interface {
		Acquire(context.Context, int64) error
		Release(context.Context, int64) error
	}, n int64) error {
		if err := s.Acquire(ctx, n); err != nil {
			return err
		}
		now := inside.Add(int32(n))
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		inside.Add(-int32(n))
		return s.Release(ctx, n)
	}
	var g errgroup.Group
	for w := 0; w < workers; w++ {
		s := clients[w%2].Semaphore(name)
		g.Go(func() error {
			for r := 0; r < rounds; r++ {
				asked := bigAsked.Load()
				if err := use(s, 1); err != nil {
					return err
				}
				if asked && !bigDone.Load() {
					after.Add(1)
				}
			}
			return nil
		})
	}
	time.Sleep(30 * time.Millisecond)
	step.printf("the small requests are flowing; a request for all %d permits joins them", permits)
	bigAsked.Store(true)
	start := time.Now()
	if err := use(clients[1].Semaphore(name), permits); err != nil {
		return err
	}
	bigDone.Store(true)
	waited := time.Since(start)
	step.printf("the request for %d permits was served", permits)
	if err := g.Wait(); err != nil {
		return err
	}
	left, err := clients[0].Semaphore(name).AvailablePermits(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "permits         at most %d of %d in use at once; %d available at the end\n", most.Load(), permits, left)
	fmt.Fprintf(out, "large request   served in its turn, after %v; %d small requests made after it got in before it\n", waited.Round(time.Millisecond), after.Load())
	switch {
	case most.Load() > permits:
		return fmt.Errorf("%d permits were in use at once, of %d", most.Load(), permits)
	case left != permits:
		return fmt.Errorf("%d permits available at the end, want %d", left, permits)
	}
	return nil
}
