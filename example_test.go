package relock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/embedded"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
