package relock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/embedded"
	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) {
	// Main also stops the Redis Cluster the "cluster" subtests share, and checks for leaked goroutines.
	os.Exit(redistest.Main(m))
}

// exampleWait polls cond until it holds: the examples wait on state they can observe, not
// on a sleep that a busy machine could outlast, and give up loudly after 30s.
func exampleWait(what string, cond func() bool) {
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			log.Fatalf("not within 30s: %s", what)
		}
	}
}

// The basic use: one Client per process, a Mutex per lock name, and the owner carried in
// the context that Lock returns. (The embedded Redis stands in for a real deployment: in a
// service, pass relock.New a rueidis client.)
func Example() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c := srv.Client()

	mu := c.Lock("orders:42")
	ctx, err := mu.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer mu.Unlock(ctx)

	// Passing the returned context re-enters the lock: the same owner.
	ctx, err = mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	n, _ := mu.HoldCount(ctx)
	fmt.Println("hold count:", n)
	if err := mu.Unlock(ctx); err != nil {
		log.Fatal(err)
	}

	// A context without the owner is another owner.
	_, err = mu.TryLock(context.Background())
	fmt.Println("other owner locked out:", errors.Is(err, relock.ErrLocked))
	// Output:
	// hold count: 2
	// other owner locked out: true
}

// A worker pool: each worker starts its own owner with NewOwner, because the context it
// inherits already carries the dispatcher's owner and would re-enter the dispatcher's
// locks instead of waiting for them.
func ExampleNewOwner() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c := srv.Client()

	ctx, err := c.Lock("batch").Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every worker takes the "ledger" lock in turn; without NewOwner they would
			// all be the dispatcher's owner and enter it together.
			err := c.Lock("ledger").Do(relock.NewOwner(ctx), func(context.Context) error {
				mu.Lock()
				total++
				mu.Unlock()
				return nil
			})
			if err != nil {
				log.Print(err)
			}
		}()
	}
	wg.Wait()
	if err := c.Lock("batch").Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("workers done:", total)
	// Output: workers done: 4
}

// Errors name the operation and the lock, and unwrap to the sentinel values.
func ExampleError() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	err = srv.Client().Lock("orders:42").Unlock(context.Background())
	fmt.Println(err)
	fmt.Println("not held:", errors.Is(err, relock.ErrNotHeld))
	var e *relock.Error
	if errors.As(err, &e) {
		fmt.Println("lock:", e.Name, "op:", e.Op)
	}
	// Output:
	// relock: unlock "orders:42": lock not held by this owner (this context carries no owner of this client: pass the one its Lock returned)
	// not held: true
	// lock: orders:42 op: unlock
}

// Stats shows the waiting machinery at work: a waiter parked behind a holder is woken by
// the unlock message, not by its time bound.
func ExampleClient_PubSubStats() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c := srv.Client()
	mu := c.Lock("report")

	held, _ := mu.Lock(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h, err := mu.Lock(context.Background()) // another owner: waits
		if err == nil {
			_ = mu.Unlock(h)
		}
	}()
	exampleWait("the waiter parked", func() bool { return c.PubSubStats().Waiting == 1 })
	_ = mu.Unlock(held)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		log.Fatal("the waiter did not get the lock")
	}
	st := c.PubSubStats()
	fmt.Println("woken by a message:", st.Woken, "by the time bound:", st.TimedOut)
	// Output: woken by a message: 1 by the time bound: 0
}

// WatchdogStats counts lease renewals: a hold kept past its lease is renewed, in one
// script call per round.
func ExampleClient_WatchdogStats() {
	// A short lease, renewed every 500ms, with a second of room for a late round.
	srv, err := embedded.Start(relock.WithWatchdogTimeout(1500 * time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c := srv.Client()

	held, _ := c.Lock("nightly").Lock(context.Background())
	// Wait for the renewals themselves rather than for a stretch of time: on a busy
	// machine a round may come late, never early.
	exampleWait("two renewals", func() bool { return c.WatchdogStats().Renewed >= 2 })
	ttl, _ := c.Lock("nightly").TTL(held)
	fmt.Println("still held past its first lease:", held.Err() == nil && ttl > 0)
	_ = c.Lock("nightly").Unlock(held)
	// No round runs after the unlock, but the last one's count lands just after it.
	exampleWait("the last round counted", func() bool {
		st := c.WatchdogStats()
		return st.Ticks >= st.Renewed
	})
	st := c.WatchdogStats()
	fmt.Println("renewed:", st.Renewed >= 2, "calls per round:", st.Calls/st.Ticks, "holds left:", st.Holds)
	// Output:
	// still held past its first lease: true
	// renewed: true calls per round: 1 holds left: 0
}

// Options come from a service's configuration and are checked once, by New: a value out
// of range fails there, not at the first lock.
func ExampleOption() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	opts := []relock.Option{
		relock.WithWatchdogTimeout(5 * time.Second), // lease of holds without WithLease
		relock.WithTimeout(time.Second),             // bound of an acquire attempt and of Unlock
	}
	c, err := relock.New(srv.Redis(), opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	mu := c.Lock("orders:42")
	held, err := mu.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	ttl, _ := mu.TTL(held)
	fmt.Println("lease is the watchdog timeout:", ttl > 4*time.Second && ttl <= 5*time.Second)
	fmt.Println("unlock:", mu.Unlock(held))

	_, err = relock.New(srv.Redis(), append(opts, relock.WithWatchdogTimeout(0))...)
	fmt.Println("zero watchdog timeout refused:", errors.Is(err, relock.ErrInvalidLease))
	_, err = relock.New(srv.Redis(), relock.WithSyncReplicas(0, time.Second))
	fmt.Println("zero replicas refused:", errors.Is(err, relock.ErrInvalidOption))
	// Output:
	// lease is the watchdog timeout: true
	// unlock: <nil>
	// zero watchdog timeout refused: true
	// zero replicas refused: true
}
