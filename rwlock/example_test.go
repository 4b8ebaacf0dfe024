package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/embedded"
)

// Readers share the lock; a writer may also read (downgrade), but a reader may not write.
func ExampleRWMutex() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rw := srv.Client().RWLock("config")
	ctx := context.Background()

	r1, _ := rw.RLock(ctx)
	r2, _ := rw.RLock(relock.NewOwner(ctx)) // a second reader beside the first
	_, err = rw.TryLock(relock.NewOwner(ctx))
	fmt.Println("writer while reading:", errors.Is(err, relock.ErrLocked))
	_, err = rw.Lock(r1)
	fmt.Println("reader upgrading:", errors.Is(err, relock.ErrUpgrade))
	_ = rw.RUnlock(r1)
	_ = rw.RUnlock(r2)

	w, _ := rw.Lock(ctx)
	w, _ = rw.RLock(w) // the writer takes a read hold...
	_ = rw.Unlock(w)   // ...and is a reader once it gives up writing
	n, _ := rw.RHoldCount(w)
	fmt.Println("read holds after the downgrade:", n)
	_ = rw.RUnlock(w)
	// Output:
	// writer while reading: true
	// reader upgrading: true
	// read holds after the downgrade: 1
}
