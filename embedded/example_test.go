package embedded_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/embedded"
)

// Start gives a ready relock client on an in-process Redis: no server to install.
func ExampleStart() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	err = srv.Client().Lock("demo").Do(context.Background(), func(ctx context.Context) error {
		fmt.Println("inside the lock")
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// inside the lock
	// err: <nil>
}

// Clients on one in-process Redis behave as separate processes would: each has its own
// client id, and one waits for the other's unlock. Redis holds what a Java service using
// Redisson would see: the owner (client id and a number) and its hold count.
func ExampleServer() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	first := srv.Client()
	second, err := srv.NewClient()
	if err != nil {
		log.Fatal(err)
	}

	held, err := first.Lock("orders:42").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	rc := srv.Redis()
	owners, err := rc.Do(ctx, rc.B().Hgetall().Key("orders:42").Build()).AsStrMap()
	if err != nil {
		log.Fatal(err)
	}
	for owner, count := range owners {
		fmt.Println("held by the first client:", strings.HasPrefix(owner, first.ID()+":"), "hold count:", count)
	}

	done := make(chan error, 1)
	go func() {
		done <- second.Lock("orders:42").Do(ctx, func(context.Context) error {
			fmt.Println("the second client is inside")
			return nil
		})
	}()
	for deadline := time.Now().Add(30 * time.Second); second.PubSubStats().Waiting == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			log.Fatal("the second client never waited")
		}
	}
	fmt.Println("the first client unlocks")
	if err := first.Lock("orders:42").Unlock(held); err != nil {
		log.Fatal(err)
	}
	select {
	case err := <-done:
		fmt.Println("second client:", err)
	case <-time.After(30 * time.Second):
		log.Fatal("the second client did not get the lock")
	}
	// Output:
	// held by the first client: true hold count: 1
	// the first client unlocks
	// the second client is inside
	// second client: <nil>
}

// NewRedisClient connects another rueidis client to the in-process Redis, set up as
// miniredis needs it: here for a relock client made with relock.New and options of its
// own, as a service makes its client.
func ExampleNewRedisClient() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()

	rc, err := embedded.NewRedisClient(srv.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	c, err := relock.New(rc, relock.WithWatchdogTimeout(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // before rc.Close: deferred calls run last first

	mu := c.Lock("orders:42")
	held, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	ttl, _ := mu.TTL(held)
	fmt.Println("lease is the watchdog timeout:", ttl > 4*time.Second && ttl <= 5*time.Second)
	locked, _ := srv.Client().Lock("orders:42").IsLocked(ctx)
	fmt.Println("locked, as the server's own client sees it:", locked)
	fmt.Println("unlock:", mu.Unlock(held))
	// Output:
	// lease is the watchdog timeout: true
	// locked, as the server's own client sees it: true
	// unlock: <nil>
}
