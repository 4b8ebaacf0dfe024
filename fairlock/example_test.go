package fairlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/relock-go/relock/embedded"
)

// Waiters get a fair lock in the order they arrived.
func ExampleMutex() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c := srv.Client()
	mu := c.FairLock("jobs")

	held, err := mu.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	granted := make(chan string, 3)
	for i, who := range []string{"first", "second", "third"} {
		go func() {
			h, err := mu.Lock(context.Background())
			if err != nil {
				log.Print(err)
				return
			}
			granted <- who
			_ = mu.Unlock(h)
		}()
		// The next arrives only once this one is parked in the queue, so that their
		// order is known.
		for end := time.Now().Add(30 * time.Second); c.PubSubStats().Waiting < i+1 && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
	}
	if err := mu.Unlock(held); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		select {
		case who := <-granted:
			fmt.Println(who)
		case <-time.After(30 * time.Second):
			log.Fatal("a waiter did not get its turn")
		}
	}
	// Output:
	// first
	// second
	// third
}
