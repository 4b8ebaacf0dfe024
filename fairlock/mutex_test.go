package fairlock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv("RELOCK_FAIR_WORKER"); addr != "" {
		os.Exit(worker(addr, os.Getenv("RELOCK_FAIR_NAME")))
	}
	// Main also stops the Redis Cluster the "cluster" subtests share, and checks for leaked goroutines.
	os.Exit(redistest.Main(m))
}

// worker is a separate process that queues for a fair lock and then waits to be killed.
// addr is one server's address or, for a cluster, its nodes' addresses joined by commas.
func worker(addr, name string) int {
	addrs := strings.Split(addr, ",")
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true, ForceSingleClient: len(addrs) == 1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := relock.New(rc)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("RELOCK_FAIR_GATED") != "" {
		_, _ = io.Copy(io.Discard, os.Stdin) // connected; queue when the test closes stdin
	}
	_, err = c.FairLock(name, fairlock.WithRefreshPeriod(workerRefresh)).Lock(context.Background())
	fmt.Fprintln(os.Stderr, "worker acquired, which it should not have before being killed:", err)
	return 3
}

// workerRefresh is the refresh period of a worker process's waiter.
const workerRefresh = 200 * time.Millisecond

// waiterProcess is a worker process (see worker) queued, or about to be, for a fair lock.
// Killed, it leaves its queue entry behind, as a crashed process does.
type waiterProcess struct {
	cmd    *exec.Cmd
	gate   io.WriteCloser  // the process's stdin, when gated
	stderr strings.Builder // read once the process has exited
	exited chan struct{}
}

// startWaiterProcess starts a worker process that queues for the fair lock name on b; a
// gated one connects and waits for open before it asks for the lock. It is killed at t's
// cleanup if the test has not killed it.
func startWaiterProcess(t *testing.T, b *redistest.Backend, name string, gated bool) *waiterProcess {
	t.Helper()
	addr := b.Addr
	if b.Cluster != nil {
		addr = strings.Join(b.Cluster.Addrs(), ",")
	}
	w := &waiterProcess{cmd: exec.Command(os.Args[0], "-test.run=^$"), exited: make(chan struct{})}
	w.cmd.Env = append(os.Environ(), "RELOCK_FAIR_WORKER="+addr, "RELOCK_FAIR_NAME="+name)
	w.cmd.Stderr = &w.stderr
	if gated {
		w.cmd.Env = append(w.cmd.Env, "RELOCK_FAIR_GATED=1")
		var err error
		if w.gate, err = w.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = w.cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() { w.kill(t) })
	return w
}

// open lets a gated process ask for the lock.
func (w *waiterProcess) open() { _ = w.gate.Close() }

// kill kills the process (SIGKILL: it leaves nothing) if it still runs, waits for it to
// exit, and reports whether it had acquired the lock.
func (w *waiterProcess) kill(t testing.TB) (acquired bool) {
	t.Helper()
	_ = w.cmd.Process.Kill()
	redistest.Recv(t, w.exited, 10*time.Second, "the worker process's exit")
	return strings.Contains(w.stderr.String(), "acquired")
}

// wakeCounter counts the wake-up messages published on a lock's waiter channels.
//
// On a cluster the wake-ups go by SPUBLISH, and sharded pub/sub has no pattern
// subscription: the count is then the SPUBLISH calls on the master of the lock's slot
// (the test has the cluster to itself, so they are all the lock's).
func wakeCounter(t *testing.T, b *redistest.Backend, name string) func() int64 {
	t.Helper()
	if b.Cluster != nil {
		master := b.Cluster.MasterOf(b.Cluster.Slot(name))
		base := master.CommandStats(t)["spublish"]
		return func() int64 { return master.CommandStats(t)["spublish"] - base }
	}
	var n atomic.Int64
	dc, cancel := b.Client(t).Dedicate()
	t.Cleanup(cancel)
	subscribed := make(chan struct{})
	var once sync.Once
	dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) {
			// Unlock wake-ups only: a waiter that came while it was another's turn is also
			// told (with another message) when that turn is taken.
			if m.Message == "0" {
				n.Add(1)
			}
		},
		OnSubscription: func(rueidis.PubSubSubscription) { once.Do(func() { close(subscribed) }) },
	})
	if err := dc.Do(context.Background(), dc.B().Psubscribe().Pattern("redisson_lock__channel:{"+name+"}:*").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	redistest.Recv(t, subscribed, 10*time.Second, "the subscription's confirmation")
	return n.Load
}

// 32 waiters on 2 clients, each confirmed in the queue before the next arrives, acquire in
// exactly that order; 32 rounds in shuffled orders make over 1,000 acquisitions. Each
// unlock with someone waiting sends exactly one wake-up message.
func TestFIFO(t *testing.T) {
	t.Parallel()
	const waiters, rounds = 32, 32
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		clients := []*relock.Client{relocktest.New(t, b), relocktest.New(t, b)}
		side := b.Client(t)
		wakes := wakeCounter(t, b, "fifo")
		violations, acquisitions := 0, 0
		for r := 0; r < rounds; r++ {
			holder, err := clients[0].FairLock("fifo").Lock(redistest.Context(t, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			arrival := rand.Perm(waiters)
			var (
				mu    sync.Mutex
				order []int
				wg    sync.WaitGroup
			)
			for pos, w := range arrival {
				lock := clients[w%2].FairLock("fifo")
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					held, err := lock.Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					order = append(order, w) // guarded by the lock itself
					if err := lock.Unlock(held); err != nil {
						t.Error(err)
					}
				}()
				redistest.Eventually(t, 10*time.Second, "waiter not queued", func() bool { return len(redistest.FairQueue(t, side, "fifo")) == pos+1 })
			}
			before := wakes()
			if err := clients[0].FairLock("fifo").Unlock(holder); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			mu.Lock()
			for i, w := range order {
				if w != arrival[i] {
					violations++
				}
			}
			acquisitions += len(order)
			mu.Unlock()
			// The holder's unlock and every waiter's but the last had someone to wake.
			redistest.Eventually(t, 5*time.Second, "wake-up messages missing", func() bool { return wakes()-before >= waiters })
			time.Sleep(20 * time.Millisecond)
			got := wakes() - before
			// On a cluster the count is of SPUBLISH calls, which include the notice to the
			// next waiter when a waiter takes its turn (one per acquisition from the queue).
			if b.Cluster == nil && got != waiters || b.Cluster != nil && (got < waiters || got > 2*waiters) {
				t.Fatalf("round %d: %d wake-up messages for %d unlocks with a waiter; want exactly one each", r, got, waiters)
			}
		}
		t.Logf("%d acquisitions, %d order violations", acquisitions, violations)
		if acquisitions < 1000 || violations != 0 {
			t.Errorf("%d acquisitions with %d order violations; want >= 1000 and 0", acquisitions, violations)
		}
	})
}

// A waiter whose ctx ends is gone from the queue and the deadline set at once; the others
// keep their order and get the lock.
func TestCancelledWaiterLeaves(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		holder, err := c.FairLock("leaving").Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		type waiter struct {
			cancel context.CancelFunc
			done   chan error
		}
		var ws []waiter
		for i := 0; i < 3; i++ {
			ctx, cancel := context.WithCancel(redistest.Context(t, time.Minute))
			done := make(chan error, 1)
			go func() {
				held, err := c.FairLock("leaving").Lock(ctx)
				if err == nil {
					err = c.FairLock("leaving").Unlock(held)
				}
				done <- err
			}()
			ws = append(ws, waiter{cancel, done})
			redistest.Eventually(t, 5*time.Second, "waiter not queued", func() bool { return len(redistest.FairQueue(t, side, "leaving")) == i+1 })
		}
		q := redistest.FairQueue(t, side, "leaving")
		ws[1].cancel()
		if err := redistest.Recv(t, ws[1].done, 10*time.Second, "the cancelled waiter's return"); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v", err)
		}
		after := redistest.FairQueue(t, side, "leaving")
		if len(after) != 2 || after[0] != q[0] || after[1] != q[2] {
			t.Fatalf("queue after the cancel = %v; want %v without its middle", after, q)
		}
		if n, _ := redistest.Do(t, side, "ZSCORE", "redisson_lock_timeout:{leaving}", q[1]).ToString(); n != "" {
			t.Errorf("the cancelled waiter's deadline is still in the zset: %s", n)
		}
		if err := c.FairLock("leaving").Unlock(holder); err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, 2} {
			if err := redistest.Recv(t, ws[i].done, 30*time.Second, "a waiter's turn"); err != nil {
				t.Errorf("waiter %d: %v", i, err)
			}
			ws[i].cancel()
		}
	})
}

// A live waiter that waits three times the eviction period (two refresh periods) stays in
// place and acquires in its turn.
func TestLiveWaiterNeverEvicted(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const refresh = time.Second // the patient waiter's: its entry lives 2s
		c := relocktest.New(t, b)
		side := b.Client(t)
		mu := c.FairLock("patient", fairlock.WithRefreshPeriod(refresh))
		holder, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		granted := make(chan string, 2)
		// The waiters are done before the test ends: cleanups run last first, so their
		// context has ended by then.
		var waiters sync.WaitGroup
		t.Cleanup(waiters.Wait)
		ctx := redistest.Context(t, 20*time.Second)
		queueUp := func(who string, m *fairlock.Mutex) {
			waiters.Add(1)
			go func() {
				defer waiters.Done()
				held, err := m.Lock(ctx)
				if err != nil {
					t.Errorf("%s waiter: %v", who, err)
					granted <- who + " failed"
					return
				}
				granted <- who
				_ = m.Unlock(held)
			}()
		}
		queueUp("patient", mu)
		redistest.Eventually(t, 5*time.Second, "patient waiter not queued", func() bool { return len(redistest.FairQueue(t, side, "patient")) == 1 })
		patient := redistest.FairQueue(t, side, "patient")[0]
		// A second waiter, with the default 5s refresh, behind it. Were the patient one
		// evicted, its next refresh would queue it anew, behind this one.
		queueUp("late", c.FairLock("patient"))
		redistest.Eventually(t, 5*time.Second, "late waiter not queued", func() bool { return len(redistest.FairQueue(t, side, "patient")) == 2 })
		late := redistest.FairQueue(t, side, "patient")[1]
		time.Sleep(3 * 2 * refresh)
		if q := redistest.FairQueue(t, side, "patient"); len(q) != 2 || q[0] != patient || q[1] != late {
			t.Fatalf("after three eviction periods the queue is %v; want [%s %s]", q, patient, late)
		}
		if err := mu.Unlock(holder); err != nil {
			t.Fatal(err)
		}
		if first, second := redistest.Recv(t, granted, 30*time.Second, "the first grant"), redistest.Recv(t, granted, 30*time.Second, "the second grant"); first != "patient" || second != "late" {
			t.Fatalf("granted to %s, then %s; want the patient waiter first", first, second)
		}
	})
}

// A waiter process killed with SIGKILL while queued: the waiters behind it acquire within
// two refresh periods of the holder's unlock.
func TestKilledWaiterSkipped(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const refresh = workerRefresh
		c := relocktest.New(t, b)
		side := b.Client(t)
		holder, err := c.FairLock("killed").Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		w := startWaiterProcess(t, b, "killed", false)
		redistest.Eventually(t, 10*time.Second, "worker process not queued", func() bool { return len(redistest.FairQueue(t, side, "killed")) == 1 })
		// The waiter behind keeps the default refresh period of 5s: it must not need its
		// own refresh to notice that the dead waiter's turn has passed.
		behind := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := c.FairLock("killed").Lock(ctx)
			behind <- err
		}()
		redistest.Eventually(t, 5*time.Second, "second waiter not queued", func() bool { return len(redistest.FairQueue(t, side, "killed")) == 2 })
		if w.kill(t) {
			t.Fatalf("worker: %s", w.stderr.String())
		}
		unlocked := time.Now()
		if err := c.FairLock("killed").Unlock(holder); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, behind, 30*time.Second, "the waiter behind the killed one"); err != nil {
			t.Fatalf("waiter behind the killed one: %v", err)
		}
		took := time.Since(unlocked)
		t.Logf("the waiter behind the killed one acquired %v after the unlock (the killed one's refresh period %v)", took.Round(time.Millisecond), refresh)
		// Two refresh periods, plus slack for a loaded machine; well short of the 5s
		// the waiter behind would sleep if only its own refresh brought it back.
		if took > 2*refresh+time.Second {
			t.Errorf("acquired %v after the unlock; want within two refresh periods", took)
		}
	})
}

// Redis restarted without persistence while waiters are queued: nobody hangs; all acquire.
func TestRestartWithWaiters(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		if _, err := c.FairLock("restart").Lock(redistest.Context(t, time.Minute), rlock.WithLease(time.Minute)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var acquired atomic.Int32
		for i := 0; i < 5; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				mu := c.FairLock("restart", fairlock.WithRefreshPeriod(300*time.Millisecond))
				held, err := mu.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				acquired.Add(1)
				if err := mu.Unlock(held); err != nil {
					t.Error(err)
				}
			}()
		}
		redistest.Eventually(t, 5*time.Second, "waiters not queued", func() bool { return len(redistest.FairQueue(t, side, "restart")) == 5 })
		b.Server.Restart(t)
		wg.Wait()
		if n := acquired.Load(); n != 5 {
			t.Errorf("%d of 5 waiters acquired after the restart", n)
		}
	})
}

// When everything is released no key of the lock is left: not the lock, not the queue,
// not the deadlines, and no unlock leaves a key of its own (relock writes no unlock latch).
func TestNoKeysLeft(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mu := c.FairLock("tidy", rlock.WithFencing())
				for j := 0; j < 5; j++ {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					held, err := mu.Lock(ctx)
					if err == nil {
						err = mu.Unlock(held)
					}
					cancel()
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		// A waiter that gives up midway must not leave anything either.
		holder, err := c.FairLock("tidy").Lock(redistest.Context(t, time.Minute))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			_, _ = c.FairLock("tidy").Lock(relock.NewOwner(ctx))
			cancel()
			err = c.FairLock("tidy").Unlock(holder)
		}
		if err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		scan := func() []string {
			var left []string
			for _, k := range b.Keys(t, side, "*tidy*") {
				if k != "redisson_lock_token:{tidy}" { // the fencing counter never expires, by design
					left = append(left, k)
				}
			}
			return left
		}
		for _, k := range scan() {
			t.Errorf("key %q left after everything was released", k)
		}
	})
}

func TestBadInput(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, 30*time.Second)
		if _, err := c.FairLock("").Lock(ctx); !errors.Is(err, relock.ErrInvalidName) {
			t.Errorf("empty name: %v", err)
		}
		if _, err := c.FairLock("a}b").TryLock(ctx); !errors.Is(err, relock.ErrInvalidName) {
			t.Errorf("name a}b: %v", err)
		}
		if _, err := c.FairLock("x").Lock(ctx, rlock.WithLease(0)); !errors.Is(err, relock.ErrInvalidLease) {
			t.Errorf("zero lease: %v", err)
		}
		if _, err := c.FairLock("x", fairlock.WithRefreshPeriod(time.Millisecond)).Lock(ctx); !errors.Is(err, relock.ErrInvalidOption) {
			t.Errorf("1ms refresh period: %v", err)
		}
		if err := redistest.Do(t, side, "SET", "foreign", "precious").Error(); err != nil {
			t.Fatal(err)
		}
		mu := c.FairLock("foreign")
		if _, err := mu.Lock(ctx); !errors.Is(err, relock.ErrWrongType) {
			t.Errorf("Lock on a string: %v", err)
		}
		if _, err := mu.ForceUnlock(ctx); !errors.Is(err, relock.ErrWrongType) {
			t.Errorf("ForceUnlock on a string: %v", err)
		}
		if v, _ := redistest.Do(t, side, "GET", "foreign").ToString(); v != "precious" {
			t.Errorf("the string became %q", v)
		}
		if err := mu.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock with no owner: %v", err)
		}
		c.Close()
		if _, err := c.FairLock("x").Lock(ctx); !errors.Is(err, relock.ErrClosed) {
			t.Errorf("Lock after Close: %v", err)
		}
	})
}

// The fair lock holds like an rlock: re-entry, the watchdog, lease loss and fencing.
func TestHoldsLikeRLock(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(1500*time.Millisecond))
		side := b.Client(t)
		mu := c.FairLock("held", rlock.WithFencing())
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		tok, ok := mu.Token(held)
		if held, err = mu.Lock(held); err != nil {
			t.Fatal(err)
		}
		if n, _ := mu.HoldCount(held); n != 2 {
			t.Errorf("HoldCount = %d; want 2", n)
		}
		if tok2, _ := mu.Token(held); !ok || tok2 != tok {
			t.Errorf("tokens %d, %d (ok %v); want one token kept by the re-entry", tok, tok2, ok)
		}
		time.Sleep(2500 * time.Millisecond) // longer than the lease: the watchdog keeps it
		if held.Err() != nil {
			t.Fatalf("hold lost while renewed: %v", context.Cause(held))
		}
		redistest.Do(t, side, "DEL", "held")
		select {
		case <-held.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("lease loss not signalled")
		}
		if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
			t.Errorf("cause %v; want ErrLeaseLost", context.Cause(held))
		}
		// The next first-level hold's token is newer than every one before it.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		next, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tok3, ok3 := mu.Token(next); !ok || !ok3 || tok < 1 || tok3 <= tok {
			t.Errorf("tokens %d (ok %v) then %d (ok %v) for the next hold; want them positive and increasing", tok, ok, tok3, ok3)
		}
		if err := mu.Unlock(next); err != nil {
			t.Fatal(err)
		}
	})
}

// A parked waiter costs one small command per refresh period, and nothing else: it
// refreshes its queue entry, it does not poll.
func TestWaiterRefreshCost(t *testing.T) {
	t.Parallel()
	redistest.RealWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const refresh = 300 * time.Millisecond
		c := relocktest.New(t, b)
		stats := b.Commands(t)
		if _, err := c.FairLock("costly").Lock(redistest.Context(t, time.Minute), rlock.WithLease(time.Minute)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(redistest.Context(t, time.Minute))
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := c.FairLock("costly", fairlock.WithRefreshPeriod(refresh)).Lock(relock.NewOwner(ctx))
			done <- err
		}()
		redistest.Eventually(t, 5*time.Second, "waiter not parked", func() bool { return c.PubSubStats().Waiting == 1 })
		before, start := stats.Calls(t), time.Now()
		time.Sleep(10 * refresh)
		after, elapsed := stats.Calls(t), time.Since(start)
		cancel()
		if err := redistest.Recv(t, done, 10*time.Second, "the cancelled waiter's return"); !errors.Is(err, context.Canceled) {
			t.Errorf("waiter: %v; want context.Canceled", err)
		}
		// INFO commandstats counts the commands scripts run too, and the connections'
		// PINGs and the replicas' REPLCONFs: what the client sent is the script calls.
		calls := after["evalsha"] + after["eval"] - before["evalsha"] - before["eval"]
		periods := int64(elapsed / refresh)
		t.Logf("%d script calls in %v (%d refresh periods)", calls, elapsed.Round(time.Millisecond), periods)
		if calls < 1 {
			t.Errorf("the waiter never refreshed its entry in %d periods", periods)
		}
		if calls > periods+1 {
			t.Errorf("%d script calls in %d refresh periods; want one per period at most", calls, periods)
		}
	})
}

// ForceUnlock frees the lock whoever holds it and wakes the next waiter by its message,
// not by its time bound; the hold that was removed learns it lost its lease.
func TestForceUnlockWakesNext(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		holderClient := relocktest.New(t, b, relock.WithWatchdogTimeout(1500*time.Millisecond))
		waiterClient := relocktest.New(t, b)
		side := b.Client(t)
		held, err := holderClient.FairLock("forced").Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			mu := waiterClient.FairLock("forced")
			h, err := mu.Lock(ctx)
			if err == nil {
				err = mu.Unlock(h)
			}
			done <- err
		}()
		redistest.Eventually(t, 5*time.Second, "waiter not parked", func() bool {
			return waiterClient.PubSubStats().Waiting == 1 && len(redistest.FairQueue(t, side, "forced")) == 1
		})
		if ok, err := relocktest.New(t, b).FairLock("forced").ForceUnlock(context.Background()); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v; want true", ok, err)
		}
		if err := redistest.Recv(t, done, 30*time.Second, "the waiter after ForceUnlock"); err != nil {
			t.Fatalf("waiter after ForceUnlock: %v", err)
		}
		if st := waiterClient.PubSubStats(); st.Woken != 1 || st.TimedOut != 0 {
			t.Errorf("waiter's hub %+v; want one wake-up by message and none by time", st)
		}
		select {
		case <-held.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the forced-out hold did not learn of its loss")
		}
		if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
			t.Errorf("forced-out hold: cause %v; want ErrLeaseLost", context.Cause(held))
		}
	})
}

// A free lock goes to the head of the queue, not to whoever asks first: with the lock
// freed behind everyone's back (no wake-up sent), a newcomer's TryLock fails and its Lock
// queues behind the waiter that was there first.
func TestNoQueueJumping(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		if _, err := c.FairLock("orderly").Lock(redistest.Context(t, time.Minute), rlock.WithLease(time.Minute)); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []string
		// The first waiter keeps the lock until release is closed: should it take the
		// freed lock (a refresh of its place may come at any time), the newcomer must
		// still find it taken.
		release := make(chan struct{})
		run := func(who string, refresh time.Duration, keep <-chan struct{}) chan error {
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				lock := c.FairLock("orderly", fairlock.WithRefreshPeriod(refresh))
				held, err := lock.Lock(ctx)
				if err == nil {
					mu.Lock()
					order = append(order, who)
					mu.Unlock()
					select {
					case <-keep:
					case <-ctx.Done():
					}
					err = lock.Unlock(held)
				}
				done <- err
			}()
			return done
		}
		first := run("first", 300*time.Millisecond, release)
		redistest.Eventually(t, 5*time.Second, "first waiter not queued", func() bool { return len(redistest.FairQueue(t, side, "orderly")) == 1 })
		redistest.Do(t, side, "DEL", "orderly") // free, and nobody told

		if _, err := c.FairLock("orderly").TryLock(context.Background()); !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("TryLock on a free lock with a waiter queued: %v; want ErrLocked", err)
		}
		done := make(chan struct{})
		close(done)
		second := run("second", time.Second, done)
		redistest.Eventually(t, 5*time.Second, "second waiter not queued", func() bool {
			mu.Lock()
			acquired := len(order)
			mu.Unlock()
			return len(redistest.FairQueue(t, side, "orderly"))+acquired == 2
		})
		close(release)
		for _, d := range []chan error{first, second} {
			if err := redistest.Recv(t, d, 30*time.Second, "a waiter's turn"); err != nil {
				t.Fatal(err)
			}
		}
		if len(order) != 2 || order[0] != "first" {
			t.Errorf("order %v; want the queued waiter first", order)
		}
	})
}

// A queued waiter that takes its turn and never unlocks (a fixed lease, a crash) does not
// stall the waiter behind it: that one was told to sleep until the previous hold's lease
// ran out, and is told again when the turn is taken, so it acquires when the new hold's
// lease ends, not at the old lease's end or its own next refresh.
func TestTurnTakenTellsTheNextWaiter(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const (
			lease = 2 * time.Second // the first waiter's hold, never unlocked
			long  = time.Minute     // the holder's lease and both waiters' refresh period
		)
		c := relocktest.New(t, b)
		side := b.Client(t)
		holder, err := c.FairLock("taken").Lock(redistest.Context(t, time.Minute), rlock.WithLease(long))
		if err != nil {
			t.Fatal(err)
		}
		first := make(chan error, 1)
		go func() {
			_, err := c.FairLock("taken", fairlock.WithRefreshPeriod(long)).Lock(redistest.Context(t, time.Minute), rlock.WithLease(lease))
			first <- err
		}()
		redistest.Eventually(t, 10*time.Second, "first waiter not queued", func() bool { return len(redistest.FairQueue(t, side, "taken")) == 1 })
		second := make(chan error, 1)
		go func() {
			// A third of the old lease and of the refresh period: only the notice sent when
			// the first waiter took its turn can bring this waiter back in time.
			_, err := c.FairLock("taken", fairlock.WithRefreshPeriod(long)).Lock(redistest.Context(t, long/3))
			second <- err
		}()
		redistest.Eventually(t, 10*time.Second, "second waiter not queued", func() bool { return len(redistest.FairQueue(t, side, "taken")) == 2 })
		if err := c.FairLock("taken").Unlock(holder); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, first, 30*time.Second, "the first waiter's turn"); err != nil {
			t.Fatalf("first waiter: %v", err)
		}
		if err := redistest.Recv(t, second, time.Minute, "the second waiter's turn"); err != nil {
			t.Fatalf("second waiter, behind a hold of %v that is never unlocked: %v", lease, err)
		}
	})
}

// A waiter that gives up when its turn may have come (the lock is free) passes the turn
// on: the waiter behind it is woken and acquires, rather than sleeping until its own time
// bound.
func TestWaiterGivingUpPassesItsTurn(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const long = time.Minute // the holder's lease and both waiters' refresh period
		c := relocktest.New(t, b)
		side := b.Client(t)
		// The first waiter must be parked when the lock is freed. Nothing outside the client
		// shows when it is, and a waiter may look once more on its own (its subscription
		// confirmed after its attempt): one that took the freed lock so, before it gave up,
		// gives no answer, and the scene is set again on a new lock.
		for try := 0; ; try++ {
			if try == 5 {
				t.Fatal("the first waiter took the freed lock before it gave up, 5 times out of 5")
			}
			name := "givenup" + strconv.Itoa(try)
			if _, err := c.FairLock(name).Lock(redistest.Context(t, time.Minute), rlock.WithLease(long)); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(redistest.Context(t, time.Minute))
			defer cancel()
			type result struct {
				held context.Context
				err  error
			}
			first := make(chan result, 1)
			go func() {
				held, err := c.FairLock(name, fairlock.WithRefreshPeriod(long)).Lock(ctx)
				first <- result{held, err}
			}()
			redistest.Eventually(t, 10*time.Second, "first waiter not queued", func() bool { return len(redistest.FairQueue(t, side, name)) == 1 })
			second := make(chan error, 1)
			go func() {
				// A third of the holder's lease and of the refresh period: only the first
				// waiter's leaving can wake this one in time.
				held, err := c.FairLock(name, fairlock.WithRefreshPeriod(long)).Lock(redistest.Context(t, long/3))
				if err == nil {
					err = c.FairLock(name).Unlock(held)
				}
				second <- err
			}()
			redistest.Eventually(t, 10*time.Second, "second waiter not queued", func() bool { return len(redistest.FairQueue(t, side, name)) == 2 })
			redistest.Do(t, side, "DEL", name) // free, and nobody told
			cancel()
			got := redistest.Recv(t, first, 30*time.Second, "the first waiter's return")
			if got.err == nil {
				// It looked on its own and took the lock: the second waiter follows it.
				if err := c.FairLock(name).Unlock(got.held); err != nil {
					t.Fatal(err)
				}
				if err := redistest.Recv(t, second, time.Minute, "the second waiter, after the first's unlock"); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if !errors.Is(got.err, context.Canceled) {
				t.Fatalf("first waiter: %v; want context.Canceled", got.err)
			}
			if err := redistest.Recv(t, second, time.Minute, "the second waiter's turn"); err != nil {
				t.Fatalf("second waiter, after the first gave up at a free lock: %v", err)
			}
			return
		}
	})
}

// The longest refresh period a waiter may ask for keeps its entry in the queue, in its
// place: a period over a hundred years is taken as a hundred years, as good as none, and
// the entry lives twice that. Guards against an entry's life that overflows the server's
// clock (miniredis deletes a key whose PEXPIRE overflows at once: the waiter then waited
// forever, and the one behind it took its turn).
func TestLongestRefreshPeriod(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, 20*time.Second)
		mu := c.FairLock("forever")
		holder, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		granted := make(chan string, 2)
		var waiters sync.WaitGroup
		t.Cleanup(waiters.Wait)
		queueUp := func(who string, opts ...fairlock.Option) {
			waiters.Add(1)
			go func() {
				defer waiters.Done()
				held, err := mu.Lock(ctx, opts...)
				if err != nil {
					granted <- who + ": " + err.Error()
					return
				}
				granted <- who
				_ = mu.Unlock(held)
			}()
		}
		queueUp("patient", fairlock.WithRefreshPeriod(math.MaxInt64))
		redistest.Eventually(t, 5*time.Second, "patient waiter not queued", func() bool { return len(redistest.FairQueue(t, side, "forever")) == 1 })
		queueUp("late")
		redistest.Eventually(t, 5*time.Second, "late waiter not queued", func() bool { return len(redistest.FairQueue(t, side, "forever")) == 2 })
		if err := mu.Unlock(holder); err != nil {
			t.Fatal(err)
		}
		if first, second := redistest.Recv(t, granted, 10*time.Second, "the first grant"), redistest.Recv(t, granted, 10*time.Second, "the second grant"); first != "patient" || second != "late" {
			t.Fatalf("granted to %q, then %q; want the patient waiter first", first, second)
		}
	})
}

// Waiters of one fair lock may refresh at different periods (each FairLock handle sets its
// own). A waiter with a short period that joins behind one with a long period, and then
// leaves, must not take the queue's keys with it: the patient waiter is live, and a live
// waiter is never evicted (docs/design.md, "The fair lock"). So the queue's expiry is only
// ever pushed later, to the last live entry's deadline; and the holder's unlock wakes the
// patient waiter at once, not at its next refresh.
func TestShortRefreshKeepsLongerEntries(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const patientRefresh, hastyRefresh = 20 * time.Second, 20 * time.Millisecond
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		mu := c.FairLock("mixed")
		holder, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		granted := make(chan string, 1)
		var waiters sync.WaitGroup
		t.Cleanup(waiters.Wait)
		waiters.Add(1)
		go func() {
			defer waiters.Done()
			held, err := mu.Lock(ctx, fairlock.WithRefreshPeriod(patientRefresh))
			if err != nil {
				granted <- "patient: " + err.Error()
				return
			}
			granted <- "patient"
			_ = mu.Unlock(held)
		}()
		redistest.Eventually(t, 5*time.Second, "patient waiter not queued", func() bool { return len(redistest.FairQueue(t, side, "mixed")) == 1 })
		patient := redistest.FairQueue(t, side, "mixed")[0]
		hastyCtx, leave := context.WithCancel(ctx)
		left := make(chan error, 1)
		go func() {
			_, err := mu.Lock(hastyCtx, fairlock.WithRefreshPeriod(hastyRefresh))
			left <- err
		}()
		redistest.Eventually(t, 5*time.Second, "hasty waiter not queued", func() bool { return len(redistest.FairQueue(t, side, "mixed")) == 2 })
		leave()
		if err := redistest.Recv(t, left, 10*time.Second, "the hasty waiter's return"); !errors.Is(err, context.Canceled) {
			t.Fatalf("hasty waiter: %v, want context.Canceled", err)
		}
		time.Sleep(10 * 2 * hastyRefresh) // ten of the hasty waiter's entry lifetimes
		if q := redistest.FairQueue(t, side, "mixed"); len(q) != 1 || q[0] != patient {
			t.Fatalf("after the hasty waiter left, the queue is %v; want the patient waiter [%s] still in it", q, patient)
		}
		if err := mu.Unlock(holder); err != nil {
			t.Fatal(err)
		}
		// Well before the patient waiter's own refresh: the unlock wakes it.
		if who := redistest.Recv(t, granted, patientRefresh/2, "the patient waiter's grant"); who != "patient" {
			t.Fatalf("granted to %q; want the patient waiter", who)
		}
	})
}

// The fair lock answers Redisson's RLock questions as its own tests ask them
// (RedissonFairLockTest: getHoldCount, isHeldByCurrentThread and isLocked, seen by the owner
// and by another, re-entry through tryLock refused to another owner, unlock by a non-owner,
// a fixed lease that runs out under its holder), and the holder re-enters through TryLock
// also while another client's waiter is queued, where a first TryLock of anyone else fails.
// A fixed lease that ran out makes the holder's Unlock fail with ErrNotHeld, as the
// migration guide says (Redisson's fair unlock returns quietly).
//
// Guards against a fair TryLock that looks at the queue before the owner's own hold (the
// holder's re-entry refused while somebody waits), and against answers that differ from
// rlock's.
func TestFairAnswersLikeRLock(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "fair:like-rlock"
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		mu := c1.FairLock(name, fairlock.WithRefreshPeriod(time.Minute))
		other := c2.FairLock(name, fairlock.WithRefreshPeriod(time.Minute))
		ctx := redistest.Context(t, time.Minute)
		owner, stranger := relock.NewOwner(ctx), relock.NewOwner(ctx)
		state := func(what string, count int, locked bool) {
			t.Helper()
			relocktest.CheckHolds(t, what, mu, owner, count, other, stranger, locked)
		}

		state("free", 0, false)
		held, err := mu.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		state("held", 1, true)
		again, err := mu.TryLock(held)
		if err != nil {
			t.Fatalf("re-entry by TryLock: %v", err)
		}
		state("re-entered", 2, true)
		if _, err := other.TryLock(stranger); !errors.Is(err, relock.ErrLocked) {
			t.Errorf("TryLock by another owner: %v; want ErrLocked", err)
		}
		if err := other.Unlock(stranger); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock by another owner: %v; want ErrNotHeld", err)
		}
		state("after a stranger's unlock", 2, true)

		// Another client's waiter queues; the holder still re-enters by TryLock.
		wctx, cancel := context.WithCancel(stranger)
		defer cancel()
		waited := make(chan error, 1)
		go func() {
			h, err := other.Lock(wctx)
			if err == nil {
				err = other.Unlock(h)
			}
			waited <- err
		}()
		redistest.Eventually(t, 10*time.Second, "the waiter did not queue", func() bool { return len(redistest.FairQueue(t, side, name)) == 1 })
		third, err := mu.TryLock(again)
		if err != nil {
			t.Fatalf("re-entry by TryLock while another owner waits: %v", err)
		}
		state("re-entered with a waiter", 3, true)
		if _, err := mu.TryLock(relock.NewOwner(ctx)); !errors.Is(err, relock.ErrLocked) {
			t.Errorf("a first TryLock of a third owner: %v; want ErrLocked", err)
		}
		for i, h := range []context.Context{third, again, held} {
			if err := mu.Unlock(h); err != nil {
				t.Fatalf("unlock %d: %v", i+1, err)
			}
		}
		if err := redistest.Recv(t, waited, 15*time.Second, "the queued waiter after the last unlock"); err != nil {
			t.Fatalf("waiter: %v", err)
		}
		state("unlocked", 0, false)
		if err := mu.Unlock(owner); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock of a free lock: %v; want ErrNotHeld", err)
		}

		// A fixed lease runs out under its holder: another client's waiter gets the lock,
		// and the holder's unlock is refused without touching the new hold.
		const lease = time.Second
		held, err = mu.Lock(owner, rlock.WithLease(lease))
		if err != nil {
			t.Fatal(err)
		}
		lctx, lcancel := context.WithTimeout(stranger, 20*time.Second)
		defer lcancel()
		theirs, err := other.Lock(lctx)
		if err != nil {
			t.Fatalf("a waiter behind a %v lease that runs out: %v", lease, err)
		}
		if err := mu.Unlock(held); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock after the lease ran out: %v; want ErrNotHeld", err)
		}
		if n, err := other.HoldCount(theirs); n != 1 || err != nil {
			t.Errorf("the new holder's HoldCount after the old holder's Unlock = %d, %v; want 1", n, err)
		}
		if err := other.Unlock(theirs); err != nil {
			t.Fatal(err)
		}
	})
}
