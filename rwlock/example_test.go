package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/embedded"
	"github.com/relock-go/relock/rwlock"
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

// With writer preference a waiting writer holds new readers back, so that a steady stream
// of readers cannot keep it out forever.
func ExampleWithWriterPreference() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c := srv.Client()
	rw := c.RWLock("catalog", rwlock.WithWriterPreference()) // readers and writers alike
	ctx := context.Background()

	reader, err := rw.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		w, err := rw.Lock(relock.NewOwner(ctx)) // waits for the reader, registered
		if err == nil {
			err = rw.Unlock(w)
		}
		wrote <- err
	}()
	// The writer is parked, and so registered (bounded, should it fail instead).
	for end := time.Now().Add(30 * time.Second); c.PubSubStats().Waiting == 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	_, err = rw.TryRLock(relock.NewOwner(ctx))
	fmt.Println("new reader gives way:", errors.Is(err, relock.ErrLocked))
	_ = rw.RUnlock(reader)
	select {
	case err := <-wrote:
		fmt.Println("writer:", err)
	case <-time.After(30 * time.Second):
		log.Fatal("the writer did not get the lock")
	}
	// Output:
	// new reader gives way: true
	// writer: <nil>
}
