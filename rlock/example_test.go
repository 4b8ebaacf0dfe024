package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
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

// store is a resource guarded by a fenced lock: it remembers the highest token it has
// accepted and turns away writes that carry a lower one.
type store struct {
	mu        sync.Mutex
	lastToken int64
	value     string
}

func (s *store) put(token int64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.lastToken {
		return fmt.Errorf("stale token %d (seen %d)", token, s.lastToken)
	}
	s.lastToken, s.value = token, value
	return nil
}

// WithFencing hands every holder a token that grows with each acquisition. A holder that
// lost its lease without noticing (a long GC pause, a failover) still carries its old
// token, so the resource can turn its late write away.
func ExampleWithFencing() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c := srv.Client()
	var db store

	slow := c.Lock("ledger", rlock.WithFencing())
	held, err := slow.Lock(context.Background(), rlock.WithLease(50*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	oldToken, _ := slow.Token(held)
	// The holder stalls past its lease; its context tells why.
	select {
	case <-held.Done():
	case <-time.After(30 * time.Second):
		log.Fatal("the hold's context did not end at its lease")
	}
	fmt.Println("first holder:", context.Cause(held))

	next, err := c.Lock("ledger", rlock.WithFencing()).Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	newToken, _ := slow.Token(next)
	fmt.Println("second holder writes:", db.put(newToken, "fresh"))
	fmt.Println("first holder writes late:", db.put(oldToken, "stale") != nil)
	fmt.Println("value:", db.value)
	// Output:
	// first holder: lease lost
	// second holder writes: <nil>
	// first holder writes late: true
	// value: fresh
}
