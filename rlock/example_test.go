package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/embedded"
	"github.com/relock-go/relock/rlock"
)

// TryLock makes one attempt and tells a held lock apart from a failure.
func ExampleMutex_TryLock() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	mu := srv.Client().Lock("report")

	held, err := mu.TryLock(context.Background())
	fmt.Println("first attempt:", err)
	_, err = mu.TryLock(context.Background())
	fmt.Println("second owner locked out:", errors.Is(err, relock.ErrLocked))
	fmt.Println("unlock:", mu.Unlock(held))
	// Output:
	// first attempt: <nil>
	// second owner locked out: true
	// unlock: <nil>
}

// Do locks, runs the function with the lock's context, and unlocks, even on panic.
func ExampleMutex_Do() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	mu := srv.Client().Lock("invoice:7")

	err = mu.Do(context.Background(), func(ctx context.Context) error {
		held, _ := mu.IsHeld(ctx)
		fmt.Println("held inside:", held)
		return nil
	})
	locked, _ := mu.IsLocked(context.Background())
	fmt.Println("err:", err, "locked after:", locked)
	// Output:
	// held inside: true
	// err: <nil> locked after: false
}

// WithLease takes the lock for a fixed time with no renewal: if the holder does not
// unlock in time, the lock expires and the next owner gets it.
func ExampleWithLease() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	mu := srv.Client().Lock("cron:nightly")

	if _, err := mu.Lock(context.Background(), rlock.WithLease(100*time.Millisecond)); err != nil {
		log.Fatal(err)
	}
	// Another owner waits at most until the lease runs out.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, err := mu.Lock(ctx)
	fmt.Println("second owner acquired after the lease:", err == nil)
	_ = mu.Unlock(held)
	// Output: second owner acquired after the lease: true
}
